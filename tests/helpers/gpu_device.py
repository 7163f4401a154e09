"""Which device the GPU suite (tests/gpu) runs on: ``cuda``, or ``cpu`` for CI's dry run with the CPU twins."""

from __future__ import annotations

import os

import pytest

DEVICE_VAR = "CUDAASSERT_GPU_TEST_DEVICE"
DEVICE = os.environ.get(DEVICE_VAR, "cuda")
ON_GPU = DEVICE != "cpu"


def gpu_only(why: str) -> pytest.MarkDecorator:
    """For a test that has no CPU twin: the dry run skips it, and says why."""
    return pytest.mark.skipif(not ON_GPU, reason=f"needs a CUDA device (dry run on the CPU): {why}")
