"""Keep expensive CPU setup across Restart & replay: save what kept cells bound, restore it instead of re-running.

The old kernel, just before it restarts, saves the names that each kept cell writes (read from the
cell's code, see :mod:`keep_names`) into ``<plan dir>/keep-<plan key>/`` (0700): one cloudpickle
stream plus a manifest. The new kernel, replaying the plan, restores a kept cell's names at that
cell's place in the order (so earlier replayed cells cannot overwrite them) and skips running it.

Never wrong, only slower: a cell is kept only when skipping it gives the same state as running it,
and every doubt replays it with a one-line reason: a value that holds a CUDA tensor or parameters,
an open file or socket, a generator; a save over its time or size budget; a full disk; a later
cell that changes the same name; a cell that does more than bind names; a value that fails to
load in the new kernel. The saved state is read only under the plan's key and stamp, only from a
directory and files owned by this user and writable by nobody else, and is deleted after restore
or once the plan has expired.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import types
from pathlib import Path
from typing import Any, Collection, Iterable, Sequence

from cudaassert_ipy.atomic_file import write_atomic
from cudaassert_ipy.restart import plan_files
from cudaassert_ipy.restart.cell_history import replayable_source
from cudaassert_ipy.restart.keep_names import is_keep_marked, read_cell
from cudaassert_ipy.restart.keep_restore import Restorer, discard, opened, sweep
from cudaassert_ipy.restart.keep_result import (
    CHANGES_MODULE,
    EFFECT,
    KEEP_VERSION,
    LATER_WRITE,
    MANIFEST,
    NOT_SAVED,
    SAVE_FAILED,
    SUGGEST,
    SUGGEST_MAX,
    SUGGEST_MIN_SECONDS,
    UNREADABLE,
    VALUES,
    WITH_NAME,
    CellOutcome,
    KeepBudget,
    KeepCell,
    KeepResult,
    NameOutcome,
    human_size,
    keep_dir,
)
from cudaassert_ipy.restart.keep_store import Refused, StreamWriter, refusal
from cudaassert_ipy.wording import PREFIX, error_line

__all__ = [
    "CellOutcome",
    "KeepBudget",
    "KeepCell",
    "KeepResult",
    "NameOutcome",
    "Restorer",
    "cells_for_plan",
    "discard",
    "keep_dir",
    "opened",
    "save",
    "save_for_plan",
    "suggest",
    "sweep",
]


# -- deciding -------------------------------------------------------------------------------------
def _decide(cells: Sequence[KeepCell], namespace: dict[str, Any]) -> tuple[dict[int, frozenset[str]], dict[int, str]]:
    """Which asked-for cells may be kept (index → names to save), and why the others may not."""
    names: dict[int, frozenset[str]] = {}
    reasons: dict[int, str] = {}
    for i, cell in enumerate(cells):
        if not cell.keep:
            continue
        read = read_cell(cell.source)
        module = next((n for n in sorted(read.changes)
                       if isinstance(namespace.get(n), types.ModuleType)), None)
        if read.error is not None:
            reasons[i] = UNREADABLE.format(error=read.error)
        elif read.effect is not None:
            reasons[i] = EFFECT.format(statement=read.effect)
        elif module is not None:
            reasons[i] = CHANGES_MODULE.format(name=module)
        else:
            names[i] = read.writes
    _drop_overwritten(cells, names, reasons)
    return names, reasons


def _drop_overwritten(cells: Sequence[KeepCell], names: dict[int, frozenset[str]], reasons: dict[int, str]) -> None:
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


# -- saving ---------------------------------------------------------------------------------------
def _fresh_dir(key: str, directory: Path | None) -> Path:
    """``keep-<key>`` made anew (0700) under the checked plan directory; OSError/PlanError say why not."""
    base = plan_files.ensure_dir(directory)
    path = keep_dir(key, base)
    if os.path.lexists(path):
        why = plan_files._why_unsafe(os.lstat(path), True)
        if why is not None:
            raise OSError(f"{path} is in the way: {why}")
        shutil.rmtree(path)
    path.mkdir(mode=0o700)
    return path


def _write_manifest(path: Path, manifest: dict[str, Any]) -> None:
    write_atomic(path / MANIFEST, json.dumps(manifest, indent=1), mode=0o600)


def save(key: str, stamp: float, cells: Sequence[KeepCell], namespace: dict[str, Any],
         budget: KeepBudget | None = None, directory: Path | None = None, expires: float | None = None) -> KeepResult:
    """Save the kept cells' names for the plan ``key`` (made at ``stamp``); every failure is a reason, not a raise."""
    started = time.perf_counter()
    budget = budget or KeepBudget()
    sweep(directory)
    names, reasons = _decide(cells, namespace)
    asked = [i for i, c in enumerate(cells) if c.keep]
    if not asked:
        return KeepResult()

    def result(stored: dict[int, list[NameOutcome]], note: str | None = None, path: Path | None = None) -> KeepResult:
        out = tuple(CellOutcome(cells[i].number, cells[i].cell_id, cells[i].source, i in stored,
                                tuple(stored.get(i, ())), None if i in stored else reasons.get(i)) for i in asked)
        return KeepResult(out, path, time.perf_counter() - started, note)

    try:
        path = _fresh_dir(key, directory)
        free = shutil.disk_usage(path).free - budget.reserve_bytes
    except (OSError, plan_files.PlanError) as e:
        why = str(e) if isinstance(e, plan_files.PlanError) else error_line(e)
        for i in names:
            reasons[i] = NOT_SAVED.format(why=why)
        return result({}, SAVE_FAILED.format(prefix=PREFIX, why=why))
    limit = max(0, min(budget.max_bytes, free))
    limit_text = human_size(limit) + (" (disk space)" if free < budget.max_bytes else "")
    stored: dict[int, list[NameOutcome]] = {}
    entries: list[dict[str, Any]] = []
    deadline = time.monotonic() + budget.seconds
    try:
        fd = os.open(path / VALUES, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "w+b") as f:
            writer = StreamWriter(f, namespace, deadline, budget.seconds, limit, limit_text)
            for i in sorted(names):
                outcomes = _save_cell(writer, i, names[i], namespace, entries, reasons)
                if outcomes is not None:
                    stored[i] = outcomes
            f.flush()
            os.fsync(f.fileno())
        # a cell that failed now replays: kept cells before it whose names it changes must replay too
        _drop_overwritten(cells, {i: names[i] for i in stored}, reasons)
        stored = {i: v for i, v in stored.items() if i not in reasons}
        _write_manifest(path, {
            "version": KEEP_VERSION, "key": key, "stamp": stamp, "created": time.time(),
            "expires": expires if expires is not None else time.time() + plan_files.PLAN_TTL,
            "writer_pid": os.getpid(), "entries": entries,
            "cells": [{"index": i, "number": cells[i].number, "cell_id": cells[i].cell_id, "source": cells[i].source,
                       "kept": i in stored, "reason": reasons.get(i),
                       "names": [vars(n) for n in stored.get(i, ())]} for i in asked],
        })  # the cells that are not kept too: the new kernel says why it replays them
    except OSError as e:
        shutil.rmtree(path, ignore_errors=True)
        why = error_line(e)
        for i in names:
            reasons[i] = NOT_SAVED.format(why=why)
        return result({}, SAVE_FAILED.format(prefix=PREFIX, why=why))
    return result(stored, path=path)


