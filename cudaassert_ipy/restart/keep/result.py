"""What keeping did, per cell and per name, and the messages that say it: shared by the save and the restore.

Standard library only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from cudaassert_ipy.base.wording import PREFIX
from cudaassert_ipy.restart import plan_files

__all__ = [
    "KeepBudget",
    "KeepCell",
    "KeepCellOutcome",
    "KeepResult",
    "ManifestCell",
    "ManifestEntry",
    "NameOutcome",
    "human_size",
    "keep_dir",
    "report",
]

KEEP_VERSION = 1
MANIFEST, VALUES = "manifest.json", "values.pickle"
# per-cell reasons (the replay view prints "[4] replayed: <reason>")
LATER_WRITE = "cell [{number}] changes `{name}` later, so the saved value would already hold that change"
EFFECT = "it does more than bind names (`{statement}`), which restoring values cannot redo"
CHANGES_MODULE = "it changes the module `{name}`, which restoring values cannot redo"
UNREADABLE = "its code could not be read ({error})"
WITH_NAME = "`{name}` {why}"
LOAD_FAILED = "`{name}` could not be loaded in this kernel ({error})"
NOT_SAVED = "it was not saved ({why})"
# one-line notes
SAVE_FAILED = "{prefix} Kept cells could not be saved ({why}); they replay instead."
RESTORE_REFUSED = (
    "{prefix} The kept values in {path} were refused: {why}. Nothing was restored from them; the kept "
    "cells replay instead."
)
# the replay view's lines
KEPT_LINE = "[{number}] kept: {names} (saved in {save:.1f} s, loaded in {load:.1f} s)"
KEPT_NAME = "`{name}` {size}"
REPLAYED_LINE = "[{number}] replayed: {reason}"
KEPT_HEADER = "{prefix} Kept across the restart:"
SUGGEST = (
    "{prefix} Replaying {cells} took {seconds:.1f} s, and they bind only CPU values: keep them across the next "
    "restart with `%cudaassert setup keep {numbers}` (or a first line `# cudaassert: keep`)."
)
SUGGEST_MIN_SECONDS = 2.0  # a replayed cell faster than this is not worth keeping
SUGGEST_MAX = 3


@dataclass(frozen=True)
class KeepCell:
    """A cell of the old kernel's history, in execution order; ``keep`` when the user asked to keep it."""

    number: int | None
    cell_id: str | None
    source: str
    keep: bool = False


@dataclass(frozen=True)
class KeepBudget:
    """Limits of one save: seconds in all, bytes in all, and disk space always left free."""

    seconds: float = 30.0
    max_bytes: int = 8 * 1024**3
    reserve_bytes: int = 512 * 1024**2


@dataclass(frozen=True)
class NameOutcome:
    name: str
    size: int = 0
    seconds: float = 0.0
    absent: bool = False  # the cell deleted it (``del``): restoring removes it


class ManifestCell(TypedDict):
    """One asked-for cell in the manifest: kept with its names, or not, with the reason."""

    index: int
    number: int | None
    cell_id: str | None
    source: str
    kept: bool
    reason: str | None
    names: list[dict[str, Any]]  # each a NameOutcome's vars()


class ManifestEntry(TypedDict):
    """One pickled name in the values file."""

    cell: int
    name: str
    offset: int
    size: int
    seconds: float
    fresh: bool


@dataclass(frozen=True)
class KeepCellOutcome:
    """One kept-or-not cell: ``kept`` with its names, or replayed with the reason."""

    number: int | None
    cell_id: str | None
    source: str
    kept: bool
    names: tuple[NameOutcome, ...] = ()
    reason: str | None = None
    load_seconds: float = 0.0

    def line(self) -> str:
        if not self.kept:
            return REPLAYED_LINE.format(number=self.number, reason=self.reason)
        names = ", ".join(
            KEPT_NAME.format(name=n.name, size="deleted" if n.absent else human_size(n.size)) for n in self.names
        )
        return KEPT_LINE.format(
            number=self.number,
            names=names or "no names",
            save=sum(n.seconds for n in self.names),
            load=self.load_seconds,
        )


@dataclass(frozen=True)
class KeepResult:
    """What a save did, per cell asked for; ``note`` when nothing could be saved at all."""

    cells: tuple[KeepCellOutcome, ...] = ()
    directory: Path | None = None
    seconds: float = 0.0
    note: str | None = None

    @property
    def kept(self) -> tuple[KeepCellOutcome, ...]:
        return tuple(c for c in self.cells if c.kept)

    def lines(self) -> list[str]:
        return [*([self.note] if self.note else []), *(c.line() for c in self.cells)]

    def report(self) -> str:
        """For the restart's notes: the header and one indented line per cell asked for ("" when none)."""
        return report(self.cells, self.note)


def report(cells: Sequence[KeepCellOutcome], note: str | None = None) -> str:
    """``Kept across the restart:`` and one line per cell, the one-line note first; "" when there is nothing."""
    if not cells:
        return note or ""
    return "\n".join([*([note] if note else []), KEPT_HEADER.format(prefix=PREFIX), *("  " + c.line() for c in cells)])


def human_size(n: int) -> str:
    size: float = n
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size} B"


def keep_dir(key: str, directory: Path | None = None) -> Path:
    """``<plan dir>/keep-<plan key>``: named by the plan's key, beside the plan."""
    return (directory or plan_files.plan_dir()) / f"keep-{key}"
