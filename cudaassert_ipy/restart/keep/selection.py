"""Which cells are kept: the ones asked for whose skipping gives the same state as running them; and, after a
replay, which slow cells to offer for keeping next time.

A cell asked for (first line ``# cudaassert: keep``, ``%cudaassert setup keep 3,4``, the panel's toggle) is kept
only when it does nothing but bind names (read from its code, :mod:`.names`), changes no module, and no later cell
that runs again changes its names (the saved value would already hold that change). Every refusal is a one-line
reason the replay shows.
"""

from __future__ import annotations

import types
from collections.abc import Collection, Sequence
from typing import Any, Protocol

from cudaassert_ipy.base.wording import PREFIX
from cudaassert_ipy.restart.cell_history import replayable_source
from cudaassert_ipy.restart.keep.names import is_keep_marked, read_cell
from cudaassert_ipy.restart.keep.result import (
    CHANGES_MODULE,
    EFFECT,
    LATER_WRITE,
    SUGGEST,
    SUGGEST_MAX,
    SUGGEST_MIN_SECONDS,
    UNREADABLE,
    KeepCell,
)
from cudaassert_ipy.restart.keep.store import refusal

__all__ = ["HistoryCell", "cells_for_plan", "decide", "drop_overwritten", "suggest"]


class HistoryCell(Protocol):
    """A cell as the history (``CellRecord``) and the plan (``PlanCell``) both describe it."""

    @property
    def number(self) -> int | None: ...
    @property
    def cell_id(self) -> str | None: ...
    @property
    def source(self) -> str: ...


# -- deciding --------------------------------------------------------------------------------------
def decide(cells: Sequence[KeepCell], namespace: dict[str, Any]) -> tuple[dict[int, frozenset[str]], dict[int, str]]:
    """Which asked-for cells may be kept (index → names to save), and why the others may not."""
    names: dict[int, frozenset[str]] = {}
    reasons: dict[int, str] = {}
    for i, cell in enumerate(cells):
        if not cell.keep:
            continue
        read = read_cell(cell.source)
        module = next((n for n in sorted(read.changes) if isinstance(namespace.get(n), types.ModuleType)), None)
        if read.error is not None:
            reasons[i] = UNREADABLE.format(error=read.error)
        elif read.effect is not None:
            reasons[i] = EFFECT.format(statement=read.effect)
        elif module is not None:
            reasons[i] = CHANGES_MODULE.format(name=module)
        else:
            names[i] = read.writes
    drop_overwritten(cells, names, reasons)
    return names, reasons


def drop_overwritten(cells: Sequence[KeepCell], names: dict[int, frozenset[str]], reasons: dict[int, str]) -> None:
    """A kept cell whose names a later cell that runs again (any cell not kept) changes is not kept; repeat.

    The same ``import`` again (``import os`` in both cells) is no change: it binds the same module."""
    changed = True
    while changed:
        changed = False
        for i in sorted(names):
            for j in range(i + 1, len(cells)):
                if j in names:
                    continue
                later = read_cell(cells[j].source)
                same = {name for name, _ in later.imports & read_cell(cells[i].source).imports}
                hit = sorted((later.writes - same) & names[i])
                if hit:
                    reasons[i] = LATER_WRITE.format(number=cells[j].number, name=hit[0])
                    del names[i]
                    changed = True
                    break


# -- joining the restart, and offering cells for next time -----------------------------------------
def cells_for_plan(
    records: Sequence[HistoryCell], plan_cells: Sequence[HistoryCell], picked: Collection[int] = ()
) -> list[KeepCell]:
    """The old kernel's history in execution order (for the later-change rule), ``keep`` on the plan's cells
    that have a first line ``# cudaassert: keep`` or were picked (``%cudaassert setup keep 3,4``, the panel).

    ``records`` have ``number``, ``cell_id``, ``source``; ``plan_cells`` also, with the source the replay runs.
    """
    planned = {(c.number, c.cell_id): c.source for c in plan_cells}
    out = []
    for r in records:
        source = planned.get((r.number, r.cell_id))
        keep = source is not None and (is_keep_marked(r.source) or r.number in picked)
        out.append(KeepCell(r.number, r.cell_id, source if source is not None else replayable_source(r.source), keep))
    return out


def suggest(
    replayed: Sequence[tuple[int | None, str, float]],
    namespace: dict[str, Any],
    min_seconds: float = SUGGEST_MIN_SECONDS,
) -> str | None:
    """After a replay: the slowest replayed cells (number, source, seconds) that bound only CPU values,
    offered for keeping next time. Looks at each name's value itself, not inside it (that is the save's job)."""
    picks = []
    for number, source, seconds in replayed:
        read = read_cell(source)
        if number is None or seconds < min_seconds or read.error or read.effect or not read.writes:
            continue
        if any(n not in namespace or refusal(namespace[n]) is not None for n in read.writes):
            continue
        if any(isinstance(namespace.get(n), types.ModuleType) for n in read.changes):
            continue
        picks.append((seconds, number))
    if not picks:
        return None
    picks = sorted(picks, reverse=True)[:SUGGEST_MAX]
    numbers = sorted(n for _, n in picks)
    return SUGGEST.format(
        prefix=PREFIX,
        cells=", ".join(f"[{n}]" for n in numbers),
        seconds=sum(s for s, _ in picks),
        numbers=",".join(map(str, numbers)),
    )
