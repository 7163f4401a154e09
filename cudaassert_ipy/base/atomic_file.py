"""Write a file so that readers see the old content or the new, never a part: the one way files are (re)placed.

Why one helper: the resume plan, the kept values' manifest, the startup stub and the runner's JSON report are
read by another process (the restarted kernel, a launcher) that may start while we write, and a machine may go
down right after a restart request. Each used to do this its own way (one did not fsync, one followed a link
planted at its temporary name, one kept the umask's mode); now each gets the same guarantees:

* the bytes go to a temporary file in the same directory (so the rename never crosses a filesystem), created
  fresh (``O_EXCL``, never through a symbolic link) with ``mode`` (less the umask, as ``open`` does);
* they are flushed to the disk (``fsync``) before ``os.replace`` puts the file in place in one step;
* on any failure the temporary file is removed and the ``OSError`` propagates; the old file stays as it was.

Standard library only: every layer may use it (base/).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["write_atomic"]

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)


def write_atomic(path: str | os.PathLike[str], data: str | bytes, *, mode: int = 0o600) -> Path:
    """Put ``data`` (text is written as UTF-8) at ``path`` in one step; returns the path. Raises ``OSError``."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()  # left by a crash of this pid's predecessor: O_EXCL would refuse it
    try:
        fd = os.open(tmp, _FLAGS, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return target
