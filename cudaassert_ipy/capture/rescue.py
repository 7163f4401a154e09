"""A process that dies without Python (``abort()``, SIGKILL) must not take the bytes still in its tap's pipes with it.

Why: the fd tap (fd_tap.py) puts a pipe under fd 2 and 1 and a thread of the same process forwards what arrives.
When the NCCL watchdog aborts a rank, the kernel's assertion lines and the watchdog's own words may still sit in
that pipe, unread: they died with the process, and the terminal never showed them. So a process under the runner
starts one small helper (``python -I -S`` this file, spawned, not forked) that holds a duplicate of each pipe's
read end and of the descriptor it forwards to, and waits for the process to end (a pidfd; polling where there is
none). It never reads while the process lives. When the process is gone it forwards whatever the pipes still hold,
in order, to where the tap would have (a clean exit leaves them empty), and, where the process is a rank under a
runner, writes its wait status into the runner's ring folder (read from ``/proc`` while it is a zombie), so the
runner's summary can name the signal even when no launcher reported it (Lightning's own DDP launcher).

The runner that owns the ring folder runs run/watcher.py instead, which calls ``watch`` and then, if the runner
itself died by a signal (Lightning's DDP observer SIGKILLs rank 0, which is the runner, within seconds of a child's
failure), writes the dead-rank summary the runner never printed, from the rings and from the tail of stderr the
runner's tap mirrored to a file (``TailFile``).
Linux and macOS; no IPython, no torch.
"""

from __future__ import annotations

import mmap
import os
import selectors
import signal
import struct
import sys
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

__all__ = ["Death", "TailFile", "dismiss", "read_tail", "spawn", "watch"]

_TAIL_HEADER = struct.Struct("<Q")
_QUIET_S = 2.0  # after the death: stop forwarding once the pipes stayed quiet this long (a forked child holds them)
_POLL_S = 0.2  # no pidfd: how often the parent's liveness is asked


class TailFile:
    """The last ``size`` bytes written through a tap, in a shared file map: what a SIGKILL leaves on disk."""

    def __init__(self, path: str, size: int = 64 * 1024) -> None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.ftruncate(fd, _TAIL_HEADER.size + size)
            self.mm: Any = mmap.mmap(fd, _TAIL_HEADER.size + size)
        finally:
            os.close(fd)
        self.path, self.size, self.total = path, size, 0
        self._pack = _TAIL_HEADER.pack_into

    def write(self, data: bytes) -> None:
        """One chunk the tap recorded (~0.2 us for a line: it runs on the tap's reader thread)."""
        n, total, size = len(data), self.total, self.size
        at = total % size
        if at + n <= size:  # the usual case: one copy, then the count that makes it visible
            self.mm[_TAIL_HEADER.size + at : _TAIL_HEADER.size + at + n] = data
            self.total = total + n
            self._pack(self.mm, 0, total + n)
            return
        if n > size:
            total += n - size
            data, n = data[-size:], size
            at = total % size
        first = size - at
        self.mm[_TAIL_HEADER.size + at : _TAIL_HEADER.size + size] = data[:first]
        self.mm[_TAIL_HEADER.size : _TAIL_HEADER.size + n - first] = data[first:]
        self.total = total + n
        self._pack(self.mm, 0, total + n)

    def close(self) -> None:
        """After the tap stopped (it writes no more)."""
        mm, self.mm = self.mm, None
        if mm is not None:
            mm.close()


def read_tail(path: str) -> bytes:
    """The bytes a TailFile holds, oldest first; b"" when there is none."""
    try:
        with open(path, "rb") as fp:
            raw = fp.read()
        (total,) = _TAIL_HEADER.unpack_from(raw, 0)
    except (OSError, struct.error):
        return b""
    body = raw[_TAIL_HEADER.size :]
    size = len(body)
    if not size:
        return b""
    if total <= size:
        return body[:total]
    cut = total % size
    return body[cut:] + body[:cut]


