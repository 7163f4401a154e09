"""An fd-level tee of fd 2 (and 1, each by its own tap): every byte still reaches its old destination, and we keep
a tail.

The CUDA runtime writes assertion lines straight to fd 2 from C, where ``sys.stderr`` never sees
them, and older or Windows kernels send them only to the server log. So we ``dup2`` a pipe of our
own onto the fd, and one reader thread forwards each byte to the previous descriptor (ipykernel's
pipe or the real stderr) and records it in a bounded tail. Measurements and the reasons for the
1 MiB pipes are in docs/design.md ("The assertion line"); minrk/wurlitzer was the model.
Where ipykernel captures the fd, the reader can instead write every byte to the kernel's log itself
and a thinned stream to the cell (``shown_lines``; cell_route.py, line_filter.py): thousands of
assertion lines then stay out of the notebook.
No IPython, no torch.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import select
import selectors
import stat
import threading
import time
import weakref
from collections.abc import Callable, Iterable

from cudaassert_ipy.capture.cell_route import CellRoute, find_route
from cudaassert_ipy.capture.fd_io import (
    HAS_FIONREAD,
    PIPE_SIZE,
    bytes_waiting,
    close,
    dup2,
    enlarge,
    flush_c,
    flush_std,
    read_all,
    write_all,
)

__all__ = ["LIVE_TAPS", "FdTap", "LiveTaps", "TapError", "TapSet"]

_CHUNK = 1 << 16
_DRAIN_LIMIT = 64 << 20  # drain() stops after this much so a writer in a loop cannot pin it
_IDLE_S = 0.05  # stop() waits for this much quiet; a child still writing to our pipe gets a lingering forwarder
_STOP_TIMEOUT_S = 5.0
_SETTLE_S = 1.0  # settle() waits at most this long for the next reader; one that is slower is not waited for again
_RELEASE_S = 0.02  # a partial line held for the filter goes to the cell unfiltered after this much quiet


class TapError(RuntimeError):
    """fd-level capture cannot be set up here; the caller carries on without it."""


class _Channel:
    """One tapped fd: our pipe's read end and a duplicate of what the fd pointed to before."""

    __slots__ = ("broken", "eof", "fd", "forwarded", "prev", "read", "route", "waits")

    def __init__(self, fd: int, prev: int, read: int, waits: bool = False, route: CellRoute | None = None) -> None:
        self.fd, self.prev, self.read = fd, prev, read
        self.route = route  # under ipykernel: the log gets every byte, the cell a thinned stream (cell_route.py)
        self.eof = False  # every write end is closed
        self.broken = False  # the old destination refuses bytes (EPIPE, EBADF); we still record
        self.waits = waits  # the old destination is a pipe whose reader settle() waits for
        self.forwarded = 0  # bytes written to the old destination


