"""In the new kernel: restore kept cells one by one, in the plan's order; refuse anything not safely ours.

The kept values are read only when the directory and its files are owned by this user, writable by
nobody else, not links, and the manifest names this plan's key and stamp and has not expired. The
directory is removed when the replay is done with it (or at once, when stale or broken but ours);
one owned by someone else is left as it is.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cudaassert_ipy.base.wording import PREFIX, error_line
from cudaassert_ipy.restart import plan_files
from cudaassert_ipy.restart.keep.result import (
    KEEP_VERSION,
    LOAD_FAILED,
    MANIFEST,
    RESTORE_REFUSED,
    VALUES,
    KeepCellOutcome,
    ManifestCell,
    NameOutcome,
    keep_dir,
    report,
)
from cudaassert_ipy.restart.keep.store import Stored, StreamReader

__all__ = ["Restorer", "discard", "open_checked", "opened", "sweep"]


@dataclass
class Restorer:
    """In the new kernel: restores kept cells one by one, in the plan's order, then the directory goes."""

    namespace: dict[str, Any]
    cells: list[ManifestCell] = field(default_factory=list)
    entries: list[Stored] = field(default_factory=list)
    entry_cells: list[int] = field(default_factory=list)
    reader: StreamReader | None = None
    note: str | None = None
    outcomes: list[KeepCellOutcome] = field(default_factory=list)
    _next: int = 0  # entries before this one are loaded (or lost)
    _loaded: dict[tuple[int, str], Any] = field(default_factory=dict)
    _failed: dict[int, str] = field(default_factory=dict)

    def report(self) -> str:
        """What the restore did, for the replay's output ("" when no cell was kept)."""
        return report(self.outcomes, self.note)

    def _find(self, number: int | None, cell_id: str | None, source: str) -> ManifestCell | None:
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

    def restore(self, number: int | None, cell_id: str | None, source: str) -> KeepCellOutcome | None:
        """This cell's names bound in the namespace (kept), or why it must run (not kept); None: not a kept cell."""
        cell = self._find(number, cell_id, source) if self.reader is not None else None
        if cell is None:
            return None
        started = time.perf_counter()
        index = cell["index"]
        names = tuple(NameOutcome(**n) for n in cell["names"])
        if not cell["kept"]:
            outcome = KeepCellOutcome(number, cell_id, source, False, (), cell["reason"])
            self.outcomes.append(outcome)
            return outcome
        self._load_through(index)
        if index in self._failed:
            outcome = KeepCellOutcome(number, cell_id, source, False, names, self._failed[index])
        else:
            for n in names:
                if n.absent:
                    self.namespace.pop(n.name, None)
                else:
                    self.namespace[n.name] = self._loaded.pop((index, n.name))
            outcome = KeepCellOutcome(number, cell_id, source, True, names, None, time.perf_counter() - started)
        self.outcomes.append(outcome)
        return outcome


def _check_manifest(data: object, key: str, stamp: float, now: float) -> str | None:
    if not isinstance(data, dict) or data.get("version") != KEEP_VERSION:
        return "its manifest is not one this version wrote"
    if data.get("key") != key or data.get("stamp") != stamp:
        return "they were saved for another restart"
    if not isinstance(data.get("expires"), (int, float)) or now > data["expires"]:
        return "they have expired"
    if not isinstance(data.get("entries"), list) or not isinstance(data.get("cells"), list):
        return "its manifest is incomplete"
    return None


def open_checked(path: Path, name: str) -> io.BufferedReader:
    """A file of the keep directory, opened without following links; OSError when it is not safely ours."""
    fd = os.open(path / name, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    f = os.fdopen(fd, "rb")
    why = plan_files.why_unsafe(os.fstat(fd), False)
    if why is not None:
        f.close()
        raise PermissionError(f"{name}: {why}")
    return f


@contextlib.contextmanager
def opened(
    key: str, stamp: float, namespace: dict[str, Any], directory: Path | None = None, now: float | None = None
) -> Iterator[Restorer]:
    """The kept values of plan ``key`` made at ``stamp``, checked; the directory is removed on exit."""
    path = keep_dir(key, directory)
    restorer = Restorer(namespace)
    if not os.path.lexists(path):
        yield restorer
        return
    now = time.time() if now is None else now
    why = plan_files.why_unsafe(os.lstat(path), True)
    if why is None:
        try:
            with open_checked(path, MANIFEST) as f:
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
        values = open_checked(path, VALUES)
    except OSError as e:
        restorer.note = RESTORE_REFUSED.format(prefix=PREFIX, path=path, why=error_line(e))
        shutil.rmtree(path, ignore_errors=True)
        yield restorer
        return
    try:
        restorer.cells = data["cells"]
        restorer.entries = [
            Stored(e["name"], e["offset"], e["size"], e["seconds"], e.get("fresh") is True) for e in data["entries"]
        ]
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
            if plan_files.why_unsafe(os.lstat(path), True) is not None:
                continue
            try:
                with open_checked(path, MANIFEST) as f:
                    expires = float(json.loads(f.read(16 * 1024 * 1024).decode("utf-8"))["expires"])
            except (OSError, ValueError, KeyError, TypeError):
                expires = os.lstat(path).st_mtime + plan_files.PLAN_TTL
            if now > expires:
                shutil.rmtree(path)
                removed.append(path)
        except OSError:
            continue
    return removed


def discard(key: str, directory: Path | None = None) -> None:
    """Remove this plan's kept values unread (the restart did not happen, or replays nothing); only if ours."""
    path = keep_dir(key, directory)
    try:
        if plan_files.why_unsafe(os.lstat(path), True) is None:
            shutil.rmtree(path)
    except OSError:
        return  # nothing there, or already gone
