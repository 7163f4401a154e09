"""The adapter shape and the plain values adapters hand back (see the package docstring for how to add one).

Standard library only, and no framework is ever imported: adapters look at frames, at objects found in
them and in the user's namespace, and at ``sys.modules``, duck-typing by class names and attributes.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cudaassert_ipy.base.wording import error_line

__all__ = [
    "BAD_LABEL",
    "Adapter",
    "Ahead",
    "BatchIndices",
    "ClassHead",
    "Found",
    "Launch",
    "Reader",
    "Stack",
    "Step",
    "class_module",
    "frame_module",
    "frame_self",
    "in_packages",
    "is_class",
    "made_by",
]


@dataclass(frozen=True)
class ClassHead:
    """Where the user's framework sets the model's number of classes: the parameters of the fix's words.

    ``diagnose/hints.py`` words the fix from it with the adapter's ``head_words[framework]``.
    """

    framework: str  # a key of its adapter's head_words: "transformers", "lightning", "fastai_model", "keras"
    now: int | None = None  # the class count the head has now (config.num_labels=3)
    setting: str = ""  # the framework's knob: "num_labels", "num_classes", "nc", "units"
    owner: str = ""  # who holds the knob, as the user knows it: "LitClassifier", "model.config"
    file: str = ""  # the file that sets the knob, when a file does: Ultralytics' data YAML (its ``nc:``)


@dataclass(frozen=True)
class Step:
    """A framework step that ran after the first failure, named for the follow-on line."""

    label: str  # "Lightning's teardown (moving the model to the CPU)"
    lost: str = ""  # what it failed to write, now missing: "the checkpoint"


@dataclass(frozen=True)
class Launch:
    """A failure in another process that the notebook sees only as a launcher's or an engine's wrapper.

    The diagnosis is built from what that process wrote: the child's error the wrapper carries (``error``,
    ``text``), else the captured output (diagnose/launched.py).
    """

    wrapper: str  # what the cell got, in words: "torch.distributed.elastic's ChildFailedError (notebook_launcher, ...)"
    process: str = ""  # the first process that failed: "rank 1 (first observed failure)", "vLLM's EngineCore"
    #: the child's error as the wrapper carries it: (type name as printed, message); None when it carries none
    error: tuple[str, str] | None = None
    text: str = ""  # the child's output the wrapper carries (a traceback, its captured stderr)
    #: what runs the child, for the words of what to do after the fix (diagnose/launched.py ``AGAIN``):
    #: "launcher" (launch it again), "engine" (an inference engine object to create again), "server"
    relaunch: str = "launcher"
    #: the launcher's other failed processes, in the order they failed, with the error each carries:
    #: (process, (type name, message)); the root cause may only have lost its connection to one of them
    others: tuple[tuple[str, tuple[str, str]], ...] = ()
    #: the "Bad samples" lines the failing child printed from its DataLoader bookmark: (kind of value, line)
    samples: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Found:
    """What one adapter found where its framework keeps things."""

    #: (the name the user knows it by, a live object) for the generic fact scanner: models, tokenizers,
    #: configs, datasets, batch tensors. Read once by diagnose/evidence.py, never kept.
    objects: tuple[tuple[str, Any], ...] = ()
    #: evidence lines only this framework knows: ("model.hparams", "num_classes=3")
    facts: tuple[tuple[str, str], ...] = ()
    head: ClassHead | None = None
    #: how many classes the data declares, by where: ("trainer.train_dataset.features['label']", 4)
    declared: tuple[tuple[str, int], ...] = ()
    #: notes to add, as keys of the adapter's ``advice_words`` (hints.FRAMEWORK_ADVICE): ("keras_filtered",)
    advice: tuple[str, ...] = ()


@dataclass(frozen=True)
class Ahead:
    """How many batches a loader had yielded after the one being processed at the error: low..high (what a
    framework's ``ahead`` hook says of one iteration; data/loaders sums them and sizes the bookmark by them)."""

    low: int
    high: int
    why: tuple[str, ...]  # one clause per framework that fetches ahead

    def __add__(self, other: Ahead) -> Ahead:
        return Ahead(self.low + other.low, self.high + other.high, self.why + other.why)


#: What a ``batches`` hook says of an iteration whose torch "indices" are not dataset indices (fastai's counter):
#: (batch number (0-based) -> the dataset indices it holds, the dataset they index, the framework's loader object).
BatchIndices = tuple[Callable[[int], Sequence[Any] | None], Any, Any]


@dataclass(frozen=True)
class Stack:
    """The frames of the first error (outermost first) and the user's namespace: what adapters look at."""

    frames: tuple[types.FrameType, ...] = ()
    user_ns: Mapping[str, Any] = field(default_factory=dict)

    def selves(self, *packages: str) -> Iterator[tuple[types.FrameType, Any]]:
        """(frame, its ``self``) for frames running a method of an object made by ``packages`` (its class or a
        base class comes from them: a user's subclass counts), innermost first."""
        for frame in reversed(self.frames):
            obj = frame_self(frame)
            if obj is not None and made_by(obj, packages):
                yield frame, obj

    def name_of(self, obj: Any, default: str) -> str:
        """The name the user's namespace gives ``obj`` (``model``), else ``default`` (``trainer.model``)."""
        for name, value in list(self.user_ns.items()):
            if value is obj and not name.startswith("_"):
                return name
        return default

    def in_packages(self, *packages: str) -> bool:
        """Whether any frame runs code of ``packages`` (``"lightning"`` matches ``lightning.pytorch.trainer``)."""
        return any(in_packages(frame_module(f), packages) for f in self.frames)


class Reader:
    """Guarded reads from framework objects, remembering what could not be read (one line in the report).

    One per diagnosis; adapters never let an attribute's exception escape, they ask the reader.
    """

    def __init__(self) -> None:
        self.missing: list[str] = []

    def get(self, obj: Any, path: str, name: str, needed: bool = False) -> Any:
        """``obj.<path>`` (dotted), or None. A read that raises is recorded as ``name.path (Error: text)``;
        with ``needed``, a missing or None value is recorded too."""
        value = obj
        for part in path.split("."):
            try:
                value = getattr(value, part)
            except AttributeError:
                value = None
            except Exception as error:  # a property that raises: say so once, go on without it
                self._note(f"{name}.{path} ({error_line(error)})")
                return None
            if value is None:
                break
        if value is None and needed:
            self._note(f"{name}.{path} (none)")
        return value

    def call(self, fn: Callable[[], Any], what: str) -> Any:
        """``fn()``, or None when it raises (recorded as ``what (Error: text)``)."""
        try:
            return fn()
        except Exception as error:
            self._note(f"{what} ({error_line(error)})")
            return None

    def _note(self, text: str) -> None:
        if text not in self.missing:
            self.missing.append(text)


@dataclass(frozen=True)
class Adapter:
    """One framework's knowledge: a set of guarded functions with one shape (each optional), and its words.

    Every hook runs only while one of ``packages`` is in ``sys.modules``, under a guard: an exception in a
    hook becomes one "[internal]" note and the generic path goes on. Which hooks a module defines is also
    written in its row of ``table.py`` (``ROWS``), so that data/ can load only the modules it needs.
    """

    name: str  # the module name under cudaassert_ipy/frameworks/: "transformers"
    packages: tuple[str, ...]  # top-level import names that make it active: ("lightning", "pytorch_lightning")
    #: does this stack belong to me (default: a frame runs code from one of ``packages``)
    owns: Callable[[Stack], bool] | None = None
    #: the error's own text when my framework rewrote or wrapped it (a prefix, ANSI codes), else None
    unwrap: Callable[[BaseException, str], str | None] | None = None
    #: the host facts I know where to find, from the first error's frames and the user's namespace
    found: Callable[[Stack, Reader], Found | None] | None = None
    #: where this object (a model, a trainer) sets its class count: the parameters of my fix words
    head: Callable[[Any, str, Reader], ClassHead | None] | None = None
    #: which of my steps raised a later (follow-on) error, from that error's frames (outermost first)
    step: Callable[[Sequence[types.FrameType]], Step | None] | None = None
    #: this exception is only my launcher's (engine's) wrapper around another process's failure: what it says
    launch: Callable[[BaseException], Launch | None] | None = None
    # -- words: plain data that diagnose/hints.py composes into its sentences (hints stays the one place that
    #    words a fix; the framework's own terms live with the framework)
    #: how I set a model's class count, by ``ClassHead.framework``; {n}: the count wanted, {now}: the count now,
    #: {setting}: the knob's name, {owner}: who holds it (``hints.HEAD_WORDS`` reads them)
    head_words: Mapping[str, str] = field(default_factory=dict, compare=False)
    #: notes my ``found`` asks for by key (``Found.advice``), said once under the report (``hints.FRAMEWORK_ADVICE``)
    advice_words: Mapping[str, str] = field(default_factory=dict, compare=False)
    # -- what my loaders add to a torch DataLoader iteration (read by data/loaders, once per iteration)
    #: how many batches my loader (``obj``, the ``self`` of a frame of mine that asked for a batch; the frame) had
    #: fetched beyond the one it is processing
    ahead: Callable[[Any, types.FrameType], Ahead | None] | None = None
    #: the dataset indices behind each batch, from the iterator's ``_dataset``, where torch's indices are not them
    batches: Callable[[Any], BatchIndices | None] | None = None
    #: this object is one of my loaders (not a torch one): the records of its iterations are filed under it
    is_loader: Callable[[Any], bool] | None = None
    #: (the image's position in the batch, its file) for row ``row`` of a per-box field with ``rows`` rows
    image_of: Callable[[Any, int, int], tuple[int, str | None] | None] | None = None
    #: float batch fields that hold whole-number class labels (checked as labels by name)
    float_labels: tuple[str, ...] = ()

    def active(self, modules: Mapping[str, Any] = sys.modules) -> bool:
        return any(p in modules for p in self.packages)

    def owns_stack(self, stack: Stack) -> bool:
        return self.owns(stack) if self.owns is not None else stack.in_packages(*self.packages)


# -- small duck-typing helpers every adapter uses ----------------------------------------------------
def frame_module(frame: types.FrameType) -> str:
    """The module a frame runs code of (``lightning.pytorch.trainer.call``); "" when unknown."""
    name = frame.f_globals.get("__name__")
    return name if isinstance(name, str) else ""


def frame_self(frame: types.FrameType) -> Any:
    """The frame's ``self`` (the method's object), or None; reads one local, never all of them."""
    code = frame.f_code
    if not code.co_argcount or code.co_varnames[0] != "self":
        return None
    try:
        return frame.f_locals.get("self")
    except Exception:  # a frame whose locals cannot be read
        return None


def class_module(obj: Any) -> str:
    """The module of ``type(obj)`` (never ``obj.__class__``, which wrappers such as accelerate's fake)."""
    module = getattr(type(obj), "__module__", "")
    return module if isinstance(module, str) else ""


def made_by(obj: Any, packages: Sequence[str]) -> bool:
    """Whether ``type(obj)`` or one of its bases comes from ``packages`` (a user's subclass of a framework class
    counts: ``class MyTrainer(Trainer)`` defined in a notebook)."""
    try:
        return any(in_packages(getattr(t, "__module__", "") or "", packages) for t in type(obj).__mro__)
    except Exception:
        return False


def in_packages(module: str, packages: Sequence[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def is_class(obj: Any, name: str, packages: Sequence[str]) -> bool:
    """Whether ``type(obj)`` or one of its bases is the class ``name`` of ``packages`` (``is_class(obj, "Trainer",
    ("lightning", "pytorch_lightning"))``: a user's subclass counts); never raises."""
    try:
        return any(t.__name__ == name and in_packages(t.__module__, packages) for t in type(obj).__mro__)
    except Exception:
        return False


def class_names(obj: Any) -> tuple[str, ...]:
    """The names of ``type(obj)`` and its bases: duck-typing a framework class without importing it."""
    try:
        return tuple(t.__name__ for t in type(obj).__mro__)
    except Exception:
        return ()


#: The evidence line an adapter gives the one bad box it found (Ultralytics: its class id, label file and line);
#: diagnose/causes/rule_sizes.py words the cause from it.
BAD_LABEL = "batch's bad label"
