"""NVML on a real GPU: the state reads, and it still reads after a real device assert killed the context."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from helpers.gpu_device import gpu_only

from cudaassert_ipy.diagnose.gpu_state import SOFTWARE_NO_ECC, describe, snapshot

pytestmark = [
    pytest.mark.gpu,
    gpu_only("NVML reads a real GPU's state"),
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
]

AFTER_ASSERT = r"""
import torch, torch.nn.functional as F
from cudaassert_ipy.diagnose.gpu_state import describe, snapshot
x = torch.randn(4, 3, device="cuda")
try:
    F.cross_entropy(x, torch.tensor([0, 1, 3, 2], device="cuda"))
    torch.cuda.synchronize()
except Exception as e:
    print("RAISED", type(e).__name__, str(e).splitlines()[0])
s = snapshot(0)
print("REASON", s.unavailable_reason)
print("HOLDS", s.process_bytes)
print("LINE", describe(snapshot(0)))
"""


def test_the_state_of_a_live_gpu_names_the_device_and_its_memory():
    name = torch.cuda.get_device_name(0)
    state = snapshot(0)
    assert state.unavailable_reason is None, state.unavailable_reason
    assert state.name == name
    assert state.total_bytes and state.total_bytes > 0
    assert state.other_processes is not None
    line = describe(snapshot(0))
    assert line.startswith(f"{name} (GPU 0); ") and "\n" not in line
    assert state.reading.startswith(("software fault", "most likely a software fault", "possible hardware fault"))
    if (
        state.ecc_volatile_uncorrected is None
        and state.retired_pages is None
        and state.remapped_rows_uncorrectable is None
    ):
        assert state.reading == SOFTWARE_NO_ECC


def test_nvml_still_answers_after_a_real_device_assert_killed_the_context():
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    out = subprocess.run([sys.executable, "-c", AFTER_ASSERT], capture_output=True, text=True, timeout=300, env=env)
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
    assert "device-side assert triggered" in lines["RAISED"], out.stdout + out.stderr
    assert "Assertion `t >= 0 && t < n_classes` failed." in out.stderr
    assert lines["REASON"] == "None"
    assert lines["LINE"].startswith(f"{torch.cuda.get_device_name(0)} (GPU 0); ")
    if lines["HOLDS"] != "None":  # NVML lists host PIDs: inside a container our PID may not match
        assert "this process holds" in lines["LINE"]
    assert "; reading: " in lines["LINE"]
