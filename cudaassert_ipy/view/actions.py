"""What the panel's buttons do, decided outside the panel (the panel only composes widgets).

The restart module builds these; the panel renders them. A button for an action that this
frontend cannot do is rendered disabled with its reason, never silently dead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cudaassert_ipy.fix.model import ProposedFix

__all__ = ["Action", "FixActions", "ReplayChoice"]


@dataclass(frozen=True)
class Action:
    key: str  # "restart_replay" | "restart_cpu" | "copy_report" | ...
    label: str  # "Restart & replay setup"
    callback: Callable[[Any], None] | None = None  # gets the clicked Button (or None from a magic)
    disabled_reason: str | None = None  # shown as the button's tooltip and beside it
    tooltip: str = ""

    @property
    def enabled(self) -> bool:
        return self.callback is not None and self.disabled_reason is None


@dataclass
class ReplayChoice:
    """One setup cell the restart would replay; the panel's checkbox flips ``selected``."""

    number: int  # execution count, as shown in the prompt [n]
    first_line: str
    duration: float  # seconds it took
    selected: bool = True
    keep: bool = False  # restore its values instead of replaying it (restart/keep/)


@dataclass(frozen=True)
class FixActions:
    """The panel's fix section: the proposed fix, and what Apply and Apply, Restart & replay do (the shell's
    ``%cudaassert fix apply [--restart] [--choose N]`` path, handed in)."""

    fix: ProposedFix
    #: (alternative number 1.., or None for the one the data decides for; restart) -> the line to show
    apply: Callable[[int | None, bool], str] | None = None
    editable: bool = False  # a frontend can edit the notebook's cell; else the panel offers the patched cell to copy
    restart_disabled: str | None = None  # why Apply, Restart & replay cannot run here