def _save_cell(writer: StreamWriter, index: int, names: frozenset[str], namespace: dict[str, Any],
               entries: list[dict[str, Any]], reasons: dict[int, str]) -> list[NameOutcome] | None:
    outcomes = []
    for name in sorted(names):
        if name not in namespace:
            outcomes.append(NameOutcome(name, absent=True))
            continue
        try:
            s = writer.dump(name, namespace[name])
        except Refused as e:
            reasons[index] = WITH_NAME.format(name=name, why=e)
            return None
        entries.append({"cell": index, "name": name, "offset": s.offset, "size": s.size, "seconds": s.seconds,
                        "fresh": s.fresh})
        outcomes.append(NameOutcome(name, s.size, s.seconds))
    return outcomes


# -- joining the restart --------------------------------------------------------------------------
def cells_for_plan(records: Sequence[Any], plan_cells: Sequence[Any], picked: Collection[int] = ()) -> list[KeepCell]:
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


def suggest(replayed: Sequence[tuple[int | None, str, float]], namespace: dict[str, Any],
            min_seconds: float = SUGGEST_MIN_SECONDS) -> str | None:
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
    return SUGGEST.format(prefix=PREFIX, cells=", ".join(f"[{n}]" for n in numbers),
                          seconds=sum(s for s, _ in picks), numbers=",".join(map(str, numbers)))


def save_for_plan(plan: Any, records: Iterable[Any], picked: Collection[int], namespace: dict[str, Any],
                  budget: KeepBudget | None = None, directory: Path | None = None) -> KeepResult:
    """The old kernel's step before it restarts: save the kept cells of ``plan`` (a ResumePlan: ``key``,
    ``created`` as the stamp, ``expires``, ``cells``), reading the whole history ``records``."""
    cells = cells_for_plan(list(records), plan.cells, picked)
    return save(plan.key, plan.created, cells, namespace, budget, directory, plan.expires)
