"""Keep across Restart & replay for real: a Jupyter server, a kernel that fails on the GPU test double and restarts.

A cell marked ``# cudaassert: keep`` is restored in the new kernel instead of running (its print
does not appear again); a kept cell holding a non-CPU tensor replays, saying why. The tensor is on
the ``meta`` device: CPU-only torch has no CUDA tensor, and the refusal is the same
``device.type != "cpu"`` test (tests/gpu/test_keep_gpu.py uses real CUDA tensors).
"""

from __future__ import annotations

import pytest
from helpers.server_harness import WsKernel, text_of

pytestmark = pytest.mark.kernel

SETUP = [
    ("c1", "%load_ext cudaassert"),
    ("c2", "# cudaassert: keep\nimport pandas as pd\ndf = pd.DataFrame({'a': range(1000)})\nprint('c2 ran')"),
    (
        "c3",
        "import torch\nfrom fake_cuda_session import make_batch, cross_entropy\nlogits, labels = make_batch()\n"
        "print('c3 ran')",
    ),
    ("c4", "# cudaassert: keep\nfeatures = torch.ones(2, device='meta')\nprint('c4 ran')"),
]
FAILING = ("c5", "loss = cross_entropy(logits, labels)")


def test_a_kept_cell_is_restored_not_rerun_and_a_cell_holding_a_device_tensor_replays_with_the_reason(server):
    kid = server.start_kernel()
    k = WsKernel(server, kid)
    try:
        for cell_id, code in SETUP:
            reply, messages = k.execute(code, cell_id)
            assert reply["status"] == "ok", text_of(messages)
        assert k.execute(FAILING[1], FAILING[0])[0]["status"] == "error"
        pid, seen = k.pid(), k.restarts
        _, messages = k.execute("%cudaassert restart", "c6")
        out = text_of(messages)
        assert "  [2] kept: `df` " in out and "`pd` " in out
        assert "  [4] replayed: `features` holds a tensor on meta" in out
        k.wait_for_new_process(pid, seen)
        reply, messages = k.execute(FAILING[1], FAILING[0])
        out = text_of(messages)
        assert reply["ename"] == "ValidationIndexError", out
        assert "c2 ran" not in out and "c3 ran" in out and "c4 ran" in out
        assert "[cudaassert] Kept across the restart:" in out
        assert "  [2] kept: `df` " in out and ", loaded in " in out
        assert "  [4] replayed: `features` holds a tensor on meta" in out
        _, messages = k.execute("print(len(df), int(df.a.sum()), features.device)")
        assert text_of(messages).split() == ["1000", "499500", "meta"]
        _, messages = k.execute("%cudaassert setup")  # the restored cell counts as run: a next restart keeps it
        assert "  [2] import pandas as pd  (" in text_of(messages) and ")  keep\n  [3] " in text_of(messages)
        assert not (server.runtime / "cudaassert" / f"keep-{kid}").exists()  # deleted after the restore
    finally:
        k.close()
        server.rest("DELETE", f"api/kernels/{kid}")


def test_restart_with_no_keep_replays_every_cell(server):
    kid = server.start_kernel()
    k = WsKernel(server, kid)
    try:
        for cell_id, code in SETUP[:3]:
            assert k.execute(code, cell_id)[0]["status"] == "ok"
        assert k.execute(FAILING[1], FAILING[0])[0]["status"] == "error"
        pid, seen = k.pid(), k.restarts
        _, messages = k.execute("%cudaassert restart --no-keep", "c6")
        assert "kept" not in text_of(messages)
        k.wait_for_new_process(pid, seen)
        _, messages = k.execute(FAILING[1], FAILING[0])
        out = text_of(messages)
        assert "c2 ran" in out and "Kept across the restart" not in out
        assert not (server.runtime / "cudaassert" / f"keep-{kid}").exists()
    finally:
        k.close()
        server.rest("DELETE", f"api/kernels/{kid}")
