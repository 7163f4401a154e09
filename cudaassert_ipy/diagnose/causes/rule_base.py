"""What a post-mortem rule gets (a :class:`Case`) and gives back (a :class:`Finding`), plus shared picks.

A rule is a small function, one per family of causes, that reasons on plain facts only: the
:class:`~cudaassert_ipy.diagnose.evidence.Evidence` dataclasses, never live objects. It returns
None when the case is not its own. The wording of every fix comes from :mod:`..hints`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from cudaassert_ipy.diagnose.culprit import Culprit
    from cudaassert_ipy.diagnose.evidence import Evidence
    from cudaassert_ipy.diagnose.facts import ModuleFact
    from cudaassert_ipy.diagnose.hints import Facts

__all__ = ["Case", "Finding", "Rule", "RuleEntry", "api_names", "call_in_source", "last_linear", "pick", "range_text"]

#: Follows the rule's own sentences: the fix worded by :mod:`..hints`.
LIKELY_FIX = "Likely fix: {fix}."


@dataclass
class Finding:
    """What one rule found: sentences for the report, evidence lines, the op, and the specific fix."""

    sentences: list[str] = field(default_factory=list)
    facts: list[tuple[str, str]] = field(default_factory=list)
    op: str | None = None
    fix: str | None = None  # from hints: the same string the validators and preflight show
    culprit: Culprit | None = None  # what a patch would change (diagnose/culprit.py), when the rule knows

    @property
    def specific(self) -> str | None:
        parts = list(self.sentences)
        if self.fix:
            parts.append(LIKELY_FIX.format(fix=self.fix))
        return " ".join(parts) or None


@dataclass(frozen=True)
class Case:
    """One failure to explain: the evidence, the matched cause, and what the error itself already said."""

    ev: Evidence
    cause_id: str
    group: str | None = None
    value: int | None = None  # the offending value named by the error text (CPU twins), if any
    known: Facts | None = None  # the facts a validator worked out before raising, if any


Rule = Callable[[Case], Finding | None]


@dataclass(frozen=True)
class RuleEntry:
    """A rule and the cause ids or catalogue groups it explains.

    To add one (say for Triton asserts), write ``rule_<family>.py`` with a function
    ``(Case) -> Finding | None`` and append ``RuleEntry("<family>", frozenset({...}), fn)`` to
    :data:`cudaassert_ipy.diagnose.causes.rules.RULES`.
    """

    name: str
    keys: frozenset[str]  # cause ids and/or groups
    run: Rule

    def applies(self, cause_id: str, group: str | None) -> bool:
        return cause_id in self.keys or (group is not None and group in self.keys)


class _Named(Protocol):
    @property
    def name(self) -> str: ...


_T = TypeVar("_T", bound=_Named)


def pick(items: Sequence[_T], words: tuple[str, ...], source: str) -> list[_T]:
    """Order candidates: named in the cell first, then by name words."""

    def score(item: _T) -> tuple[bool, bool]:
        name = item.name.split(":")[-1]
        root = name.split(".")[0]
        return (root in source, any(w in name.lower() for w in words))

    return sorted(items, key=score, reverse=True)


def last_linear(ev: Evidence) -> ModuleFact | None:
    """The last ``nn.Linear`` of the model the cell names (else of the first model seen)."""
    if not ev.linears:
        return None
    roots: dict[str, list[ModuleFact]] = {}
    for lin in ev.linears:
        roots.setdefault(lin.name.split(".")[0], []).append(lin)
    named = [r for r in roots if r in ev.cell_source] or list(roots)
    return roots[named[0]][-1]


def range_text(n: int) -> str:
    return f"0..{n - 1}" if n > 0 else "none (the dimension is empty)"


_API = re.compile(r"\b(?:torch|Tensor|nn|F|functional|torch_scatter|mmcv\.ops)\.(?:[a-z_]+\.)*([A-Za-z_]\w*)")


def api_names(apis: Iterable[str]) -> tuple[str, ...]:
    """The callable names a catalogue entry's ``python_apis`` mention (``torch.topk`` -> ``topk``), in order."""
    names: list[str] = []
    for text in apis:
        for name in _API.findall(text):
            if name not in names:
                names.append(name)
    return tuple(names)


def call_in_source(ev: Evidence, names: Iterable[str]) -> str | None:
    """The first of ``names`` the failing cell (or the user's failing line) calls, as written: ``topk``."""
    code = ev.cell_source + "\n" + (ev.user_frame[2] if ev.user_frame else "")
    for name in names:
        if re.search(r"(?<![\w])" + re.escape(name) + r"\s*\(", code):
            return name
    return None
