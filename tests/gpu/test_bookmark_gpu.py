"""The DataLoader bookmark on a real GPU: a real label assert after a shuffled loop with 2 workers.

The loop moves each batch to the GPU (no CPU copy of the labels is left) and dies of the real
device-side assert, reported late at ``loss.item()``; the report must name the bad dataset index
from the recorded batch alone. Then, after Restart & replay, one step on ``failing_batch`` is
stopped by the validator, naming the same sample, and the GPU stays alive.

On the dry run (``CUDAASSERT_GPU_TEST_DEVICE=cpu``) the loop runs on the CPU, dies of the CPU twin, and
the report and the step after the restart must say the same.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers.gpu_device import DEVICE, ON_GPU

pytestmark = [pytest.mark.gpu, pytest.mark.kernel]

SETUP = [
    ("c1", "%load_ext cudaassert"),
    (
        "c2",
        f"""
import torch, torch.nn as nn, torch.nn.functional as F
device = {DEVICE!r}
from torch.utils.data import DataLoader, Dataset
class Cars(Dataset):
    classes = [f"car_{{i}}" for i in range(196)]
    def __len__(self):
        return 2000
    def __getitem__(self, i):
        return torch.randn(16), torch.tensor(195 if i == 1234 else i % 195)
train_ds = Cars()
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True, num_workers=2, pin_memory={ON_GPU})
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 195)).to(device)
""",
    ),
]
TRAIN = (
    "c3",
    """
for images, targets in train_loader:
    images, targets = images.to(device, non_blocking=True), targets.to(device, non_blocking=True)
    loss = F.cross_entropy(model(images), targets)
    print(round(loss.item(), 3), end=" ")
""",
)
STEP = (
    "c5",
    """
import cudaassert_ipy
for images, targets in cudaassert_ipy.failing_batch(train_loader):
    loss = F.cross_entropy(model(images.to(device)), targets.to(device))
""",
)


def test_a_real_device_assert_names_the_bad_dataset_index_and_failing_batch_reproduces_it(tmp_path: Path):
    from helpers.server_harness import WsKernel, jupyter_server, text_of

    with jupyter_server(tmp_path / "home") as server:
        kid = server.start_kernel()
        k = WsKernel(server, kid)
        try:
            for cell_id, code in SETUP:
                reply, messages = k.execute(code, cell_id)
                assert reply["status"] == "ok", text_of(messages)
            reply, messages = k.execute(TRAIN[1], TRAIN[0])
            out = text_of(messages)
            assert reply["status"] == "error", out
            assert re.search(
                r"Bad samples:\n  batch \d+ of epoch 0 from `train_loader`: `train_ds\[1234\]` has class "
                r"label 195 \(position \d+ of `targets`; valid: 0\.\.194 or ignore_index=-100\)",
                out,
            ), out
            pid, seen = k.pid(), k.restarts
            k.execute("%cudaassert restart", "c4")
            k.wait_for_new_process(pid, seen)
            reply, messages = k.execute(STEP[1], STEP[0])
            out = text_of(messages)
            assert reply["ename"] == "ValidationIndexError", out
            assert "GPU alive" in out and "`train_ds[1234]` has class label 195" in out
            reply, messages = k.execute("print(torch.ones(2, device=device).sum().item())", "c6")
            assert text_of(messages).strip().endswith("2.0")
        finally:
            k.close()
            server.rest("DELETE", f"api/kernels/{kid}")