def spawn(
    channels: Sequence[tuple[int, int, int]],
    ring_dir: str | None = None,
    program: str | None = None,
    extra: Sequence[str] = (),
) -> int | None:
    """Start the helper for this process: ``channels`` are (tapped fd, pipe read end, old destination) triples.

    ``program``: a script that calls ``watch`` and then does more with the death (run/watcher.py, for the runner
    that owns ``ring_dir``), given ``extra`` after our arguments; this file by default.
    Returns the helper's pid, or None where it cannot start (the tap runs on without it, as before).
    """
    if not channels or not hasattr(os, "posix_spawn") or "python" not in os.path.basename(sys.executable or "").lower():
        return None  # Windows; an embedding host whose sys.executable is not an interpreter
    sources = [fd for _, read, prev in channels for fd in (read, prev)]
    base = max(sources) + 1  # above every source: no dup2 overwrites one still to be duplicated
    actions: list[tuple[Any, ...]] = [(os.POSIX_SPAWN_OPEN, n, os.devnull, os.O_RDWR, 0) for n in (0, 1, 2)]
    spec = []
    for i, (fd, read, prev) in enumerate(channels):
        actions += [(os.POSIX_SPAWN_DUP2, read, base + 2 * i), (os.POSIX_SPAWN_DUP2, prev, base + 2 * i + 1)]
        spec.append(f"{fd}:{base + 2 * i}:{base + 2 * i + 1}")
    # argv: pid, ring folder, the channels' count, fd:read:prev per channel, the program's own (json costs 1.5 ms)
    args = [str(os.getpid()), ring_dir or "", str(len(spec)), *spec, *extra]
    try:
        return os.posix_spawn(
            sys.executable,
            [sys.executable, "-I", "-S", program or os.path.abspath(__file__), *args],
            dict(os.environ),
            file_actions=actions,
        )
    except OSError:
        return None


def dismiss(pid: int) -> None:
    """The process leaves through Python, its tap stopped and drained: the helper has nothing left to do. Ending it
    now spares a caller that reads our stderr to its end the wait for the helper's own start-up (~25 ms)."""
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except OSError:  # already gone, or reaped by someone else
        pass


# ---- the helper process -------------------------------------------------------------------------------------------


def _wait_for_death(pid: int) -> None:
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):  # no pidfd (macOS, old kernels): poll the parent
        while os.getppid() == pid:
            time.sleep(_POLL_S)
        return
    try:
        if os.getppid() != pid:  # died before the pidfd was opened (its pid may be another's now)
            return
        with selectors.DefaultSelector() as sel:
            sel.register(pidfd, selectors.EVENT_READ)
            while not sel.select(None):
                pass
    finally:
        os.close(pidfd)


def _wait_status(pid: int) -> int | None:
    """The dead process's wait status while it is a zombie (/proc/PID/stat field 52, Linux >= 3.5)."""
    try:
        with open(f"/proc/{pid}/stat") as fp:
            fields = fp.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if len(fields) < 50 or fields[0] != "Z":
        return None
    return int(fields[49])


def _forward(channels: list[list[int]]) -> bytes:
    """Forward what the pipes hold, until every writer is gone or they stay quiet; returns fd 2's bytes."""
    kept = bytearray()
    with selectors.DefaultSelector() as sel:
        for fd, read, prev in channels:
            os.set_blocking(read, False)
            sel.register(read, selectors.EVENT_READ, (fd, prev))
        while sel.get_map():
            ready = sel.select(_QUIET_S)
            if not ready:
                break
            for key, _ in ready:
                fd, prev = key.data
                try:
                    data = os.read(key.fd, 1 << 16)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(key.fd)
                    continue
                _write_all(prev, data)
                if fd == 2:
                    kept += data
    return bytes(kept)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            time.sleep(0.001)
        except OSError:
            return


def _job_folder() -> Any:
    """The job folder's names (job_folder.py, beside this file): imported with the package, loaded by its path in
    the helper (``python -I -S`` this file: the package is not on its sys.path)."""
    if __name__ != "__main__":
        from cudaassert_ipy.capture import job_folder

        return job_folder
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "job_folder.py")
    spec = importlib.util.spec_from_file_location("cudaassert_job_folder", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Death(NamedTuple):
    """What the helper saw: the process, its wait status (None: already collected), fd 2's rescued bytes."""

    pid: int
    status: int | None
    rescued: bytes
    folder: str | None  # the ring folder, when it still exists (a runner that left through Python removed it)
    stderr: int | None  # the descriptor fd 2 forwarded to


def watch(args: Sequence[str]) -> tuple[Death, list[str]]:
    """The helper's work (argv from ``spawn``): wait for the death, forward, record; returns the rest of argv."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # a Ctrl-C or the launcher's SIGTERM: drain first
        signal.signal(sig, signal.SIG_IGN)
    pid, folder, count = int(args[0]), args[1] or None, int(args[2])
    channels = [[int(n) for n in c.split(":")] for c in args[3 : 3 + count]]
    _wait_for_death(pid)
    status = _wait_status(pid)
    rescued = _forward(channels)
    if folder is not None and os.path.isdir(folder):
        _job_folder().write_death(folder, pid, status)
    else:
        folder = None
    stderr = next((prev for fd, _, prev in channels if fd == 2), None)
    return Death(pid, status, rescued, folder, stderr), list(args[3 + count :])


if __name__ == "__main__":
    watch(sys.argv[1:])
