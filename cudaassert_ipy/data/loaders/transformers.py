"""transformers: the Trainer pulls all ``gradient_accumulation_steps`` micro-batches of an optimizer step
(``get_batch_samples``) before the first forward; when micro-batch i of N fails, N-1-i more were fetched."""

from __future__ import annotations

import types
from typing import Any

from cudaassert_ipy.frameworks.base import made_by

__all__ = ["ahead"]

MICRO = "the Trainer fetches its {n} gradient-accumulation micro-batches together before the first forward"


def ahead(obj: Any, frame: types.FrameType) -> tuple[int, int, tuple[str, ...]] | None:
    if frame.f_code.co_name != "get_batch_samples" or not made_by(obj, ("transformers",)):
        return None
    n = getattr(getattr(obj, "args", None), "gradient_accumulation_steps", 1)
    if not isinstance(n, int) or n <= 1:
        return None
    return 0, n - 1, (MICRO.format(n=n),)
