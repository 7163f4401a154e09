"""Lightning's own DDP launcher (``strategy="ddp"`` without torchrun) under ``python -m cudaassert_ipy``, for real.

Rank 0 is the runner's own process; Lightning re-executes the script for rank 1 (reached by our start-up hook).
After a few batches rank 1 dies as a GPU rank does when its NCCL watchdog finds the device-side assert (the double
writes the kernel's and the watchdog's lines, then aborts). Rank 0 waits in its step as it would in an NCCL
collective for a peer that is gone (NCCL does not notice a dead peer; gloo would, so the wait is the script's).
Within seconds Lightning's ``_ChildProcessObserver`` SIGKILLs every process, the runner included: no Python runs
in it after that. The summary must come anyway, from the runner's watcher (capture/rescue.py), naming rank 1, its
signal, the watchdog's words and its last batches' sample indices, read from what the ranks left on disk.
Runs in the frameworks environment:
``.venv-fw/bin/python -m pytest -m frameworks tests/test_run_ranks_lightning.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from helpers import kernel_env

pytestmark = pytest.mark.frameworks

TRAIN = """
import time
import torch, torch.nn as nn
import lightning as L
from lightning.pytorch.strategies import DDPStrategy
from torch.utils.data import DataLoader, TensorDataset


class Lit(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(1, 1)

    def training_step(self, batch, i):
        if i == 5:
            if self.global_rank == 1:  # its kernel asserted: the NCCL watchdog aborts the process
                from gpu_double_watchdog import die_like_nccl_watchdog
                die_like_nccl_watchdog(1)
            time.sleep(120)  # rank 0 waits for its peer as in an NCCL collective
        (x,) = batch
        return self.layer(x.unsqueeze(1)).sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


if __name__ == "__main__":
    loader = DataLoader(TensorDataset(torch.arange(64).float()), batch_size=4, shuffle=True)
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy=DDPStrategy(process_group_backend="gloo"),
                        max_epochs=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False)
    trainer.fit(Lit(), loader)
"""


def expected_batches(rank: int) -> str:
    """The rank's batches 5, 4, 3: Lightning's DistributedSampler (shuffle, seed 0), replayed here."""
    from torch.utils.data import DistributedSampler

    order = list(DistributedSampler(range(64), num_replicas=2, rank=rank, shuffle=True, seed=0))
    return "; ".join(f"batch {k} of epoch 0: indices {order[4 * k : 4 * k + 4]}" for k in (5, 4, 3))


def test_a_lightning_rank_aborted_by_its_watchdog_is_explained_although_the_runner_was_sigkilled(tmp_path):
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN))
    report = tmp_path / "report.json"
    folders = tmp_path / "tmp"
    folders.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cudaassert_ipy", "--report-json", str(report), "train.py"],
        cwd=tmp_path,
        env=kernel_env(TMPDIR=str(folders)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _, err = proc.communicate(timeout=300)  # EOF once the watcher, which holds the runner's stderr, is done
    assert proc.returncode == -9, err[-3000:]  # Lightning's observer killed the runner (rank 0)
    runner = proc.pid
    lines = err.splitlines()
    ours = [x for x in lines if x.startswith("[cudaassert]")]
    assert ours == [
        f"[cudaassert] the runner (pid {runner}) was itself ended by SIGKILL (exit code -9) before it could print its "
        "summary (Lightning's DDP observer kills rank 0, the runner, with the rest); its watcher reports what the "
        "ranks left on disk:",
        f"[cudaassert] rank 0 (local_rank 0, pid {runner}) was stopped by the launcher (SIGKILL (exit code -9)) after "
        "rank 1 died.",
        ours[2],
        "[cudaassert]   its last batches, latest first (written by its DataLoader bookmark as it went): "
        + expected_batches(1),
    ], err[-3000:]
    assert ours[2].startswith("[cudaassert] rank 1 (local_rank 1, pid ")
    assert ours[2].endswith(
        ") died by SIGABRT (exit code -6) without a Python traceback: its NCCL watchdog thread found the sticky CUDA "
        'error and aborted the process, so no excepthook ran (stderr: "[PG 1 Rank 1] Process group watchdog thread '
        "terminated with exception: CUDA error: device-side assert triggered\"). The kernel's assertion lines above, "
        "if any, name the failing op."
    ), ours[2]
    # the dead rank's own output reached the terminal whole, before the summary
    kernel = [x for x in lines if x.endswith("Assertion `t >= 0 && t < n_classes` failed.")]
    assert len(kernel) == 4 and lines.index(kernel[-1]) < lines.index(ours[0])
    assert "terminate called after throwing an instance of 'c10::DistBackendError'" in lines
    data = json.loads(report.read_text())
    assert data["exit_code"] == -9 and data["failed"] and data["report"] == "\n".join(ours)
    assert not list(folders.glob("cudaassert-ranks-*")), "the watcher removed the runner's ring folder"
