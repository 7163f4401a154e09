"""Ranks that die without Python (the NCCL watchdog's SIGABRT, a SIGKILL from outside) are explained by the runner
that launched the job: real torchrun (gloo, 127.0.0.1, 2 ranks) under ``python -m cudaassert_ipy``.

Rank 1 iterates a real DataLoader; after a few batches it dies as a GPU rank does when its watchdog finds the
device-side assert (the double writes the kernel's and the watchdog's lines, then aborts), or is SIGKILLed.
No Python runs in it after that: the summary can only come from what its bookmark wrote to disk as it went.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from helpers import kernel_env
from test_run_torchrun import free_port

TRAIN = """
import os, signal
import torch, torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset
dist.init_process_group("gloo")
rank = dist.get_rank()
loader = DataLoader(TensorDataset(torch.arange(64).float()), batch_size=4, shuffle=True,
                    generator=torch.Generator().manual_seed(rank))
for i, (x,) in enumerate(loader):
    if rank == 1 and i == 5:
        if os.environ["DEATH"] == "abort":
            from gpu_double_watchdog import die_like_nccl_watchdog
            die_like_nccl_watchdog(rank)
        os.kill(os.getpid(), signal.SIGKILL)
    t = x.sum()
    dist.all_reduce(t)
print("rank", rank, "done", flush=True)
"""


def job(tmp_path: Path, death: str) -> tuple[subprocess.CompletedProcess, dict]:
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN))
    report = tmp_path / "report.json"
    cmd = [
        sys.executable,
        "-m",
        "cudaassert_ipy",
        "--report-json",
        str(report),
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "2",
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(free_port()),
        "train.py",
    ]
    result = subprocess.run(cmd, cwd=tmp_path, env=kernel_env(DEATH=death), capture_output=True, text=True, timeout=240)
    return result, json.loads(report.read_text())


def expected_batches() -> list[str]:
    """Rank 1's batches 5, 4, 3: the loader's own shuffle, replayed here."""
    import torch
    from torch.utils.data import DataLoader

    loader = DataLoader(range(64), batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(1))
    batches = [b.tolist() for b in loader][:6]
    return [f"batch {k} of epoch 0: indices {batches[k]}" for k in (5, 4, 3)]


def test_a_rank_aborted_by_its_nccl_watchdog_is_named_with_its_signal_cause_and_last_batches(tmp_path):
    result, report = job(tmp_path, "abort")
    err = result.stderr
    assert result.returncode == 1, err[-3000:]
    assert "Signal 6 (SIGABRT) received by PID" in err, "torchrun saw the abort"
    line = next(x for x in err.splitlines() if x.startswith("[cudaassert] rank 1 "))
    assert line.startswith("[cudaassert] rank 1 (local_rank 1, pid ")
    # the watchdog's words reach the runner even when abort() came before the rank's own fd tap forwarded them: its
    # rescue helper (capture/rescue.py) forwards what the dead rank's pipe still held
    watchdog = (
        ") died by SIGABRT (exit code -6) without a Python traceback: its NCCL watchdog thread found the "
        'sticky CUDA error and aborted the process, so no excepthook ran (stderr: "[PG 1 Rank 1] Process '
        'group watchdog thread terminated with exception: CUDA error: device-side assert triggered").'
    )
    assert watchdog in line, line
    assert "terminate called after throwing an instance of 'c10::DistBackendError'" in err, "the terminal shows it"
    assert "Assertion `t >= 0 && t < n_classes` failed." in err, "and the kernel's lines before it"
    last = err.split(line, 1)[1].splitlines()[1]
    assert last == (
        "[cudaassert]   its last batches, latest first (written by its DataLoader bookmark as it went): "
        + "; ".join(expected_batches())
    )
    # rank 0, waiting in all_reduce, is ended by torchrun's SIGTERM: by the signal itself (then one line says so)
    # or through Python when gloo notices the closed peer first (then its own exit says nothing); never blamed
    rank0 = [x for x in err.splitlines() if x.startswith("[cudaassert] rank 0 ")]
    assert all(x.endswith(") was stopped by the launcher (SIGTERM (exit code -15)) after rank 1 died.") for x in rank0)
    assert line in report["report"] and report["exit_code"] == 1
    assert not list(Path(tmp_path).glob("cudaassert-ranks-*")), "the rings are removed with the run"


def test_a_rank_killed_by_sigkill_is_named_with_its_signal_and_last_batches(tmp_path):
    result, _ = job(tmp_path, "kill")
    err = result.stderr
    assert result.returncode == 1, err[-3000:]
    line = next(x for x in err.splitlines() if x.startswith("[cudaassert] rank 1 "))
    assert (
        ") died by SIGKILL (exit code -9) without a Python traceback: it was killed from outside (Lightning's DDP "
        "observer kills every rank within seconds of one failing; the kernel's OOM killer also sends SIGKILL), so "
        "no excepthook or atexit ran." in line
    )
    last = err.split(line, 1)[1].splitlines()[1]
    assert last.endswith("; ".join(expected_batches()))
