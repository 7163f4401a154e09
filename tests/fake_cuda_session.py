"""A notebook's training step with a bad label, computed for real on the CPU, failing as a GPU would.

The restart tests need one cell that behaves like ``loss = F.cross_entropy(logits, labels)`` on a
GPU, with the same source before and after the restart:

- Validators on (after the replay): ``F.cross_entropy`` runs for real and the validator raises
  ``ValidationIndexError`` before anything launches, exactly as it would on a GPU.
- Validators off, ``CUDAASSERT_TEST_PRETEND_GPU=1`` (set by the test for its kernels): the real CPU
  call raises PyTorch's CPU twin (``IndexError: Target 195 is out of bounds.``); a GPU would have
  launched the kernel and died of a device-side assert instead. So the CPU error is swallowed and
  ``gpu_double.fail_like_gpu`` does what the GPU does: real assertion lines on fd 2 and the exact
  ``AcceleratorError``. That is the only stand-in, and it is chosen by the input, not by the cell.
- Validators off and no pretend variable: the plain CPU error, as on a CPU-only machine.
"""

from __future__ import annotations

import os
from typing import Any

PRETEND_GPU = "CUDAASSERT_TEST_PRETEND_GPU"


def make_batch(n_classes: int = 195, batch: int = 8, bad_label: int = 195, seed: int = 0) -> tuple[Any, Any]:
    """Logits from a model with ``n_classes`` outputs and labels that reach ``bad_label`` (one class too many)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, n_classes, generator=g)
    labels = torch.randint(0, n_classes, (batch,), generator=g)
    labels[1] = bad_label
    return logits, labels


def cross_entropy(logits: Any, labels: Any) -> Any:
    """``F.cross_entropy``, failing the way a GPU fails when the test pretends there is one."""
    import torch.nn.functional as F

    from cudaassert_ipy.checks import ValidationError

    gpu_would_assert = False
    try:
        return F.cross_entropy(logits, labels)
    except IndexError as e:
        if isinstance(e, ValidationError) or os.environ.get(PRETEND_GPU) != "1":
            raise
        gpu_would_assert = True  # raised below, outside this handler, so no CPU error is chained to it
    if gpu_would_assert:
        from gpu_double import fail_like_gpu

        fail_like_gpu("nll_loss_target_out_of_range")
    raise AssertionError("unreachable")
