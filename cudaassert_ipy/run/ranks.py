"""The job's summary for ranks that died without Python: SIGABRT from the NCCL watchdog, SIGKILL from outside.

Why: such a rank prints no traceback and runs no excepthook, so its own report never comes. The runner that
launched the job (``python -m cudaassert_ipy -m torch.distributed.run ... train.py``, or any launcher run under
it) gives its children a folder (``CUDAASSERT_RING_DIR``); each rank's bookmark writes its last batches there
as it goes (:mod:`cudaassert_ipy.data.ring`). When the job fails, the runner reads the rings of the ranks that
never left through Python, the exit code the launcher saw (torchrun's ``ChildFailedError.failures``, read by
attribute names) and the ranks' stderr that passed through its tap (the watchdog's own words), and says which
rank died, by what signal, why, and which samples its last batches held.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any

from cudaassert_ipy.capture import job_folder
from cudaassert_ipy.capture.job_folder import cleanup, mark_reported, prepare, reported
from cudaassert_ipy.data import ring

if TYPE_CHECKING:
    from cudaassert_ipy.capture.fd_tap import FdTap
from cudaassert_ipy.base.wording import PREFIX

__all__ = [
    "DIED",
    "LAST",
    "NO_BATCHES",
    "RUNNER_KILLED",
    "DeadRanks",
    "cleanup",
    "mark_reported",
    "prepare",
    "reported",
    "runner_killed",
    "summary",
    "wait_for_rescue",
]

DIED = "{prefix} rank {rank} (local_rank {local_rank}, pid {pid}) died {how} without a Python traceback: {why}"
LAST = "{prefix}   its last batches, latest first (written by its DataLoader bookmark as it went): {batches}"
AHEAD_ONE = (
    "{prefix}   its loader had fetched {n} batch{es} beyond the one being processed: that one was batch "
    "{batch:,} of epoch {epoch}"
)
AHEAD_SOME = (
    "{prefix}   its loader had fetched {low} to {high} batches beyond the one being processed (gradient "
    "accumulation): that one was one of batches {first:,} to {last:,} of epoch {epoch}"
)
NO_BATCHES = "{prefix}   it recorded no DataLoader batch (no torch DataLoader was iterated in it)"
WATCHDOG = (
    "its NCCL watchdog thread found the sticky CUDA error and aborted the process, so no excepthook ran "
    '(stderr: "{line}"). The kernel\'s assertion lines above, if any, name the failing op.'
)
ABORTED = (
    "abort() ended it (an uncaught C++ exception, as the NCCL watchdog raises for a CUDA error), so no excepthook ran."
)
KILLED = (
    "it was killed from outside (Lightning's DDP observer kills every rank within seconds of one failing; "
    "the kernel's OOM killer also sends SIGKILL), so no excepthook or atexit ran."
)
SIGNALLED = "a signal ended it, so no excepthook ran."
STOPPED = (
    "{prefix} rank {rank} (local_rank {local_rank}, pid {pid}) was stopped by the launcher ({how}) after "
    "rank {first} died."
)
RUNNER_KILLED = (
    "{prefix} the runner (pid {pid}) was itself ended {how} before it could print its summary "
    "(Lightning's DDP observer kills rank 0, the runner, with the rest); its watcher reports what the "
    "ranks left on disk:"
)
UNKNOWN = "it never reached Python's exit (the launcher gave no exit code for it)."
_WATCHDOG = re.compile(
    r"(?:\[PG [^\]]*?Rank (\d+)\] )?Process group watchdog thread terminated with exception: "
    r"([^\n]*)"
)
_SHOWN = 3  # batches named per rank
_WATCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "watcher.py")  # run by path: it imports us
_RESCUE_S = 3.0  # how long the summary waits for a dead rank's helper to forward its last stderr


def runner_killed(pid: int, code: int | None) -> str:
    """The watcher's first line when the runner died by a signal (``code``: None when its status was collected)."""
    return RUNNER_KILLED.format(prefix=PREFIX, pid=pid, how=_how(code, None)[0] if code is not None else "by a signal")


