"""Where a tapped fd's bytes go under ipykernel: all of them to the kernel's log, a thinned stream to the cell.

ipykernel >= 6 captures fd 1/2 itself (``capture_fd_output``): it puts a pipe under each and a watcher
thread hands what it reads to the cell (``OutStream.write``) and, unchanged, to a copy of the
original fd, the server's terminal: the kernel's log. Our tap sits on top. Forwarding into
ipykernel's pipe would send the same bytes to both places, so where we find ipykernel's capture under
an fd we make its two writes ourselves, from one thread, in order: every byte to the log, and what
the LineFilter keeps to the cell's stream. Where we do not find it (older kernels, capture off,
``echo`` set, scripts) there is no route and the tap forwards as before. No IPython import: the
stream is recognised by what it holds.
"""

from __future__ import annotations

import codecs
import io
import os
import stat
import sys
from collections.abc import Callable

from cudaassert_ipy.capture.line_filter import LineFilter

__all__ = ["CellRoute", "find_route"]


class CellRoute:
    """The log fd (ours, a duplicate) and the cell's ``write(str)``, with the filter between them."""

    def __init__(self, log: int, cell: Callable[[str], object], shown: int) -> None:
        self.log = log
        self.log_broken = False  # the log refuses bytes; the cell still gets its share
        self._cell = cell
        self.filter: LineFilter | None = LineFilter(shown)
        self._decode = codecs.getincrementaldecoder("utf-8")("replace").decode
        self.failure: BaseException | None = None  # what made the filter fall back to pass-through

    def to_cell(self, data: bytes) -> None:
        """Send what the filter keeps of ``data`` to the cell. A filter that fails passes everything from then on."""
        flt = self.filter
        if flt is not None:
            try:
                data = flt.feed(data)
            except Exception as exc:  # nothing may be lost: this chunk and the held line go out whole
                self.failure, self.filter = exc, None
                data = _abandon(flt) + data
        if data:
            text = self._decode(data)
            if text:
                self._cell(text)

    def release(self) -> None:
        """Hand the cell a partial line that waited for its newline (the writer went quiet)."""
        if self.filter is not None and self.filter.holding:
            self.to_cell_raw(self.filter.release())

    def end_cell(self) -> None:
        """At a cell's end: the held partial line, then one line per site saying how many lines went to the log."""
        if self.filter is None:
            return
        self.release()
        note = self.filter.summary()
        if note:
            self._cell(note)

    def to_cell_raw(self, data: bytes) -> None:
        text = self._decode(data)
        if text:
            self._cell(text)

    def close(self) -> None:
        """Flush what is held and give back our duplicate of the log fd."""
        try:
            self.end_cell()
            tail = self._decode(b"", True)
            if tail:
                self._cell(tail)
        finally:
            try:
                os.close(self.log)
            except OSError:
                pass


def _abandon(flt: LineFilter) -> bytes:
    try:
        return flt.release()
    except Exception:
        return b""


def find_route(fd: int, shown: int) -> CellRoute | None:
    """A route when ``fd`` is, right now, the write end of the pipe ipykernel's watcher reads; else None.

    Reads ipykernel's ``OutStream._fid`` (the watched read end, private, read only) to be sure the pipe
    under ``fd`` is the one its stream publishes; ``fileno()`` is the copy of the original fd it echoes to.
    """
    stream = {1: sys.stdout, 2: sys.stderr}.get(fd)
    watched = getattr(stream, "_fid", None)
    if stream is None or not isinstance(watched, int) or getattr(stream, "echo", None) is not None:
        return None
    if not getattr(stream, "_should_watch", False) or not callable(getattr(stream, "write", None)):
        return None
    try:
        here, there = os.fstat(fd), os.fstat(watched)
        log = stream.fileno()
        same_pipe = stat.S_ISFIFO(here.st_mode) and (here.st_ino, here.st_dev) == (there.st_ino, there.st_dev)
        if not same_pipe or not isinstance(log, int) or log == fd:
            return None
        return CellRoute(os.dup(log), stream.write, shown)
    except (OSError, ValueError, io.UnsupportedOperation):
        return None