class FdTap:
    """Tee one ``fd`` through a pipe into a bounded in-memory tail, forwarding every byte unchanged.

    One fd per tap, so each fd keeps its own tail and never splits another's lines (``TapSet`` holds one per fd).
    ``start()``/``stop()`` are idempotent; after ``stop()`` the fd is the original descriptor again.
    ``mark()`` then ``drain()`` + ``text_since(mark)`` give what was written in between.
    ``shown_lines`` (None: off) thins assertion lines on their way to a notebook cell where ipykernel
    captures the fd; the tail still records every byte.
    """

    def __init__(self, fd: int, tail_bytes: int = 4 * 1024 * 1024, shown_lines: int | None = None) -> None:
        self._fd = fd
        self._shown_lines = shown_lines
        self._tail_bytes = max(0, int(tail_bytes))
        self._lock = threading.Lock()  # held while reading a pipe, forwarding and recording a chunk
        #: ``busy()``: whether a reader is between taking a chunk out of a pipe and recording it (the lock's own
        #: ``locked``, bound once: TapSet asks it before every cell's end)
        self.busy: Callable[[], bool] = self._lock.locked
        self._buf = bytearray()
        #: Bytes recorded since construction (the position a ``mark()`` taken now would return, without draining);
        #: a plain attribute, read before every cell. Only the tap writes it.
        self.bytes_seen = 0
        self._channel: _Channel | None = None  # while started
        self._thread: threading.Thread | None = None
        self._selector: selectors.BaseSelector | None = None
        self._wake: tuple[int, int] = (-1, -1)
        self._stopping = threading.Event()
        self._active = False
        self._owner_pid = -1
        self._routed = False  # the channel has a CellRoute: the reader then times out to release held lines
        self.error: BaseException | None = None  # what stopped the reader thread, if anything
        #: where every recorded chunk is also written (rescue.TailFile: the runner's stderr tail on disk), or None
        self.mirror: Callable[[bytes], None] | None = None

    @property
    def active(self) -> bool:
        """True between ``start()`` and ``stop()`` in the process that started the tap."""
        return self._active and self._owner_pid == os.getpid()

    @property
    def fd(self) -> int:
        return self._fd

    @property
    def dropped_bytes(self) -> int:
        """Bytes that fell out of the bounded tail (they were still forwarded)."""
        with self._lock:
            return self.bytes_seen - min(len(self._buf), self._tail_bytes)

    def start(self) -> None:
        """Put our pipes under the fds and start the reader thread; a no-op if already active."""
        if self.active:
            return
        if os.name == "nt" or not hasattr(os, "dup2") or not hasattr(os, "set_blocking"):
            raise TapError("fd-level capture needs select() on pipes, which this platform lacks")
        flush_std()
        self._stopping.clear()
        self.error = None
        fd = self._fd
        opened: list[int] = []
        switched = False
        route: CellRoute | None = None
        try:
            wake_r, wake_w = os.pipe()
            opened += [wake_r, wake_w]
            for end in (wake_r, wake_w):
                os.set_blocking(end, False)
            prev = os.dup(fd)
            opened.append(prev)
            read, write = os.pipe()
            opened += [read, write]
            enlarge(write)
            fifo = stat.S_ISFIFO(os.fstat(prev).st_mode)
            if fifo:
                enlarge(prev)
            os.set_blocking(read, False)
            route = find_route(fd, self._shown_lines) if self._shown_lines is not None else None
            waits = fifo and HAS_FIONREAD and route is None
            channel = _Channel(fd, prev, read, waits=waits, route=route)
            dup2(write, fd)
            switched = True
            os.close(write)
            opened.remove(write)
        except OSError as exc:
            if switched:
                dup2(prev, fd)
            for end in opened + ([route.log] if route is not None else []):
                close(end)
            raise TapError(f"cannot tap fd {fd}: {exc}") from exc
        self._channel = channel
        self._routed = route is not None
        self._wake = (wake_r, wake_w)
        self._selector = selectors.DefaultSelector()
        self._selector.register(wake_r, selectors.EVENT_READ, None)
        self._selector.register(channel.read, selectors.EVENT_READ, channel)
        self._owner_pid = os.getpid()
        self._active = True
        self._thread = threading.Thread(target=self._run, name="cudaassert-fd-tap", daemon=True)
        self._thread.start()
        LIVE_TAPS.add(self)

    def stop(self) -> None:
        """Give the fd back, forward what is still in our pipe, stop the thread; idempotent.

        A write in flight when we switch keeps its reference to our pipe, so we read until every
        write end is closed, or the pipe stays quiet (a child process may still hold it).
        """
        channel = self._channel
        if not self.active or channel is None:
            self._active = False  # in a forked child: the fd stays on the parent's pipe
            return
        flush_std()
        with self._lock:
            self._pump(channel, _DRAIN_LIMIT)
            dup2(channel.prev, channel.fd)
            self._active = False
            self._pump(channel, _DRAIN_LIMIT)
            self._unroute(channel, None)  # from here on plain forwarding: a child's late bytes go to prev
        self._stopping.set()
        close(self._wake[1])
        thread = self._thread
        if thread is not None:
            thread.join(_STOP_TIMEOUT_S)
            if thread.is_alive():  # stuck forwarding to a destination that does not read
                self.error = TapError("fd tap reader did not stop; its descriptors are left open")
                return
        if self._finish(channel, time.monotonic() + _STOP_TIMEOUT_S, _IDLE_S):
            _wait_read(channel, time.monotonic() + _SETTLE_S)
            close(channel.read)
            close(channel.prev)
        else:  # a child process still holds our pipe: forward its bytes until it lets go (no EPIPE)
            threading.Thread(target=self._linger, args=(channel,), name="cudaassert-fd-linger", daemon=True).start()
        close(self._wake[0])
        if self._selector is not None:
            self._selector.close()
        self._channel, self._thread, self._selector, self._wake = None, None, None, (-1, -1)
        LIVE_TAPS.discard(self)

    def __enter__(self) -> FdTap:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def drain(self) -> None:
        """Read and forward what is in the pipe now, so a C write just before shows in the tail."""
        channel = self._channel
        if not self.active or channel is None:
            return
        flush_c()
        with self._lock:
            self._pump(channel, _DRAIN_LIMIT)

    def settle(self, timeout: float = _SETTLE_S) -> None:
        """Forward what is in our pipes, then wait until the pipe we forward to has been read, or ``timeout``.

        ipykernel reads its fd pipe from a thread (1000 bytes at a time) and publishes what it read as
        the running cell's output. Bytes it reads after the cell's idle message reach the frontend late,
        and JupyterLab may not show output for a finished cell (jupyterlab#629); so before a cell ends,
        wait for that reader.
        A destination still holding bytes after ``timeout`` (nobody reads it) is not waited for again.
        """
        channel = self._channel
        if not self.active or channel is None:
            return
        self.drain()
        if self._routed:
            with self._lock:
                if channel.route is not None:
                    self._guard(channel, channel.route.end_cell)
        _wait_read(channel, time.monotonic() + timeout)

    def set_shown_lines(self, shown: int) -> None:
        """How many raw lines per assert site the cell shows from now on (negative: all)."""
        with self._lock:
            self._shown_lines = shown
            channel = self._channel
            if channel is not None and channel.route is not None and channel.route.filter is not None:
                channel.route.filter.shown = shown

    @property
    def routed(self) -> bool:
        """Whether the fd's bytes go to the log whole and to the cell thinned (ipykernel found under it)."""
        return self._channel is not None and self._channel.route is not None

    def channel(self) -> tuple[int, int, int] | None:
        """(tapped fd, our pipe's read end, the old destination) while started: what rescue.py holds."""
        channel = self._channel
        return None if channel is None else (channel.fd, channel.read, channel.prev)

    def set_mirror(self, mirror: Callable[[bytes], None], seed: int) -> None:
        """From now on write every recorded chunk to ``mirror`` too, after the last ``seed`` bytes recorded so far."""
        with self._lock:
            kept = min(len(self._buf), self._tail_bytes, seed)
            try:
                mirror(bytes(self._buf[len(self._buf) - kept :]))
            except Exception:
                return
            self.mirror = mirror

    @property
    def read_fd(self) -> int | None:
        """Our pipe's read end while started (for a caller's ``poll``: readable means bytes wait to be forwarded)."""
        return None if self._channel is None else self._channel.read

    @property
    def waited(self) -> bool:
        """Whether ``settle()`` waits for the fd's next reader: a pipe, until its reader leaves bytes unread for a
        whole ``settle()`` timeout (nobody reads it, so it is not waited for again)."""
        channel = self._channel
        return channel is not None and channel.waits and not channel.broken

    def unread(self) -> bool:
        """Whether bytes sit in our pipe, written but not yet forwarded (one ioctl)."""
        return self._channel is not None and bytes_waiting(self._channel.read) > 0

    def mark(self) -> int:
        """A position in the byte stream; bytes already written are before it (we drain first)."""
        self.drain()
        return self.bytes_seen

    def text_since(self, mark: int) -> str:
        """What was recorded after ``mark``, decoded as UTF-8; if the tail lost some, what remains."""
        with self._lock:
            kept = min(len(self._buf), self._tail_bytes)
            wanted = self.bytes_seen - max(mark, self.bytes_seen - kept)
            if wanted <= 0:
                return ""
            data = bytes(self._buf[len(self._buf) - wanted :])
        return data.decode("utf-8", errors="replace")

    def _after_fork(self) -> None:
        """In a forked child: a fresh lock (the parent's may have been copied held)."""
        self._lock = threading.Lock()
        self.busy = self._lock.locked

    def _run(self) -> None:
        selector = self._selector
        assert selector is not None
        try:
            while not self._stopping.is_set():
                ready = selector.select(_RELEASE_S if self._routed and self._holding() else None)
                if not ready:  # quiet: a partial line held for the filter goes out as it is
                    with self._lock:
                        channel = self._channel
                        if channel is not None and channel.route is not None:
                            self._guard(channel, channel.route.release)
                for key, _ in ready:
                    channel = key.data
                    if channel is None:
                        read_all(key.fd)
                        continue
                    with self._lock:
                        self._pump(channel, PIPE_SIZE)
                    if channel.eof:
                        selector.unregister(channel.read)
        except BaseException as exc:  # never print from here: our own stderr is the tapped fd
            self.error = exc

    def _holding(self) -> bool:
        route = self._channel.route if self._channel is not None else None
        return route is not None and route.filter is not None and route.filter.holding

    def _guard(self, channel: _Channel, action: Callable[[], None]) -> None:
        """Run a route's cell write; if the cell's stream fails, forward plainly from now on. Lock held."""
        try:
            action()
        except Exception as exc:
            self._unroute(channel, exc)

    def _unroute(self, channel: _Channel, failure: BaseException | None) -> None:
        """Back to plain forwarding to ``prev`` for this channel; the route flushes what it holds. Lock held."""
        route, channel.route = channel.route, None
        if route is None:
            return
        if failure is not None and route.failure is None:
            route.failure = failure
        with contextlib.suppress(Exception):
            route.close()

    def _finish(self, channel: _Channel, deadline: float, idle: float | None) -> bool:
        """After the switch back: read until EOF, until quiet for ``idle`` s, or deadline; whether EOF came."""
        with selectors.DefaultSelector() as selector:
            if not channel.eof:
                selector.register(channel.read, selectors.EVENT_READ, channel)
            while selector.get_map() and time.monotonic() < deadline:
                if not selector.select(idle):
                    break
                with self._lock:
                    self._pump(channel, _DRAIN_LIMIT)
                if channel.eof:
                    selector.unregister(channel.read)
        return channel.eof

    def _linger(self, channel: _Channel) -> None:
        try:
            self._finish(channel, float("inf"), None)
        finally:
            close(channel.read)
            close(channel.prev)

    def _pump(self, channel: _Channel, limit: int) -> None:
        """Read up to ``limit`` bytes from one pipe, forwarding and recording each chunk. Lock held."""
        done = 0
        while done < limit and not channel.eof:
            try:
                data = os.read(channel.read, _CHUNK)
            except BlockingIOError:
                return
            except OSError:
                channel.eof = True
                return
            if not data:
                channel.eof = True
                return
            done += len(data)
            route = channel.route
            if route is not None:
                if not route.log_broken:
                    route.log_broken = not write_all(route.log, data)
                try:
                    route.to_cell(data)
                except Exception as exc:  # the cell's stream failed: plain forwarding from the next chunk on
                    self._unroute(channel, exc)
            elif not channel.broken:
                channel.broken = not write_all(channel.prev, data)
                channel.forwarded += len(data)
            self._record(data)

    def _record(self, data: bytes) -> None:
        self.bytes_seen += len(data)
        if self.mirror is not None:
            try:
                self.mirror(data)
            except Exception:  # a full disk or a closed map: the tail in memory goes on
                self.mirror = None
        if self._tail_bytes:
            self._buf += data
            if len(self._buf) > 2 * self._tail_bytes:  # trim rarely: keeps appends amortised O(1)
                del self._buf[: len(self._buf) - self._tail_bytes]


