"""The whole path on a real GPU, in a real kernel under a real Jupyter server.

A cell dies of a real device-side assert → the panel (widget view + full text report) names the
cause and the folded assertion line → a later CUDA cell gets one line pointing back →
``%cudaassert restart`` → the server's auto-restarter brings the same kernel id back → re-running
the failing cell replays the setup, and the validator stops ``cross_entropy`` before launch →
the GPU works in that kernel.

A real jupyter_server (``tests/helpers/server_harness.py``, as the restart tests use) and not a bare
jupyter_client ``KernelManager``: the restart under test is the server's auto-restart after the
kernel's clean ``do_shutdown(True)``, which keeps the kernel id and connection file. A bare
``KernelManager`` restarts nothing by itself (its restarter needs a running IOLoop), so it would
test the "armed, restart it yourself" path instead.

On the dry run (``CUDAASSERT_GPU_TEST_DEVICE=cpu``) the same cells run on the CPU: step 1 is the CPU twin
(``IndexError: Target 195 is out of bounds.``, the same cause and fix, a live context, so no dead-context
line, no folded assertion line and no restart button), step 2 has nothing to show, and steps 3-5 are the same.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.gpu_device import DEVICE, ON_GPU

pytestmark = [pytest.mark.gpu, pytest.mark.kernel]

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
DEAD = (
    "[cudaassert] The GPU context of this kernel is dead. Nothing on the GPU can be used again in this process; "
    "restart the kernel."
)
ALIVE = "[cudaassert] A validator caught this input before any device-side assert: the GPU is still alive."

SETUP = f"""
import os
import torch
import torch.nn as nn
import torch.nn.functional as F
device = {DEVICE!r}

class Cars:
    classes = [f"car_{{i}}" for i in range(196)]

train_ds = Cars()
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 195)).to(device)
features = torch.randn(64, 16)
labels = torch.randint(0, 195, (64,))
labels[[5, 40]] = 195
"""
FAILING = """
loss = F.cross_entropy(model(features.to(device)), labels.to(device))
print("loss", loss.item())
"""


def _texts(messages: list[dict]) -> str:
    from helpers.server_harness import text_of

    return text_of(messages)


def test_assert_panel_restart_replay_then_the_validator_stops_the_same_cell_and_the_gpu_works(tmp_path: Path):
    from helpers.server_harness import WsKernel, jupyter_server

    with jupyter_server(tmp_path / "home") as server:
        kid = server.start_kernel()
        k = WsKernel(server, kid)
        try:
            reply, _ = k.execute("%load_ext cudaassert", cell_id="load", timeout=120)
            assert reply["status"] == "ok", reply
            reply, msgs = k.execute(SETUP, cell_id="setup", timeout=300)
            assert reply["status"] == "ok", _texts(msgs)
            old_pid = k.pid()

            # 1. the real device-side assert (the CPU twin on the dry run), and the panel under it
            reply, msgs = k.execute(FAILING, cell_id="train", timeout=300)
            text = _texts(msgs)
            assert reply["status"] == "error", text
            panel = [m for m in msgs if m["type"] == "display_data" and WIDGET_VIEW in m["content"]["data"]]
            assert len(panel) == 1, text
            report = panel[0]["content"]["data"]["text/plain"]
            assert "class label out of range" in report
            assert "set out_features=196" in report, report
            buttons = [m["content"]["data"]["state"].get("description") for m in msgs if m["type"] == "comm_open"]
            if ON_GPU:
                assert "device-side assert triggered" in reply["evalue"], reply
                assert DEAD in report
                assert "`t >= 0 && t < n_classes` failed in" in report  # the folded assertion line
                assert "Restart & replay setup" in buttons, buttons
            else:
                assert (reply["ename"], reply["evalue"]) == ("IndexError", "Target 195 is out of bounds."), reply
                assert DEAD not in report and "Restart & replay setup" not in buttons, (report, buttons)

            # 2. the dead context: a later CUDA cell gets one line pointing back (a live one on the dry run)
            reply, msgs = k.execute("torch.ones(1, device=device).sum().item()", cell_id="later", timeout=120)
            assert (reply["status"] == "error") == ON_GPU, _texts(msgs)
            assert ("This failure is a consequence of the dead GPU context" in _texts(msgs)) == ON_GPU
            reply, msgs = k.execute("%cudaassert status", cell_id="status", timeout=60)
            assert ("GPU context: DEAD since cell" in _texts(msgs)) == ON_GPU, _texts(msgs)

            # 3. restart: the same kernel id comes back, in a new process
            reply, msgs = k.execute("%cudaassert restart", cell_id="restart", timeout=60)
            assert "Restarting the kernel now" in _texts(msgs), _texts(msgs)
            k.wait_for_new_process(old_pid, timeout=120)
            assert server.rest("GET", f"api/kernels/{kid}")["id"] == kid

            # 4. the same cell again: the setup replays, then the validator stops cross_entropy before launch
            reply, msgs = k.execute(FAILING, cell_id="train", timeout=600)
            text = _texts(msgs)
            assert reply["status"] == "error", text
            assert reply["ename"] == "ValidationIndexError", reply
            assert "Replayed" in text and "setup cell(s)" in text, text
            assert ALIVE in text
            assert "cross_entropy: target has 2 bad values; valid: 0..194" in text, text

            # 5. the GPU (the CPU on the dry run) still works, in blocking mode
            reply, msgs = k.execute(
                "(os.environ.get('CUDA_LAUNCH_BLOCKING'), torch.ones(1, device=device).sum().item() == 1)",
                cell_id="alive",
                timeout=120,
            )
            assert reply["status"] == "ok", _texts(msgs)
            assert "('1', True)" in _texts(msgs)
        finally:
            k.close()
