"""Small operations on file descriptors and pipes the fd tap is built from; each says how it fails.

Linux and macOS only where noted (FIONREAD, F_SETPIPE_SZ); elsewhere they degrade to doing nothing.
No IPython, no torch.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import selectors
import sys
import time
from collections.abc import Callable
from typing import Any

__all__ = [
    "HAS_FIONREAD",
    "PIPE_SIZE",
    "bytes_waiting",
    "close",
    "dup2",
    "enlarge",
    "flush_c",
    "flush_std",
    "read_all",
    "write_all",
]

_F_SETPIPE_SZ, _F_GETPIPE_SZ = 1031, 1032  # Linux fcntl.h; absent from the fcntl module before 3.10
PIPE_SIZE = 1 << 20  # stock 64 KiB pipes hang a kernel when C code writes more with the GIL held

_ioctl: Callable[[int, int, bytes], bytes] | None = None
_FIONREAD = 0
try:  # Linux and macOS: how many bytes a pipe holds, asked through either end
    import fcntl as _fcntl
    import termios as _termios

    _ioctl, _FIONREAD = _fcntl.ioctl, _termios.FIONREAD
except ImportError:  # Windows: the tap does not start there
    pass
HAS_FIONREAD = _ioctl is not None


def write_all(fd: int, data: bytes) -> bool:
    """Write every byte, waiting while a non-blocking destination is full; False if it is gone."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            with selectors.DefaultSelector() as selector:
                selector.register(fd, selectors.EVENT_WRITE)
                selector.select(1.0)
        except OSError:
            return False
    return True


def bytes_waiting(fd: int) -> int:
    """Bytes waiting in the pipe ``fd`` belongs to (either end); 0 when that cannot be asked."""
    if _ioctl is None:
        return 0
    try:
        return int.from_bytes(_ioctl(fd, _FIONREAD, b"\0\0\0\0"), sys.byteorder)
    except (OSError, TypeError):
        return 0


def read_all(fd: int) -> None:
    with contextlib.suppress(OSError):
        while os.read(fd, 4096):
            pass


def enlarge(fd: int) -> None:
    """Grow (never shrink) a pipe to 1 MiB where Linux allows it; elsewhere the default size stays."""
    with contextlib.suppress(ImportError, OSError, ValueError):
        import fcntl

        if fcntl.fcntl(fd, _F_GETPIPE_SZ) < PIPE_SIZE:
            fcntl.fcntl(fd, _F_SETPIPE_SZ, PIPE_SIZE)


def dup2(src: int, dst: int) -> None:
    """``os.dup2``, retried on EBUSY (Linux returns it when racing an ``open()`` in another thread)."""
    for attempt in range(30):
        try:
            os.dup2(src, dst)
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or attempt == 29:
                raise
            time.sleep(0.1)


def close(fd: int) -> None:
    if fd >= 0:
        with contextlib.suppress(OSError):
            os.close(fd)


def flush_std() -> None:
    """Push Python's and C's buffered text out before the fds change underneath them."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed or exotic stream must not stop the tap
            if stream is not None:
                stream.flush()
    flush_c()


@functools.cache
def _c_stdio() -> tuple[Any, ...]:
    """(fflush, stdout, stderr) from libc, looked up once (a cache, not state: the answer never changes); ()
    where they cannot be found."""
    with contextlib.suppress(Exception):  # Windows, odd libcs: Python-level flushing is all we do
        import ctypes

        libc = ctypes.CDLL(None)
        names = ("__stdoutp", "__stderrp") if sys.platform == "darwin" else ("stdout", "stderr")
        return (libc.fflush, *(ctypes.c_void_p.in_dll(libc, name) for name in names))
    return ()


def flush_c() -> None:
    """fflush C's stdout and stderr: device printf text may sit in stdout's buffer when fd 1 is a pipe."""
    found = _c_stdio()
    with contextlib.suppress(Exception):
        for stream in found[1:]:
            found[0](stream)
