"""The rank ring (data/ring.py) and the runner's summary of dead ranks (run/ranks.py), on real processes.

A child process writes its ring and dies by a real signal (abort(), SIGKILL) or leaves through Python; the
summary reads what it left, with torch's own ChildFailedError/ProcessFailure as torchrun's agent raises them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from gpu_double_watchdog import WATCHDOG
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

from cudaassert_ipy.data import ring
from cudaassert_ipy.run import ranks

ROOT = Path(__file__).resolve().parents[1]


def rank_process(
    folder: Path, rank: int, end: str, batches: int = 3, ahead: tuple[int, int] = (0, 0)
) -> tuple[int, int]:
    """A real process that writes ``batches`` records to its ring, then ends by ``end``; returns its pid and exit
    code."""
    code = textwrap.dedent(f"""
        import os, signal
        from cudaassert_ipy.data.ring import Ring
        r = Ring({str(folder)!r}, {rank}, {rank})
        for b in range({batches}):
            r.write(0, b, [4 * b, 4 * b + 1, 4 * b + 2, 4 * b + 3], *{ahead!r})
        if {end!r} == "abort":
            os.abort()
        if {end!r} == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if {end!r} == "term":
            os.kill(os.getpid(), signal.SIGTERM)
        r.close()
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(ROOT)})
    return proc.pid, proc.wait(timeout=60)


def failed(*runs: tuple[int, int, int]) -> ChildFailedError:
    """What torchrun's agent raises: rank -> ProcessFailure (no error file: the rank wrote none)."""
    return ChildFailedError("train.py", {rank: ProcessFailure(rank, pid, code, "<N/A>") for rank, pid, code in runs})


def test_the_ring_keeps_the_last_8_batches_latest_first_and_says_whether_python_exited(tmp_path):
    r = ring.Ring(str(tmp_path), 3, 1)
    for b in range(20):
        r.write(1, b, [b, b + 100])
    data = ring.read(r.path)
    assert data is not None and (data.rank, data.local_rank, data.pid, data.exited) == (3, 1, os.getpid(), False)
    assert data.batches == tuple((1, b, f"[{b}, {b + 100}]") for b in range(19, 11, -1))
    r.close()
    assert ring.read(r.path).exited


def test_indices_that_are_not_ints_are_kept_as_text_and_too_many_are_cut_with_a_mark(tmp_path):
    r = ring.Ring(str(tmp_path), 0, 0)
    r.write(0, 0, ["a.jpg", "b.jpg"])
    r.write(0, 1, list(range(1000)))
    r.write(0, 2, None)
    batches = ring.read(r.path).batches
    assert batches[2] == (0, 0, "['a.jpg', 'b.jpg']")
    assert batches[1][2].startswith("[0, 1, 2, ") and batches[1][2].endswith(", 123, ...]")
    assert batches[0] == (0, 2, "None")
    (tmp_path / "other.ring").write_bytes(b"not a ring at all" * 10)
    assert ring.read(str(tmp_path / "other.ring")) is None


def test_a_rank_aborted_with_the_watchdog_line_on_stderr_is_explained_from_it(tmp_path):
    pid, code = rank_process(tmp_path, 1, "abort")
    assert code == -signal.SIGABRT
    lines = ranks.summary(str(tmp_path), failed((1, pid, code)), "noise\n" + WATCHDOG.format(rank=1))
    assert lines == [
        f"[cudaassert] rank 1 (local_rank 1, pid {pid}) died by SIGABRT (exit code -6) without a Python traceback: "
        "its NCCL watchdog thread found the sticky CUDA error and aborted the process, so no excepthook ran (stderr: "
        '"[PG 1 Rank 1] Process group watchdog thread terminated with exception: CUDA error: device-side assert '
        "triggered\"). The kernel's assertion lines above, if any, name the failing op.",
        "[cudaassert]   its last batches, latest first (written by its DataLoader bookmark as it went): batch 2 of "
        "epoch 0: indices [8, 9, 10, 11]; batch 1 of epoch 0: indices [4, 5, 6, 7]; batch 0 of epoch 0: indices "
        "[0, 1, 2, 3]",
    ]


def test_without_the_watchdog_line_an_abort_a_kill_and_the_launchers_sigterm_are_told_apart(tmp_path):
    aborted, killed, stopped = (
        rank_process(tmp_path, rank, end) for rank, end in ((1, "abort"), (2, "kill"), (0, "term"))
    )
    exited = rank_process(tmp_path, 3, "exit")
    assert exited[1] == 0
    lines = ranks.summary(str(tmp_path), failed((1, *aborted), (2, *killed), (0, *stopped)), "")
    assert lines[0] == (
        f"[cudaassert] rank 0 (local_rank 0, pid {stopped[0]}) was stopped by the launcher (SIGTERM "
        "(exit code -15)) after rank 1 died."
    )
    assert lines[1].endswith(
        ") died by SIGABRT (exit code -6) without a Python traceback: abort() ended it (an "
        "uncaught C++ exception, as the NCCL watchdog raises for a CUDA error), so no excepthook "
        "ran."
    )
    assert lines[3].startswith(f"[cudaassert] rank 2 (local_rank 2, pid {killed[0]}) died by SIGKILL (exit code -9)")
    assert len(lines) == 5, "rank 3 left through Python: its own report speaks for it"


def test_a_rank_whose_framework_fetched_ahead_is_told_with_the_batch_it_was_processing(tmp_path):
    one = rank_process(tmp_path, 1, "kill", batches=6, ahead=(1, 1))
    some = rank_process(tmp_path, 2, "kill", batches=6, ahead=(1, 2))
    lines = ranks.summary(str(tmp_path), failed((1, *one), (2, *some)), "")
    assert lines[2] == (
        "[cudaassert]   its loader had fetched 1 batch beyond the one being processed: that one was batch 4 of epoch 0"
    )
    assert lines[5] == (
        "[cudaassert]   its loader had fetched 1 to 2 batches beyond the one being processed "
        "(gradient accumulation): that one was one of batches 3 to 4 of epoch 0"
    )


def test_a_runner_inside_a_rank_leaves_the_folder_to_the_runner_above(tmp_path):
    assert ranks.prepare({"RANK": "1"}) is None
    assert ranks.prepare({ring.ENV: str(tmp_path)}) is None
    env: dict[str, str] = {}
    folder = ranks.prepare(env)
    assert folder is not None and env[ring.ENV] == folder and os.path.isdir(folder)
    ranks.cleanup(folder, env)
    assert not os.path.exists(folder) and ring.ENV not in env
