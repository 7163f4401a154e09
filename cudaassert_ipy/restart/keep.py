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

import contextlib
import json
import os
import shutil
import time
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from cudaassert_ipy.restart import plan_files
from cudaassert_ipy.restart.keep_names import read_cell
from cudaassert_ipy.restart.keep_store import Refused, Stored, StreamReader, StreamWriter
from cudaassert_ipy.wording import PREFIX, error_line

__all__ = ["CellOutcome", "KeepBudget", "KeepCell", "KeepResult", "NameOutcome", "Restorer", "opened", "save",
           "sweep"]

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
RESTORE_REFUSED = ("{prefix} The kept values in {path} were refused: {why}. Nothing was restored from them; the kept "
                   "cells replay instead.")
# the replay view's lines
KEPT_LINE = "[{number}] kept: {names} (saved in {save:.1f} s, loaded in {load:.1f} s)"
KEPT_NAME = "`{name}` {size}"
REPLAYED_LINE = "[{number}] replayed: {reason}"


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


@dataclass(frozen=True)
class CellOutcome:
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
        names = ", ".join(KEPT_NAME.format(name=n.name, size="deleted" if n.absent else human_size(n.size))
                          for n in self.names)
        return KEPT_LINE.format(number=self.number, names=names or "no names",
                                save=sum(n.seconds for n in self.names), load=self.load_seconds)


@dataclass(frozen=True)
class KeepResult:
    """What a save did, per cell asked for; ``note`` when nothing could be saved at all."""

    cells: tuple[CellOutcome, ...] = ()
    directory: Path | None = None
    seconds: float = 0.0
    note: str | None = None

    @property
    def kept(self) -> tuple[CellOutcome, ...]:
        return tuple(c for c in self.cells if c.kept)

    def lines(self) -> list[str]:
        return [*([self.note] if self.note else []), *(c.line() for c in self.cells)]


def human_size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000  # type: ignore[assignment]
    return f"{n} B"


def keep_dir(key: str, directory: Path | None = None) -> Path:
    return (directory or plan_files.plan_dir()) / f"keep-{key}"


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
    """A kept cell whose names a later cell that runs again (any cell not kept) changes is not kept; repeat."""
    changed = True
    while changed:
        changed = False
        for i in sorted(names):
            for j in range(i + 1, len(cells)):
                if j in names:
                    continue
                hit = sorted(read_cell(cells[j].source).writes & names[i])
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
    tmp = path / f".{MANIFEST}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path / MANIFEST)


def save(key: str, stamp: float, cells: Sequence[KeepCell], namespace: dict[str, Any],
         budget: KeepBudget = KeepBudget(), directory: Path | None = None, expires: float | None = None) -> KeepResult:
    """Save the kept cells' names for the plan ``key`` (made at ``stamp``); every failure is a reason, not a raise."""
    started = time.perf_counter()
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
            writer = StreamWriter(f, namespace, frozenset().union(*names.values()), deadline, budget.seconds,
                                  limit, limit_text)
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
        entries.append({"cell": index, "name": name, "offset": s.offset, "size": s.size, "seconds": s.seconds})
        outcomes.append(NameOutcome(name, s.size, s.seconds))
    return outcomes


# -- restoring ------------------------------------------------------------------------------------
@dataclass
class Restorer:
    """In the new kernel: restores kept cells one by one, in the plan's order, then the directory goes."""

    namespace: dict[str, Any]
    cells: list[dict[str, Any]] = field(default_factory=list)
    entries: list[Stored] = field(default_factory=list)
    entry_cells: list[int] = field(default_factory=list)
    reader: StreamReader | None = None
    note: str | None = None
    outcomes: list[CellOutcome] = field(default_factory=list)
    _next: int = 0  # entries before this one are loaded (or lost)
    _loaded: dict[tuple[int, str], Any] = field(default_factory=dict)
    _failed: dict[int, str] = field(default_factory=dict)

    def _find(self, number: int | None, cell_id: str | None, source: str) -> dict[str, Any] | None:
        for cell in self.cells:
            if cell["number"] == number and cell["cell_id"] == cell_id and cell["source"] == source:
                return cell
        return None

    def _load_through(self, index: int) -> None:
        """Load every entry up to this cell's last (one unpickler: objects shared across names stay shared)."""
        assert self.reader is not None
        last = max((k for k, c in enumerate(self.entry_cells) if c == index), default=-1)
        while self._next <= last:
            stored, cell = self.entries[self._next], self.entry_cells[self._next]
            self._next += 1
            if cell in self._failed:
                continue
            try:
                self._loaded[(cell, stored.name)] = self.reader.load(stored)
            except Exception as e:
                self._failed[cell] = LOAD_FAILED.format(name=stored.name, error=error_line(e))

    def restore(self, number: int | None, cell_id: str | None, source: str) -> CellOutcome | None:
        """This cell's names bound in the namespace (kept), or why it must run (not kept); None: not a kept cell."""
        cell = self._find(number, cell_id, source) if self.reader is not None else None
        if cell is None:
            return None
        started = time.perf_counter()
        index = cell["index"]
        names = tuple(NameOutcome(**n) for n in cell["names"])
        if not cell["kept"]:
            outcome = CellOutcome(number, cell_id, source, False, (), cell["reason"])
            self.outcomes.append(outcome)
            return outcome
        self._load_through(index)
        if index in self._failed:
            outcome = CellOutcome(number, cell_id, source, False, names, self._failed[index])
        else:
            for n in names:
                if n.absent:
                    self.namespace.pop(n.name, None)
                else:
                    self.namespace[n.name] = self._loaded.pop((index, n.name))
            outcome = CellOutcome(number, cell_id, source, True, names, None, time.perf_counter() - started)
        self.outcomes.append(outcome)
        return outcome