class TapSet:
    """One FdTap per fd, so fd 1 and fd 2 each keep their own tail and never split each other's lines.

    ``mark()`` is cheap on purpose (it runs before every cell): it reads positions without draining.
    Bytes still in a pipe at that moment count as this cell's, which is harmless for parsing.
    """

    def __init__(
        self, fds: Iterable[int] = (2, 1), tail_bytes: int = 4 * 1024 * 1024, shown_lines: int | None = None
    ) -> None:
        self.taps = [FdTap(fd, tail_bytes=tail_bytes, shown_lines=shown_lines) for fd in dict.fromkeys(fds)]
        self._unread: select.poll | None = None  # a poll over our pipes' read ends while started: one call asks all

    @property
    def fds(self) -> tuple[int, ...]:
        return tuple(tap.fd for tap in self.taps)

    @property
    def active(self) -> bool:
        return any(tap.active for tap in self.taps)

    def start(self) -> None:
        started: list[FdTap] = []
        try:
            for tap in self.taps:
                tap.start()
                started.append(tap)
        except BaseException:
            for tap in reversed(started):
                tap.stop()
            raise
        if hasattr(select, "poll"):
            self._unread = select.poll()
            for tap in self.taps:
                if tap.read_fd is not None:
                    self._unread.register(tap.read_fd, select.POLLIN)

    def stop(self) -> None:
        self._unread = None
        for tap in reversed(self.taps):
            tap.stop()

    def mark(self) -> tuple[int, ...]:
        return tuple([tap.bytes_seen for tap in self.taps])  # per cell: no generator, no property call

    def drain(self) -> None:
        for tap in self.taps:
            tap.drain()

    def settle(self, mark: tuple[int, ...], timeout: float = _SETTLE_S) -> None:
        """``FdTap.settle`` when anything was written since ``mark``; a quiet cell costs one ``poll()``."""
        # quiet: nothing in our pipes, no reader between taking a chunk out and recording it (it holds its lock
        # meanwhile), and nothing recorded; asked in this order, a chunk in flight is seen by one of them
        if (
            not (self._unread.poll(0) if self._unread is not None else self.unread())
            and True not in [tap.busy() for tap in self.taps]
            and self.mark() == mark
        ):
            return
        for tap in self.taps:
            tap.settle(timeout)

    def unread(self) -> bool:
        return any(tap.unread() for tap in self.taps)

    def set_shown_lines(self, shown: int) -> None:
        for tap in self.taps:
            tap.set_shown_lines(shown)

    @property
    def routed_fds(self) -> tuple[int, ...]:
        return tuple(tap.fd for tap in self.taps if tap.routed)

    @property
    def waited_fds(self) -> tuple[int, ...]:
        return tuple(tap.fd for tap in self.taps if tap.waited)

    def channels(self) -> list[tuple[int, int, int]]:
        """(tapped fd, our pipe's read end, the old destination) per started tap: what rescue.py holds."""
        return [channel for tap in self.taps if (channel := tap.channel()) is not None]

    def text_since(self, mark: tuple[int, ...]) -> str:
        parts = [tap.text_since(m) for tap, m in zip(self.taps, mark)]
        return "\n".join(p for p in parts if p)


