"""The fd tap: bytes arrive once, whole and in order, at the old destination and in the tail.

Tests that move fd 1/2 run in a child process (pytest captures this process's own fds); tests of
the tail's bookkeeping tap a private pipe in-process.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cudaassert_ipy.capture import fd_io
from cudaassert_ipy.capture.fd_tap import FdTap, TapError, TapSet

ROOT = Path(__file__).resolve().parents[1]
ASSERT_LINE = (
    b"../aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: "
    b"block: [0,0,0], thread: [0,0,0] Assertion `t >= 0 && t < n_classes` failed.\n"
)
PRELUDE = """
import ctypes, json, os, sys, threading, time
from cudaassert_ipy.capture.fd_tap import FdTap, TapSet
OUT = sys.argv[1]
R = {}
def save_tail(data):
    with open(OUT + ".tail", "wb") as f:
        f.write(data.encode("utf-8", "surrogateescape"))
def ino(fd):
    st = os.fstat(fd)
    return [st.st_ino, st.st_dev]
"""
EPILOGUE = """
with open(OUT, "w") as f:
    json.dump(R, f)
"""


def run_child(
    body: str, tmp_path: Path, timeout: float = 30, stderr: Any = subprocess.PIPE, setup: str = ""
) -> tuple[subprocess.CompletedProcess, dict[str, Any], bytes]:
    """Run ``setup`` then ``body`` in a fresh interpreter; return the process, its ``R`` and its saved tail."""
    out = tmp_path / "result.json"
    code = PRELUDE + textwrap.dedent(setup) + textwrap.dedent(body) + EPILOGUE
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-W", "ignore::DeprecationWarning", "-c", code, str(out)],
        stdout=subprocess.PIPE,
        stderr=stderr,
        timeout=timeout,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    tail = Path(str(out) + ".tail")
    return proc, json.loads(out.read_text()), tail.read_bytes() if tail.exists() else b""


def test_os_write_and_c_writes_arrive_once_whole_and_in_order_at_the_destination_and_in_the_tail(
    tmp_path: Path,
) -> None:
    proc, _, tail = run_child(
        """
        tap = FdTap(2)
        tap.start()
        m = tap.mark()
        os.write(2, b"first\\n")
        ctypes.CDLL(None).write(2, b"second from C\\n", 14)
        ctypes.PyDLL(None).write(2, b"z" * 200000, 200000)
        os.write(2, b"\\nlast\\n")
        tap.drain()
        save_tail(tap.text_since(m))
        tap.stop()
        """,
        tmp_path,
    )
    expected = b"first\nsecond from C\n" + b"z" * 200000 + b"\nlast\n"
    assert proc.stderr == expected
    assert tail == expected


def test_5000_lines_and_a_1_mib_blob_arrive_whole_at_the_destination_and_in_the_tail(tmp_path: Path) -> None:
    proc, r, tail = run_child(
        """
        tap = FdTap(2, tail_bytes=8 << 20)
        tap.start()
        m = tap.mark()
        for i in range(5000):
            os.write(2, b"line %05d\\n" % i)
        os.write(2, b"y" * (1 << 20))
        tap.drain()
        save_tail(tap.text_since(m))
        R["dropped"] = tap.dropped_bytes
        tap.stop()
        """,
        tmp_path,
    )
    expected = b"".join(b"line %05d\n" % i for i in range(5000)) + b"y" * (1 << 20)
    assert proc.stderr == expected
    assert tail == expected
    assert r["dropped"] == 0


def test_drain_makes_a_just_written_line_visible_immediately(tmp_path: Path) -> None:
    _, r, _ = run_child(
        """
        tap = FdTap(2)
        tap.start()
        libc = ctypes.CDLL(None)
        misses = 0
        for i in range(300):
            m = tap.mark()
            line = b"probe %d\\n" % i
            if i % 2:
                libc.write(2, line, len(line))
            else:
                os.write(2, line)
            tap.drain()
            misses += tap.text_since(m) != line.decode()
        R["misses"] = misses
        tap.stop()
        """,
        tmp_path,
    )
    assert r["misses"] == 0


WATCHED_STDERR = """
# An ipykernel-like fd 2: a pipe whose reader is a Python thread that needs the GIL.
sink = open(OUT + ".sink", "wb")
r_fd, w_fd = os.pipe()
def watch():
    while True:
        data = os.read(r_fd, 65536)
        if not data:
            return
        sink.write(data)
