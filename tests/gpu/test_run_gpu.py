"""The script runner with a real device-side assert: one process, a 2-rank torchrun job, and --rerun-on-failure.

Each case is its own process (or job): a device-side assert kills the process's CUDA context. On the dry run
(``CUDAASSERT_GPU_TEST_DEVICE=cpu``) the scripts run on the CPU and die of the CPU twin: the same cause, the
context alive, and no assertion line to fold.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers.gpu_device import ON_GPU

pytestmark = pytest.mark.gpu
DIED = "GPU context dead" if ON_GPU else "CPU error"

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
TORCHRUN = (PY, "-m", "torch.distributed.run")  # torchrun, whichever environment PY is in
BAD_LABEL = """
import os
import torch, torch.nn.functional as F
device = os.environ.get("CUDAASSERT_GPU_TEST_DEVICE", "cuda")
rank = int(os.environ.get("RANK", "1"))
model = torch.nn.Linear(8, 195).to(device)
labels = torch.tensor([3, 195 if rank == 1 else 4, 7]).to(device)
loss = F.cross_entropy(model(torch.randn(3, 8).to(device)), labels)
print(loss.item())
"""
DDP = (
    """
import os
import torch, torch.distributed as dist
dist.init_process_group("gloo")
"""
    + BAD_LABEL
    + """
t = torch.ones(1)
dist.all_reduce(t)
"""
)


def env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k not in ("CUDA_LAUNCH_BLOCKING", "CUDAASSERT_VALIDATORS")}
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT), e.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return e


def run(tmp_path: Path, text: str, *cmd: str) -> subprocess.CompletedProcess:
    (tmp_path / "train.py").write_text(textwrap.dedent(text))
    return subprocess.run([*cmd, "train.py"], cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=300)


def test_a_real_bad_label_gets_the_report_with_the_kernels_folded_line(tmp_path):
    result = run(tmp_path, BAD_LABEL, PY, "-m", "cudaassert_ipy")
    err = result.stderr
    assert result.returncode == 1
    assert f"[cudaassert] {DIED} · class label out of range" in err
    traceback = err.index("Traceback (most recent call last):")
    if ON_GPU:
        assert "device-side assert triggered" in err
        assert "nll_loss_forward_reduce_cuda_kernel_2d: `t >= 0 && t < n_classes` failed" in err
        assert traceback < err.index("[cudaassert] The GPU context of this process")
    else:
        assert "IndexError: Target 195 is out of bounds." in err
        assert traceback < err.index("[cudaassert] This error was raised on the CPU")


def test_rerun_on_failure_stops_the_real_bad_label_before_launch(tmp_path):
    result = run(tmp_path, BAD_LABEL, PY, "-m", "cudaassert_ipy", "--rerun-on-failure")
    err = result.stderr
    assert f"[cudaassert] First run: {DIED} · class label out of range" in err
    assert (
        "[cudaassert] Rerun with CUDA_LAUNCH_BLOCKING=1 and validators: GPU alive · class label out of range "
        "in cross_entropy" in err
    )
    assert "  first: 195 at [1]" in err


def test_a_real_assert_on_rank_1_reaches_torchruns_root_cause(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = run(
        tmp_path,
        DDP,
        *TORCHRUN,
        "--nproc-per-node",
        "2",
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(port),
        "-m",
        "cudaassert_ipy",
    )
    summary = result.stderr[result.stderr.index("Root Cause (first observed failure):") :]
    assert result.returncode == 1
    assert "[cudaassert] rank 1 (local_rank 1, host " in summary
    assert f"[cudaassert] {DIED} · class label out of range" in summary
    assert ("`t >= 0 && t < n_classes` failed" in summary) == ON_GPU
