"""The folder a runner gives the ranks it launches: its names, its making and removal, and its marks.

Why one module: three processes meet there. Each rank maps its ring (``rank-<rank>-<pid>.ring``, data/ring.py),
each process's rescue helper writes ``exit-<pid>`` when the process died without Python (capture/rescue.py), and
the runner keeps the tail of its stderr there (``runner.stderr``) and marks ``reported`` once it printed the
summary its watcher must not repeat (run/ranks.py, run/watcher.py). Standard library only, importing nothing of
the package: the rescue helper (``python -I -S capture/rescue.py``) loads this file by its path.
"""

from __future__ import annotations

import os
import time
from collections.abc import MutableMapping

__all__ = [
    "DEATH_PREFIX",
    "ENV",
    "TAIL_NAME",
    "cleanup",
    "death_path",
    "mark_reported",
    "prepare",
    "read_death",
    "reported",
    "ring_path",
    "ring_paths",
    "tail_path",
    "write_death",
]

ENV = "CUDAASSERT_RING_DIR"  # set by the runner for its children: the job folder
DEATH_PREFIX = "exit-"  # exit-<pid>: "wait-status death-time", written after the helper drained the pipes
TAIL_NAME = "runner.stderr"  # the runner's fd 2 tail (capture/rescue.TailFile)
_RING = ".ring"
_REPORTED = "reported"


def prepare(environ: MutableMapping[str, str]) -> str | None:
    """A private folder for the children's rings, named in ``environ``; None inside a rank (its launcher's runner
    owns the folder) or where no temporary folder can be made."""
    if environ.get(ENV) or environ.get("RANK") is not None:
        return None
    import tempfile  # here, not at the top: the helper that loads this file only writes its death

    try:
        folder = tempfile.mkdtemp(prefix="cudaassert-ranks-")
    except OSError:
        return None
    environ[ENV] = folder
    return folder


def cleanup(folder: str | None, environ: MutableMapping[str, str]) -> None:
    """Remove the folder and its name from ``environ`` (if it still names this folder)."""
    if folder:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
        if environ.get(ENV) == folder:
            del environ[ENV]


def ring_path(folder: str, rank: int, pid: int) -> str:
    return os.path.join(folder, f"rank-{rank}-{pid}{_RING}")


def ring_paths(folder: str) -> list[str]:
    import glob

    return glob.glob(os.path.join(folder, f"*{_RING}"))


def tail_path(folder: str) -> str:
    return os.path.join(folder, TAIL_NAME)


def death_path(folder: str, pid: int) -> str:
    return os.path.join(folder, f"{DEATH_PREFIX}{pid}")


def write_death(folder: str, pid: int, status: int | None) -> None:
    """The helper saw ``pid`` die: its wait status (None: already collected) and the time, whole or not at all."""
    path = death_path(folder, pid)
    try:
        with open(path + ".tmp", "w") as fp:
            fp.write(f"{'-' if status is None else status} {time.time()!r}")
        os.replace(path + ".tmp", path)
    except OSError:
        pass


def read_death(folder: str, pid: int) -> tuple[int | None, float] | None:
    """(exit code as subprocess gives it, or None when unknown; death time) that a helper wrote for ``pid``."""
    try:
        with open(death_path(folder, pid)) as fp:
            status, when = fp.read().split()
    except (OSError, ValueError):
        return None
    try:
        code = os.waitstatus_to_exitcode(int(status)) if status != "-" else None
    except ValueError:
        code = None
    return code, float(when)


def mark_reported(folder: str) -> None:
    """The runner printed its summary: its watcher must not print it again if the runner is killed right after."""
    try:
        with open(os.path.join(folder, _REPORTED), "w"):
            pass
    except OSError:
        pass


def reported(folder: str) -> bool:
    return os.path.exists(os.path.join(folder, _REPORTED))