class DeadRanks:
    """The rank-death machinery of a runner that launches a job, as one part with a provisioner's shape: ``prepare``
    the job folder (named in the children's environment), ``attach`` the runner's own helper (it summarises if the
    runner itself is killed) and the stderr tail it reads then, ``summary`` after the launcher failed, ``cleanup``.
    The runner's Guard pushes each undo on its cleanup stack; its watcher (run/watcher.py) uses the same part."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    @classmethod
    def prepare(cls, environ: MutableMapping[str, str]) -> DeadRanks | None:
        """None inside a rank (its launcher's runner owns the folder) or where no folder can be made."""
        folder = job_folder.prepare(environ)
        return cls(folder) if folder is not None else None

    def attach(self, channels: Sequence[tuple[int, int, int]], report_json: str | None) -> int | None:
        """Start the runner's rescue helper as run/watcher.py (capture/rescue.spawn); its pid, None if it did not."""
        from cudaassert_ipy.capture import rescue

        return rescue.spawn(channels, self.folder, _WATCHER, [report_json or ""])

    def keep_tail(self, tap: FdTap) -> Callable[[], None] | None:
        """Mirror fd 2's tap into the folder's tail file, for the watcher; returns the tail's close (after the tap
        stopped), None where it cannot be kept."""
        from cudaassert_ipy.capture import rescue

        try:
            tail = rescue.TailFile(job_folder.tail_path(self.folder))
        except (OSError, ValueError):
            return None
        tap.set_mirror(tail.write, tail.size)
        return tail.close

    def summary(self, error: BaseException | None, text: Callable[[], str]) -> list[str]:
        """The lines for the ranks that died without Python; ``text``: the runner's stderr, read once their helpers
        forwarded what the ranks' pipes still held."""
        wait_for_rescue(self.folder)
        return summary(self.folder, error, text())

    def mark_reported(self) -> None:
        job_folder.mark_reported(self.folder)

    def was_reported(self) -> bool:
        return job_folder.reported(self.folder)

    def cleanup(self, environ: MutableMapping[str, str]) -> None:
        job_folder.cleanup(self.folder, environ)


def wait_for_rescue(folder: str, timeout: float = _RESCUE_S) -> None:
    """Wait until each rank that died without Python has its helper's death file (capture/rescue.py): written
    after the helper forwarded the bytes the rank's pipes still held, so they are in our stderr by then."""
    read_death = job_folder.read_death
    deadline = time.monotonic() + timeout
    for path in job_folder.ring_paths(folder):
        data = ring.read(path)
        if data is None or data.exited:
            continue
        while read_death(folder, data.pid) is None and not _alive(data.pid) and time.monotonic() < deadline:
            time.sleep(0.01)


def summary(folder: str | None, error: BaseException | None, text: str) -> list[str]:
    """The lines for every rank that died without Python (empty when none did)."""
    if not folder:
        return []
    read_death = job_folder.read_death
    codes = _exit_codes(error)
    deaths: dict[int, float] = {}
    watchdog = _watchdog_lines(text)
    lines: list[str] = []
    rings = [r for r in (ring.read(p) for p in job_folder.ring_paths(folder)) if r is not None]
    dead = []
    for data in sorted(rings, key=lambda r: (r.rank, r.pid)):
        if data.exited or _alive(data.pid):
            continue
        code = codes.get(data.pid, codes.get(("rank", data.rank)))
        death = read_death(folder, data.pid)  # its helper saw it die (the signal even where no launcher said)
        if death is not None:
            code = death[0] if code is None else code
            deaths[data.pid] = death[1]
        if code is None and not data.batches:  # a helper process (a DataLoader worker) that imported torch
            continue
        dead.append((data, code))
    # the first to die: by the helpers' clocks where they saw it, else the first not ended by torchrun's SIGTERM
    timed = sorted((deaths[d.pid], d.rank) for d, _ in dead if d.pid in deaths)
    first = timed[0][1] if timed else next((d.rank for d, code in dead if code != -signal.SIGTERM), None)
    stops = (-signal.SIGTERM, -signal.SIGKILL) if timed else (-signal.SIGTERM,)
    for data, code in dead:
        how, why = _how(code, watchdog.get(data.rank) or watchdog.get(None))
        # the launcher ends the others after a failure (unknown: its status was collected before a helper could read it)
        if first is not None and data.rank != first and (code in stops or (code is None and data.pid in deaths)):
            lines.append(
                STOPPED.format(
                    prefix=PREFIX,
                    rank=data.rank,
                    local_rank=data.local_rank,
                    pid=data.pid,
                    how=how[3:] if how.startswith("by ") else how[1:-1],
                    first=first,
                )
            )
            continue
        lines.append(
            DIED.format(prefix=PREFIX, rank=data.rank, local_rank=data.local_rank, pid=data.pid, how=how, why=why)
        )
        if data.batches:
            shown = "; ".join(f"batch {b:,} of epoch {e}: indices {i}" for e, b, i in data.batches[:_SHOWN])
            lines.append(LAST.format(prefix=PREFIX, batches=shown))
            lines += _ahead(data)
        else:
            lines.append(NO_BATCHES.format(prefix=PREFIX))
    return lines


def _ahead(data: ring.RingData) -> list[str]:
    """Which batch the rank was processing, when its framework (accelerate, the Trainer, timm) fetched ahead."""
    low, high = data.ahead
    epoch, latest, _ = data.batches[0]
    if not high or latest - low < 0:
        return []
    if low == high:
        return [AHEAD_ONE.format(prefix=PREFIX, n=low, es="" if low == 1 else "es", batch=latest - low, epoch=epoch)]
    return [
        AHEAD_SOME.format(
            prefix=PREFIX, low=low, high=high, first=max(0, latest - high), last=latest - low, epoch=epoch
        )
    ]


def _how(code: int | None, watchdog: str | None) -> tuple[str, str]:
    if code is None:
        return "(exit code unknown)", WATCHDOG.format(line=watchdog) if watchdog else UNKNOWN
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        how = f"by {name} (exit code {code})"
        if watchdog:
            return how, WATCHDOG.format(line=watchdog)
        return how, {signal.SIGABRT: ABORTED, signal.SIGKILL: KILLED}.get(-code, SIGNALLED)  # type: ignore[call-overload]
    return f"with exit code {code}", WATCHDOG.format(line=watchdog) if watchdog else UNKNOWN


def _exit_codes(error: BaseException | None) -> dict[Any, int]:
    """pid -> exit code (and ("rank", rank) -> exit code) from torchrun's ChildFailedError, by attribute names."""
    out: dict[Any, int] = {}
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        failures = getattr(error, "failures", None)
        if isinstance(failures, dict):
            for rank, failure in failures.items():
                code = getattr(failure, "exitcode", None)
                if isinstance(code, int):
                    pid = getattr(failure, "pid", None)
                    if isinstance(pid, int):
                        out[pid] = code
                    out[("rank", rank)] = code
        error = error.__cause__ or error.__context__
    return out


def _watchdog_lines(text: str) -> dict[int | None, str]:
    """rank (None: unnamed) -> the watchdog's line, from the ranks' stderr."""
    out: dict[int | None, str] = {}
    for m in _WATCHDOG.finditer(text):
        line = m.group(0).strip()
        out.setdefault(int(m.group(1)) if m.group(1) else None, line)
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: it exists
        return True
    return _zombie(pid) is not True


def _zombie(pid: int) -> bool | None:
    """Whether ``pid`` is a zombie (dead, not yet reaped); None where /proc cannot say."""
    try:
        with open(f"/proc/{pid}/stat") as fp:
            return fp.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return None
