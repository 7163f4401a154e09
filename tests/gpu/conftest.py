"""The GPU suite: real device-side asserts on a real CUDA device (``bash scripts/gpu-tests.sh``).

Every test here is skipped when, and only when, PyTorch sees no CUDA device; the reason is
always "no CUDA device". Nothing in this directory uses the test double.
"""

from __future__ import annotations

import pytest
import torch

NO_CUDA = "no CUDA device"


@pytest.fixture(autouse=True)
def _needs_a_cuda_device() -> None:
    if not torch.cuda.is_available():
        pytest.skip(NO_CUDA)
