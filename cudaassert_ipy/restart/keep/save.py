"""Save what the kept cells bound, in the old kernel just before it restarts.

Into ``<plan dir>/keep-<plan key>/`` (0700): one cloudpickle stream of every kept name (:mod:`.store`) and a
manifest naming the plan's key and stamp, each cell kept or not and why (:mod:`.result`). The manifest is written
last and atomically: the new kernel reads nothing without it. Every failure (a value that cannot be saved, a time or
size budget, a full disk) is a reason the cell replays, never a raise.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cudaassert_ipy.base.atomic_file import write_atomic
from cudaassert_ipy.base.wording import PREFIX, error_line
from cudaassert_ipy.restart import plan_files
from cudaassert_ipy.restart.keep.restore import sweep
from cudaassert_ipy.restart.keep.result import (
    KEEP_VERSION,
    MANIFEST,
    NOT_SAVED,
    SAVE_FAILED,
    VALUES,
    WITH_NAME,
    KeepBudget,
    KeepCell,
    KeepCellOutcome,
    KeepResult,
    ManifestEntry,
    NameOutcome,
    human_size,
    keep_dir,
)
from cudaassert_ipy.restart.keep.selection import HistoryCell, cells_for_plan, decide, drop_overwritten
from cudaassert_ipy.restart.keep.store import Refused, StreamWriter

if TYPE_CHECKING:
    from cudaassert_ipy.restart.plan import ResumePlan

__all__ = ["save", "save_for_plan"]


# -- saving ---------------------------------------------------------------------------------------
def _fresh_dir(key: str, directory: Path | None) -> Path:
    """``keep-<key>`` made anew (0700) under the checked plan directory; OSError/PlanError say why not."""
    base = plan_files.ensure_dir(directory)
    path = keep_dir(key, base)
    if os.path.lexists(path):
        why = plan_files.why_unsafe(os.lstat(path), True)
        if why is not None:
            raise OSError(f"{path} is in the way: {why}")
        shutil.rmtree(path)
    path.mkdir(mode=0o700)
    return path


def _write_manifest(path: Path, manifest: dict[str, Any]) -> None:
    write_atomic(path / MANIFEST, json.dumps(manifest, indent=1), mode=0o600)


def save(
    key: str,
    stamp: float,
    cells: Sequence[KeepCell],
    namespace: dict[str, Any],
    budget: KeepBudget | None = None,
    directory: Path | None = None,
    expires: float | None = None,
) -> KeepResult:
    """Save the kept cells' names for the plan ``key`` (made at ``stamp``); every failure is a reason, not a raise."""
    started = time.perf_counter()
    budget = budget or KeepBudget()
    sweep(directory)
    names, reasons = decide(cells, namespace)
    asked = [i for i, c in enumerate(cells) if c.keep]
    if not asked:
        return KeepResult()

    def result(stored: dict[int, list[NameOutcome]], note: str | None = None, path: Path | None = None) -> KeepResult:
        out = tuple(
            KeepCellOutcome(
                cells[i].number,
                cells[i].cell_id,
                cells[i].source,
                i in stored,
                tuple(stored.get(i, ())),
                None if i in stored else reasons.get(i),
            )
            for i in asked
        )
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
    entries: list[ManifestEntry] = []
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
        drop_overwritten(cells, {i: names[i] for i in stored}, reasons)
        stored = {i: v for i, v in stored.items() if i not in reasons}
        _write_manifest(
            path,
            {
                "version": KEEP_VERSION,
                "key": key,
                "stamp": stamp,
                "created": time.time(),
                "expires": expires if expires is not None else time.time() + plan_files.PLAN_TTL,
                "writer_pid": os.getpid(),
                "entries": entries,
                "cells": [
                    {
                        "index": i,
                        "number": cells[i].number,
                        "cell_id": cells[i].cell_id,
                        "source": cells[i].source,
                        "kept": i in stored,
                        "reason": reasons.get(i),
                        "names": [vars(n) for n in stored.get(i, ())],
                    }
                    for i in asked
                ],
            },
        )  # the cells that are not kept too: the new kernel says why it replays them
    except OSError as e:
        shutil.rmtree(path, ignore_errors=True)
        why = error_line(e)
        for i in names:
            reasons[i] = NOT_SAVED.format(why=why)
        return result({}, SAVE_FAILED.format(prefix=PREFIX, why=why))
    return result(stored, path=path)


def _save_cell(
    writer: StreamWriter,
    index: int,
    names: frozenset[str],
    namespace: dict[str, Any],
    entries: list[ManifestEntry],
    reasons: dict[int, str],
) -> list[NameOutcome] | None:
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
        entries.append(
            {"cell": index, "name": name, "offset": s.offset, "size": s.size, "seconds": s.seconds, "fresh": s.fresh}
        )
        outcomes.append(NameOutcome(name, s.size, s.seconds))
    return outcomes


def save_for_plan(
    plan: ResumePlan,
    records: Iterable[HistoryCell],
    picked: Collection[int],
    namespace: dict[str, Any],
    budget: KeepBudget | None = None,
    directory: Path | None = None,
) -> KeepResult:
    """The old kernel's step before it restarts: save the kept cells of ``plan`` (a ResumePlan: ``key``,
    ``created`` as the stamp, ``expires``, ``cells``), reading the whole history ``records``."""
    cells = cells_for_plan(list(records), plan.cells, picked)
    return save(plan.key, plan.created, cells, namespace, budget, directory, plan.expires)