def _wait_read(channel: _Channel, deadline: float) -> None:
    """Wait until the old destination's reader has taken the bytes its pipe holds now (not those written
    meanwhile: a child that never stops writing must not hold the cell); one still behind at ``deadline``
    is not waited for again."""
    if not channel.waits or channel.broken:
        return
    waited, start = False, channel.forwarded
    while bytes_waiting(channel.prev) > channel.forwarded - start:  # pipes are FIFO: newer bytes sit behind
        if time.monotonic() >= deadline:
            channel.waits = False
            break
        waited = True
        time.sleep(0.0005)
    if waited:  # the reader took the last chunk; give it a moment to hand that chunk on
        time.sleep(0.001)


class LiveTaps:
    """Every started tap in this process, for the two moments no caller is there to stop them; process-wide by nature.

    At interpreter exit the reader thread (a daemon) dies with bytes still in our pipes, so each live tap is
    stopped, which forwards them. In a forked child a tap is inactive (the fds stay on the parent's pipes) but
    must still answer ``text_since()``, and a fork can copy its lock held. Both are process events (``atexit``,
    ``os.register_at_fork``), registered once when this module is imported; the set holds the taps weakly.
    """

    def __init__(self) -> None:
        self._taps: weakref.WeakSet[FdTap] = weakref.WeakSet()

    def add(self, tap: FdTap) -> None:
        self._taps.add(tap)

    def discard(self, tap: FdTap) -> None:
        self._taps.discard(tap)

    def __len__(self) -> int:
        return len(self._taps)

    def stop_all(self) -> None:
        """At exit: forward what is still in our pipes."""
        for tap in list(self._taps):
            with contextlib.suppress(Exception):
                tap.stop()

    def after_fork_in_child(self) -> None:
        for tap in list(self._taps):
            tap._after_fork()


#: The process's one registry of started taps (see :class:`LiveTaps`).
LIVE_TAPS = LiveTaps()
atexit.register(LIVE_TAPS.stop_all)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=LIVE_TAPS.after_fork_in_child)