def _check_manifest(data: Any, key: str, stamp: float, now: float) -> str | None:
    if not isinstance(data, dict) or data.get("version") != KEEP_VERSION:
        return "its manifest is not one this version wrote"
    if data.get("key") != key or data.get("stamp") != stamp:
        return "they were saved for another restart"
    if not isinstance(data.get("expires"), (int, float)) or now > data["expires"]:
        return "they have expired"
    if not isinstance(data.get("entries"), list) or not isinstance(data.get("cells"), list):
        return "its manifest is incomplete"
    return None


def _open_checked(path: Path, name: str) -> Any:
    """A file of the keep directory, opened without following links; OSError when it is not safely ours."""
    fd = os.open(path / name, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    f = os.fdopen(fd, "rb")
    why = plan_files._why_unsafe(os.fstat(fd), False)
    if why is not None:
        f.close()
        raise PermissionError(f"{name}: {why}")
    return f


@contextlib.contextmanager
def opened(key: str, stamp: float, namespace: dict[str, Any], directory: Path | None = None,
           now: float | None = None) -> Iterator[Restorer]:
    """The kept values of plan ``key`` made at ``stamp``, checked; the directory is removed on exit."""
    path = keep_dir(key, directory)
    restorer = Restorer(namespace)
    if not os.path.lexists(path):
        yield restorer
        return
    now = time.time() if now is None else now
    why = plan_files._why_unsafe(os.lstat(path), True)
    if why is None:
        try:
            with _open_checked(path, MANIFEST) as f:
                data = json.loads(f.read(16 * 1024 * 1024).decode("utf-8"))
            why = _check_manifest(data, key, stamp, now)
        except (OSError, ValueError) as e:
            why = f"they could not be read ({error_line(e)})"
    if why is not None:
        restorer.note = RESTORE_REFUSED.format(prefix=PREFIX, path=path, why=why)
        if "owned by" not in why and "writable by" not in why and "symbolic link" not in why:
            shutil.rmtree(path, ignore_errors=True)  # ours but stale or broken: never used, so removed
        yield restorer
        return
    try:
        values = _open_checked(path, VALUES)
    except OSError as e:
        restorer.note = RESTORE_REFUSED.format(prefix=PREFIX, path=path, why=error_line(e))
        shutil.rmtree(path, ignore_errors=True)
        yield restorer
        return
    try:
        restorer.cells = data["cells"]
        restorer.entries = [Stored(e["name"], e["offset"], e["size"], e["seconds"]) for e in data["entries"]]
        restorer.entry_cells = [e["cell"] for e in data["entries"]]
        restorer.reader = StreamReader(values, namespace)
        yield restorer
    finally:
        values.close()
        shutil.rmtree(path, ignore_errors=True)


def sweep(directory: Path | None = None, now: float | None = None) -> list[Path]:
    """Remove this user's expired keep directories (or ones whose manifest is gone, after the plan TTL)."""
    base = directory or plan_files.plan_dir()
    now = time.time() if now is None else now
    removed = []
    try:
        names = [n for n in os.listdir(base) if n.startswith("keep-")]
    except OSError:
        return []
    for name in names:
        path = base / name
        try:
            if plan_files._why_unsafe(os.lstat(path), True) is not None:
                continue
            try:
                with _open_checked(path, MANIFEST) as f:
                    expires = float(json.loads(f.read(16 * 1024 * 1024).decode("utf-8"))["expires"])
            except (OSError, ValueError, KeyError, TypeError):
                expires = os.lstat(path).st_mtime + plan_files.PLAN_TTL
            if now > expires:
                shutil.rmtree(path)
                removed.append(path)
        except OSError:
            continue
    return removed