watcher = threading.Thread(target=watch, daemon=True)
watcher.start()
original_stderr = os.dup(2)
os.dup2(w_fd, 2)
def unwatch():
    os.dup2(original_stderr, 2)
    os.close(w_fd)
    watcher.join(10)
    sink.close()
"""


def test_a_200_kb_write_with_the_gil_held_does_not_hang_under_an_in_process_pipe_reader(tmp_path: Path) -> None:
    run_child(
        """
        tap = FdTap(2)
        tap.start()
        t0 = time.perf_counter()
        ctypes.PyDLL(None).write(2, b"z" * 200000, 200000)
        R["seconds"] = time.perf_counter() - t0
        tap.stop()
        unwatch()
        """,
        tmp_path,
        timeout=20,
        setup=WATCHED_STDERR,
    )
    assert (tmp_path / "result.json.sink").read_bytes() == b"z" * 200000


def test_without_the_tap_the_same_gil_held_write_hangs_which_is_the_hazard_the_tap_removes(tmp_path: Path) -> None:
    with pytest.raises(subprocess.TimeoutExpired):
        run_child("ctypes.PyDLL(None).write(2, b'z' * 200000, 200000)\n", tmp_path, timeout=3, setup=WATCHED_STDERR)


@pytest.mark.parametrize("destination", ["file", "pipe", "terminal"])
def test_start_stop_start_stop_gives_back_exactly_the_original_descriptors(tmp_path: Path, destination: str) -> None:
    setup = ""
    if destination == "terminal":
        setup = """
        import pty
        master, slave = os.openpty()
        os.dup2(slave, 2)
        seen = bytearray()
        def read_master():
            while True:
                try:
                    seen.extend(os.read(master, 4096))
                except OSError:
                    return
        threading.Thread(target=read_master, daemon=True).start()
        """
    stderr = open(tmp_path / "stderr.txt", "wb") if destination == "file" else subprocess.PIPE  # noqa: SIM115
    try:
        _, r, _ = run_child(
            """
            before = [ino(1), ino(2)]
            tap = TapSet(fds=(2, 1))
            for i in range(2):
                tap.start()
                tap.start()
                R.setdefault("during", []).append([ino(1), ino(2)])
                os.write(2, b"round %d\\n" % i)
                tap.stop()
                tap.stop()
                R.setdefault("after", []).append([ino(1), ino(2)])
            R["before"] = before
            R["active"] = tap.active
            R["fds"] = sorted(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else []
            """,
            tmp_path,
            stderr=stderr,
            setup=setup,
        )
    finally:
        if destination == "file":
            stderr.close()
    assert r["after"] == [r["before"], r["before"]]
    assert all(d[1] != r["before"][1] for d in r["during"])
    assert r["active"] is False
    if destination == "file":
        assert (tmp_path / "stderr.txt").read_bytes() == b"round 0\nround 1\n"


def test_stop_while_writes_are_in_flight_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    _, r, _ = run_child(
        """
        errors = []
        def small_writes():
            try:
                for i in range(20000):
                    os.write(2, b"n%06d\\n" % i)
            except OSError as exc:
                errors.append(repr(exc))
        def big_write():
            written.append(os.write(2, b"<" + b"B" * (3 << 20) + b">\\n"))
        written = []
        tap = FdTap(2)
        tap.start()
        threads = [threading.Thread(target=small_writes), threading.Thread(target=big_write)]
        for t in threads:
            t.start()
        time.sleep(0.1)  # the destination reads slowly: the 3 MiB write is still in flight
        R["in_flight"] = threads[1].is_alive()
        rounds = 0
        while rounds < 3 or any(t.is_alive() for t in threads):
            tap.stop()
            tap.start()
            rounds += 1
        tap.stop()
        for t in threads:
            t.join()
        unwatch()
        R["rounds"], R["errors"], R["written"], R["error"] = rounds, errors, written, repr(tap.error)
        """,
        tmp_path,
        timeout=60,
        setup=WATCHED_STDERR.replace("sink.write(data)", "sink.write(data); time.sleep(0.01)"),
    )
    sink = (tmp_path / "result.json.sink").read_bytes()
    # A write bigger than PIPE_BUF is not atomic: small lines may land inside the big one, as on any pipe.
    numbered = re.findall(rb"n(\d{6})\n", sink)
    assert sorted(int(n) for n in numbered) == list(range(20000))
    assert [sink.count(c) for c in (b"<", b"B", b">")] == [1, 3 << 20, 1]
    assert len(sink) == 20000 * 8 + (3 << 20) + 3
    assert r["in_flight"] is True
    assert r["errors"] == [] and r["written"] == [(3 << 20) + 3] and r["error"] == "None"


def test_a_child_process_holding_the_pipe_after_stop_keeps_its_output_and_its_life(tmp_path: Path) -> None:
    """stop() waits for a short quiet spell, never for a child that keeps writing to end its output.

    The child ticks every 0.15 s until told to finish, and counts its ticks in a file: stop() must return while
    it ticks (within a few ticks: a stop that waited for the output to end would sit out its 5-s deadline, some
    30 ticks); measured in the child's own ticks, a loaded machine slows both sides alike.
    """
    proc, r, _ = run_child(
        """
        import subprocess
        tap = FdTap(2)
        tap.start()
        done, count = OUT + ".done", OUT + ".ticks"
        script = ('i=0; while [ ! -e "$0" ] && [ $i -lt 400 ]; do i=$((i+1)); echo tick$i >&2; echo $i > "$1"; '
                  'sleep 0.15; done')
        child = subprocess.Popen(["sh", "-c", script, done, count])  # inherits our pipe as its fd 2
        def ticks():
            try:
                with open(count) as f:
                    return int(f.read() or 0)
            except (OSError, ValueError):
                return 0
        while ticks() < 2:
            time.sleep(0.01)
        before = ticks()
        tap.stop()
        R["ticks_during_stop"] = ticks() - before
        R["child_alive_after_stop"] = child.poll() is None
        os.write(2, b"parent after stop\\n")
        open(done, "w").close()
        R["child_rc"] = child.wait(10)
        R["ticks"] = ticks()
        """,
        tmp_path,
        timeout=90,
    )
    assert r["child_rc"] == 0  # not killed by SIGPIPE
    assert r["child_alive_after_stop"] is True
    assert r["ticks_during_stop"] <= 6, r
    lines = proc.stderr.splitlines()
    assert lines.count(b"parent after stop") == 1
    assert [line for line in lines if line != b"parent after stop"] == [b"tick%d" % i for i in range(1, r["ticks"] + 1)]


def test_fd_1_is_tapped_too_including_python_prints_and_c_printf(tmp_path: Path) -> None:
    proc, _, tail = run_child(
        """
        tap = TapSet(fds=(2, 1))
        tap.start()
        m = tap.mark()
        print("from print", flush=True)
        os.write(1, b"from os.write\\n")
        libc = ctypes.CDLL(None)
        libc.printf(b"[CUDA_KERNEL_ASSERT] from printf\\n")  # stays in C's buffer: fd 1 is a pipe
        tap.drain()  # drain() fflushes C's stdout
        save_tail(tap.text_since(m))
        tap.stop()
        """,
        tmp_path,
    )
    expected = b"from print\nfrom os.write\n[CUDA_KERNEL_ASSERT] from printf\n"
    assert proc.stdout == expected
    assert tail == expected


def test_with_thinning_asked_for_but_no_ipykernel_capture_every_assertion_line_still_reaches_the_destination(
    tmp_path: Path,
) -> None:
    proc, r, tail = run_child(
        """
        tap = TapSet(fds=(2,), shown_lines=3)
        tap.start()
        R["routed"] = list(tap.routed_fds)
        m = tap.mark()
        os.write(2, LINES)
        tap.settle(m)
        tap.drain()
        save_tail(tap.text_since(m))
        tap.stop()
        """,
        tmp_path,
        setup=f"LINES = {ASSERT_LINE * 10!r}\n",
    )
    assert r["routed"] == []
    assert proc.stderr == ASSERT_LINE * 10 and tail == ASSERT_LINE * 10


def test_bytes_left_in_the_pipe_at_exit_still_reach_the_destination(tmp_path: Path) -> None:
    proc, _, _ = run_child(
        """
        tap = FdTap(2)
        tap.start()
        os.write(2, b"x" * 500000 + b"\\nbye\\n")
        """,
        tmp_path,
    )
    assert proc.stderr == b"x" * 500000 + b"\nbye\n"


def test_a_forked_childs_writes_reach_the_parents_tail_and_its_stop_changes_nothing(tmp_path: Path) -> None:
    proc, r, tail = run_child(
        """
        tap = FdTap(2)
        tap.start()
        m = tap.mark()
        tap._lock.acquire()  # fork while the reader holds the lock: the child must not inherit it held
        pid = os.fork()
        if pid == 0:
            os.write(2, b"from the child, tail %d\\n" % len(tap.text_since(m)))
            tap.drain()
            tap.stop()
            os._exit(0)
        tap._lock.release()
        os.waitpid(pid, 0)
        os.write(2, b"from the parent\\n")
        tap.drain()
        save_tail(tap.text_since(m))
        R["active"] = tap.active
        tap.stop()
        """,
        tmp_path,
        timeout=15,
    )
    assert proc.stderr == b"from the child, tail 0\nfrom the parent\n"
    assert tail == proc.stderr
    assert r["active"] is True


# -- in-process: a private pipe stands in for fd 2 ----------------------------------------------------


class PrivatePipe:
    """A pipe whose write end we tap and whose read end a thread collects."""

    def __init__(self, nonblocking_destination: bool = False, slow: bool = False, pause: float = 0.0005) -> None:
        self.read, self.write = os.pipe()
        if nonblocking_destination:
            os.set_blocking(self.write, False)
        self.slow, self.pause = slow, pause
        self.data = bytearray()
        self.thread = threading.Thread(target=self._collect, daemon=True)
        self.thread.start()

    def _collect(self) -> None:
        while True:
            chunk = os.read(self.read, 4096 if self.slow else 1 << 16)
            if not chunk:
                return
            self.data += chunk
            if self.slow:
                time.sleep(self.pause)

    def close(self) -> bytes:
        os.close(self.write)
        self.thread.join(10)
        os.close(self.read)
        return bytes(self.data)


def test_a_bounded_tail_keeps_the_newest_bytes_and_counts_the_dropped_ones() -> None:
    pipe = PrivatePipe()
    tap = FdTap(pipe.write, tail_bytes=1000)
    tap.start()
    try:
        start = tap.mark()
        payload = b"".join(b"%04d" % i for i in range(2000))  # 8000 bytes
        for i in range(0, len(payload), 100):
            os.write(pipe.write, payload[i : i + 100])
            tap.drain()
        late = start + 7500
        assert tap.dropped_bytes == 7000
        assert tap.text_since(start) == payload[-1000:].decode()
        assert tap.text_since(late) == payload[-500:].decode()
        assert tap.text_since(tap.mark()) == ""
    finally:
        tap.stop()
    assert pipe.close() == payload


def test_a_character_split_across_writes_decodes_whole() -> None:
    pipe = PrivatePipe()
    with FdTap(pipe.write) as tap:
        m = tap.mark()
        encoded = "Assertion `é` failed ✓\n".encode()
        for i in range(len(encoded)):
            os.write(pipe.write, encoded[i : i + 1])
        tap.drain()
        assert tap.text_since(m) == "Assertion `é` failed ✓\n"
    assert pipe.close() == encoded


def test_a_full_nonblocking_destination_is_waited_for_not_dropped() -> None:
    pipe = PrivatePipe(nonblocking_destination=True, slow=True)
    payload = bytes(range(256)) * 12000  # 3 MB: more than both pipes hold
    with FdTap(pipe.write, tail_bytes=0) as tap:
        os.write(pipe.write, payload)
        tap.drain()
    assert tap.error is None
    assert pipe.close() == payload


def test_a_destination_that_went_away_does_not_stop_recording() -> None:
    read, write = os.pipe()
    os.close(read)
    tap = FdTap(write)
    tap.start()
    try:
        m = tap.mark()
        os.write(write, b"still recorded\n")
        tap.drain()
        assert tap.text_since(m) == "still recorded\n"
    finally:
        tap.stop()
        os.close(write)
    assert tap.error is None


def _open_fds() -> set | None:
    return set(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None


def test_a_closed_fd_raises_tap_error_and_leaves_the_other_fds_as_they_were() -> None:
    pipe = PrivatePipe()
    closed = max(int(fd) for fd in os.listdir("/proc/self/fd")) + 100 if os.path.isdir("/proc/self/fd") else 999
    before_fds = _open_fds()
    before = os.fstat(pipe.write)
    tap = TapSet(fds=(pipe.write, closed))
    with pytest.raises(TapError, match=f"cannot tap fd {closed}"):
        tap.start()
    after = os.fstat(pipe.write)
    assert (after.st_ino, after.st_dev) == (before.st_ino, before.st_dev)
    assert _open_fds() == before_fds
    assert not tap.active
    tap.stop()
    os.write(pipe.write, b"direct\n")
    assert pipe.close() == b"direct\n"


def test_mark_and_text_since_work_before_start_and_after_stop() -> None:
    pipe = PrivatePipe()
    tap = FdTap(pipe.write)
    assert tap.mark() == 0 and tap.text_since(0) == ""
    with tap:
        os.write(pipe.write, b"kept after stop\n")
    assert tap.text_since(0) == "kept after stop\n"
    assert tap.bytes_seen == len(b"kept after stop\n")
    assert pipe.close() == b"kept after stop\n"


def test_a_tap_set_keeps_fd1_and_fd2_apart_so_lines_are_never_split() -> None:
    out, err = PrivatePipe(), PrivatePipe()
    taps = TapSet(fds=(err.write, out.write))
    taps.start()
    try:
        m = taps.mark()
        for i in range(200):  # alternate partial writes on both fds
            os.write(err.write, b"assert line %d " % i)
            os.write(out.write, b"stdout chunk %d" % i)
            os.write(err.write, b"failed.\n")
        taps.drain()
        text = taps.text_since(m)
    finally:
        taps.stop()
    err_part, _, out_part = text.partition("\nstdout chunk 0")
    assert out_part.startswith("stdout chunk 1")  # fd 1 follows fd 2, whole
    assert err_part.splitlines() == [f"assert line {i} failed." for i in range(200)]
    assert text.count("stdout chunk") == 200
    assert taps.fds == (err.write, out.write) and not taps.active
    assert err.close().count(b"failed.\n") == 200 and out.close().count(b"stdout chunk") == 200


def test_settle_waits_until_the_next_reader_has_taken_every_forwarded_byte() -> None:
    """ipykernel's reader publishes what it reads as the cell's output: what it reads after idle is lost."""
    pipe = PrivatePipe(slow=True)  # 4 KiB per 0.5 ms: 300 KB takes it tens of milliseconds
    payload = b"y" * 300_000
    taps = TapSet(fds=(pipe.write,))
    taps.start()
    try:
        m = taps.mark()
        os.write(pipe.write, payload)
        taps.settle(m, timeout=30)  # the cells' 1 s is a guess at a live reader; a loaded machine may need more
        assert fd_io.bytes_waiting(pipe.read) == 0
        assert len(pipe.data) >= len(payload) - 4096  # at most the chunk the reader holds right now
    finally:
        taps.stop()
    assert pipe.close() == payload


def test_settle_gives_up_on_a_destination_nobody_reads_and_never_waits_for_it_again() -> None:
    read, write = os.pipe()
    tap = TapSet(fds=(write,))
    tap.start()
    try:
        m = tap.mark()
        os.write(write, b"nobody reads this\n")
        assert tap.waited_fds == (write,)
        tap.settle(m, timeout=0.05)
        assert tap.waited_fds == ()
        assert fd_io.bytes_waiting(read) == len(b"nobody reads this\n")  # forwarded, kept, not dropped
    finally:
        tap.stop()
        os.close(write)
    assert os.read(read, 100) == b"nobody reads this\n"
    os.close(read)


def test_settle_after_a_quiet_cell_does_not_wait_for_bytes_written_before_it() -> None:
    read, write = os.pipe()
    taps = TapSet(fds=(write,))
    taps.start()
    try:
        os.write(write, b"an earlier cell's output, unread\n")
        taps.drain()
        taps.settle(taps.mark())
        assert taps.waited_fds == (write,)  # it did not time out waiting on the earlier bytes
    finally:
        taps.stop()
        os.close(write)
        os.close(read)


def test_settle_waits_only_for_what_was_written_before_it_not_for_a_writer_that_never_stops() -> None:
    """A child logging forever must not hold every cell for the whole timeout (and then lose the wait)."""
    pipe = PrivatePipe(slow=True, pause=0.005)  # reads about 0.8 MB/s
    taps = TapSet(fds=(pipe.write,))
    taps.start()
    stop = threading.Event()

    def write_forever() -> None:  # about 1.6 MB/s: the destination pipe never empties
        while not stop.is_set():
            os.write(pipe.write, b"w" * 8192)
            time.sleep(0.005)

    m = taps.mark()  # the cell starts, then a child it started logs on and on
    writer = threading.Thread(target=write_forever, daemon=True)
    writer.start()
    try:
        time.sleep(0.05)
        taps.settle(m, timeout=30)  # waiting for the writer instead would run into it (and give the pipe up)
        assert taps.waited_fds == (pipe.write,)  # the backlog was read; it did not run into the timeout
    finally:
        stop.set()
        writer.join(5)
        taps.stop()
    assert set(pipe.close()) == {ord("w")}
