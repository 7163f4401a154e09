"""Every adapter, and running them each under its own guard: a crashing adapter costs one note, never the report.

The functions here are what the rest of the package calls; each takes ``adapters`` (default: all of
them) and runs only the active ones, framework adapters before the generic one.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from cudaassert_ipy.base.wording import error_line
from cudaassert_ipy.frameworks import table
from cudaassert_ipy.frameworks.base import Adapter, ClassHead, Found, Launch, Reader, Stack, Step, frame_self

__all__ = [
    "ADAPTERS",
    "ADAPTER_FAILED",
    "WORDS",
    "Gathered",
    "active",
    "class_head_near",
    "class_head_of",
    "cleanup_step",
    "failure_notes",
    "gather",
    "launch_of",
    "own_text",
]

#: Every adapter, in the table's order (table.py): framework ones first; the generic (torch-level) one last.
ADAPTERS: tuple[Adapter, ...] = tuple(table.load(row.module) for row in table.ROWS)
#: Every adapter's words, merged, by kind: "head_words" (``ClassHead.framework`` -> how that framework sets a
#: class count) and "advice_words" (``Found.advice`` key -> a note); diagnose/hints.py composes the sentences.
WORDS: Mapping[str, Mapping[str, str]] = {
    "head_words": {key: text for a in ADAPTERS for key, text in a.head_words.items()},
    "advice_words": {key: text for a in ADAPTERS for key, text in a.advice_words.items()},
}

#: An adapter hook that raised, as a note in the report (like a crashing rule).
ADAPTER_FAILED = "[internal] the {adapter} adapter failed in {hook}: {error}; the rest of this report stands."

#: How far up from a validator's check ``class_head_near`` looks for the model or trainer.
NEAR_FRAMES = 64

_T = TypeVar("_T")
#: Namespace values that are never a model or a trainer (skipped when looking for a class head).
_NOT_MODELS = (types.ModuleType, type, types.FunctionType, int, str, float)


@dataclass(frozen=True)
class Gathered:
    """What every active adapter found for one failure, merged (first adapter wins a name)."""

    objects: tuple[tuple[str, Any], ...] = ()
    facts: tuple[tuple[str, str], ...] = ()
    head: ClassHead | None = None
    declared: tuple[tuple[str, int], ...] = ()  # (where, how many classes the data declares)
    missing: tuple[str, ...] = ()  # what could not be read, as "name.attr (why)"
    failures: tuple[tuple[str, str, str], ...] = ()  # (adapter, hook, "Error: text") for each crash
    owners: tuple[str, ...] = ()  # the adapters whose framework runs in the failing stack
    advice: tuple[str, ...] = ()  # keys of hints.FRAMEWORK_ADVICE the adapters asked for


def failure_notes(failures: Sequence[tuple[str, str, str]]) -> tuple[str, ...]:
    """One note per (adapter, hook, error) failure."""
    return tuple(ADAPTER_FAILED.format(adapter=a, hook=h, error=e) for a, h, e in failures)


def active(adapters: Sequence[Adapter] = ADAPTERS) -> tuple[Adapter, ...]:
    """The adapters whose framework is imported (in ``sys.modules``)."""
    return tuple(a for a in adapters if a.active())


class _Guard:
    """Runs hooks; an exception becomes a (adapter, hook, error) failure instead of escaping."""

    def __init__(self) -> None:
        self.failures: list[tuple[str, str, str]] = []

    def run(self, adapter: Adapter, hook: str, fn: Callable[..., _T], *args: Any) -> _T | None:
        try:
            return fn(*args)
        except Exception as error:  # one adapter's bug must not cost the report
            self.failures.append((adapter.name, hook, error_line(error)))
            return None


def gather(stack: Stack, adapters: Sequence[Adapter] = ADAPTERS) -> Gathered:
    """Run every active adapter's ``found`` and pick the class head, each under a guard."""
    guard, reader = _Guard(), Reader()
    running = active(adapters)
    owners = tuple(a.name for a in running if guard.run(a, "owns", a.owns_stack, stack))
    objects: dict[str, Any] = {}
    facts: dict[str, str] = {}
    declared: dict[str, int] = {}
    heads: list[ClassHead] = []
    advice: list[str] = []
    for adapter in running:
        hook = adapter.found
        if hook is None:
            continue
        found: Found | None = guard.run(adapter, "found", hook, stack, reader)
        if found is None:
            continue
        for name, obj in found.objects:
            objects.setdefault(name, obj)
        for key, value in found.facts:
            facts.setdefault(key, value)
        for key, n in found.declared:
            declared.setdefault(key, n)
        if found.head is not None:
            heads.append(found.head)
        advice += [key for key in found.advice if key not in advice]
    head = heads[0] if heads else _head(stack, list(objects.items()), running, guard, reader)
    return Gathered(
        objects=tuple(objects.items()),
        facts=tuple(facts.items()),
        head=head,
        declared=tuple(declared.items()),
        missing=tuple(reader.missing),
        failures=tuple(guard.failures),
        owners=owners,
        advice=tuple(advice),
    )


