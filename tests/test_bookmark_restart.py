"""Reproduce in one step after Restart & replay, through a real Jupyter server on 127.0.0.1.

The training cell fails on the GPU double after a shuffled loop that moved every batch off the
CPU; the restart plan carries the failing batch's dataset indices; in the restarted kernel the
replay banner names the line, and ``failing_batch(train_loader)`` yields exactly that batch, so one
step reproduces the failure at once.
"""

from __future__ import annotations

import re

import pytest
from helpers.server_harness import WsKernel, text_of

pytestmark = pytest.mark.kernel

SETUP = [
    ("c1", "%load_ext cudaassert"),
    (
        "c2",
        "import torch, torch.nn as nn, torch.nn.functional as F\n"
        "from torch.utils.data import DataLoader, Dataset\nfrom gpu_double import fail_like_gpu",
    ),
    (
        "c3",
        "class Birds(Dataset):\n"
        "    def __len__(self):\n        return 500\n"
        "    def __getitem__(self, i):\n"
        "        return torch.full((8,), float(i)), torch.tensor(195 if i == 321 else i % 195)\n"
        "train_ds = Birds()\ntrain_loader = DataLoader(train_ds, batch_size=50, shuffle=True)\n"
        "model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 195))",
    ),
]
TRAIN = (
    "c4",
    "for images, targets in train_loader:\n"
    "    bad_here = bool((targets >= 195).any())\n"
    "    images, targets = images.to('meta'), targets.to('meta')\n"
    "    if bad_here:\n"
    "        fail_like_gpu('nll_loss_target_out_of_range')\n",
)
STEP = (
    "import cudaassert_ipy\nfb = cudaassert_ipy.failing_batch(train_loader)\n"
    "print('samples', sorted(int(v) for x, _ in fb for v in x[:, 0]))\n"
    "for images, targets in fb:\n    F.cross_entropy(model(images), targets)\n"
)


def test_failing_batch_after_restart_and_replay_reproduces_the_failure_in_one_step(server):
    kid = server.start_kernel()
    k = WsKernel(server, kid)
    try:
        for cell_id, code in SETUP:
            reply, messages = k.execute(code, cell_id)
            assert reply["status"] == "ok", text_of(messages)
        reply, messages = k.execute(*TRAIN[::-1])
        out = text_of(messages)
        assert reply["ename"] == "AcceleratorError"
        m = re.search(r"from `train_loader`: `train_ds\[321\]` has class label 195 \(position (\d+) of `targets`", out)
        assert m, out[-3000:]
        assert (
            "After Restart & replay, run one training step on `cudaassert_ipy.failing_batch(train_loader)`, a "
            "DataLoader over exactly these 50 samples: the validators name the bad value in seconds."
        ) in out
        _, messages = k.execute(
            "import cudaassert_ipy\nprint('before', sorted(cudaassert_ipy.last_batches()[0].indices))", "c5"
        )
        before = text_of(messages).split("before", 1)[1].strip()
        pid, seen = k.pid(), k.restarts
        _, messages = k.execute("%cudaassert restart", "c6")
        k.wait_for_new_process(pid, seen)
        reply, messages = k.execute(STEP, "c7")
        out = text_of(messages)
        assert (
            "the failing batch: run one training step on `cudaassert_ipy.failing_batch(train_loader)`, a "
            "DataLoader over exactly its 50 samples, to name the bad value in seconds."
        ) in out
        assert f"samples {before}" in out  # exactly the failing batch's samples, from the resume plan
        assert reply["status"] == "error", out
        assert "`train_ds[321]` has class label 195" in out  # named again, now with the context alive
    finally:
        k.close()
        server.rest("DELETE", f"api/kernels/{kid}")