def _head(
    stack: Stack, objects: list[tuple[str, Any]], running: Sequence[Adapter], guard: _Guard, reader: Reader
) -> ClassHead | None:
    """The class head of the model that failed: a model running on the stack (innermost first), then what the
    adapters found, then the user's namespace."""
    found = {id(obj): name for name, obj in reversed(objects)}
    candidates: list[tuple[str, Any]] = []
    for frame in reversed(stack.frames):
        obj = frame_self(frame)
        if obj is not None:
            candidates.append((stack.name_of(obj, found.get(id(obj), type(obj).__name__)), obj))
    candidates += objects
    candidates += [(k, v) for k, v in list(stack.user_ns.items()) if not k.startswith("_")]
    seen: set[int] = set()
    for name, obj in candidates:
        if id(obj) in seen or isinstance(obj, _NOT_MODELS):
            continue
        seen.add(id(obj))
        head = _head_of(obj, name, running, guard, reader)
        if head is not None:
            return head
    return None


def _head_of(obj: Any, name: str, running: Sequence[Adapter], guard: _Guard, reader: Reader) -> ClassHead | None:
    for adapter in running:
        hook = adapter.head
        if hook is not None:
            head = guard.run(adapter, "head", hook, obj, name, reader)
            if head is not None:
                return head
    return None


def class_head_of(obj: Any, name: str = "model", adapters: Sequence[Adapter] = ADAPTERS) -> ClassHead | None:
    """Where ``obj`` (a model, a LightningModule, a Trainer) sets its class count, or None. Never raises."""
    return _head_of(obj, name, active(adapters), _Guard(), Reader())


def class_head_near(
    frame: types.FrameType | None, adapters: Sequence[Adapter] = ADAPTERS, depth: int = NEAR_FRAMES
) -> ClassHead | None:
    """The class head of the nearest model or trainer running around ``frame`` (walking outwards), else of one in
    the notebook's namespace (``__main__``'s globals, as the post-mortem looks there too: a timm model called in
    the user's own loop is not on the stack when the loss is checked): what a validator that stops a call words
    its fix with. Never raises."""
    running = active(adapters)
    if not running:
        return None
    guard, reader = _Guard(), Reader()
    seen: set[int] = set()
    main: Any = None
    while frame is not None and depth > 0:
        obj = frame_self(frame)
        if obj is not None and id(obj) not in seen:
            seen.add(id(obj))
            head = _head_of(obj, "self", running, guard, reader)
            if head is not None:
                return head
        if main is None and frame.f_globals.get("__name__") == "__main__":
            main = frame.f_globals
        frame, depth = frame.f_back, depth - 1
    for name, obj in list(main.items()) if main is not None else ():
        if name.startswith("_") or id(obj) in seen or isinstance(obj, _NOT_MODELS):
            continue
        head = _head_of(obj, name, running, guard, reader)
        if head is not None:
            return head
    return None


def cleanup_step(
    frames: Sequence[types.FrameType], adapters: Sequence[Adapter] = ADAPTERS
) -> tuple[Step | None, tuple[tuple[str, str, str], ...]]:
    """Which framework step raised a later error (its frames, outermost first), and any adapter crash."""
    guard = _Guard()
    for adapter in active(adapters):
        hook = adapter.step
        if hook is None:
            continue
        step = guard.run(adapter, "step", hook, frames)
        if step is not None:
            return step, tuple(guard.failures)
    return None, tuple(guard.failures)


def own_text(
    exc: BaseException, text: str, adapters: Sequence[Adapter] = ADAPTERS
) -> tuple[str | None, tuple[tuple[str, str, str], ...]]:
    """The error's own text when a framework rewrote or wrapped it (an adapter's ``unwrap``), else None."""
    guard = _Guard()
    for adapter in active(adapters):
        hook = adapter.unwrap
        if hook is None:
            continue
        own = guard.run(adapter, "unwrap", hook, exc, text)
        if own is not None:
            return own, tuple(guard.failures)
    return None, tuple(guard.failures)


def launch_of(
    exc: BaseException, adapters: Sequence[Adapter] = ADAPTERS, limit: int = 8
) -> tuple[tuple[BaseException, Launch] | None, tuple[tuple[str, str, str], ...]]:
    """The link of ``exc``'s chain (newest first) that is only a launcher's or engine's wrapper around a failure
    in another process, with what an adapter's ``launch`` says of it; and any adapter crash."""
    guard = _Guard()
    running = [a for a in active(adapters) if a.launch is not None]
    link: BaseException | None = exc
    seen: list[BaseException] = []
    while link is not None and len(seen) < limit and not any(link is s for s in seen):
        seen.append(link)
        for adapter in running:
            hook = adapter.launch
            if hook is not None:
                found = guard.run(adapter, "launch", hook, link)
                if found is not None:
                    return (link, found), tuple(guard.failures)
        link = link.__cause__ or link.__context__
    return None, tuple(guard.failures)
