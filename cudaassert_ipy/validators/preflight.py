"""Dataset preflight: find every out-of-range label or token id on the CPU, before training.

``check_labels`` / ``check_token_ids`` check one tensor (or list) and raise a
:class:`~cudaassert_ipy.validators.errors.ValidationIndexError` naming every kind of bad value.
``preflight`` scans a whole dataset or ``DataLoader`` with a progress bar and returns a
:class:`PreflightReport` listing *every* offending sample index, with a summary to act on.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from cudaassert_ipy.validators.checks_common import bad_details, range_text
from cudaassert_ipy.validators.checks_embedding import _embedding_hint
from cudaassert_ipy.validators.checks_losses import _class_target_hint
from cudaassert_ipy.validators.errors import ValidationIndexError

__all__ = ["PreflightReport", "check_labels", "check_token_ids", "preflight"]

#: Sample fields tried, in order, when no key is given.
LABEL_KEYS = ("labels", "label", "targets", "target", "y", "mask", "masks")
IDS_KEYS = ("input_ids", "ids", "tokens", "token_ids")
#: Offending sample indices shown in the summary (the report keeps them all).
SUMMARY_INDICES = 50

Key = Union[str, int, Callable[[Any], Any], None]


def _as_cpu_tensor(values: Any) -> Tensor:
    if isinstance(values, Tensor):
        return values.detach().cpu()  # one copy of the whole tensor, then only host work
    return torch.as_tensor(values)


def _integral(t: Tensor) -> Tuple[Tensor, Optional[Tensor]]:
    """(int64 view, mask of non-integer values or None)."""
    if t.dtype is torch.bool:
        return t.to(torch.int64), None
    if t.is_floating_point():
        not_int = t != torch.round(t)  # NaN and fractions
        return torch.nan_to_num(t, nan=0.0).round().to(torch.int64), not_int
    return t.to(torch.int64), None


def check_labels(labels: Any, num_classes: int, ignore_index: Optional[int] = None) -> None:
    """Raise if any label is outside ``0..num_classes-1`` (values equal to ``ignore_index`` are fine).

    Accepts a tensor (any device: it is copied to the CPU once), a list or an array.
    """
    t = _as_cpu_tensor(labels)
    if t.numel() == 0:
        return
    values, not_int = _integral(t)
    bad = (values < 0) | (values >= num_classes)
    if ignore_index is not None:
        bad &= values != ignore_index
    if not_int is not None:
        bad |= not_int
    if not bool(bad.any()):
        return
    n_bad, examples, distinct = bad_details(t, bad)
    valid = range_text(0, num_classes) + (f" (or ignore_index={ignore_index})" if ignore_index is not None else "")
    hint = _class_target_hint(
        num_classes, [int(v) for v in distinct if float(v).is_integer()], ignore_index if ignore_index is not None else -100,
        segmentation=t.dim() >= 2, class_dim=1,
    ) if ignore_index is not None or True else ""
    if ignore_index is None and any(v in (-100, -1, 255) for v in distinct):
        hint += "; check_labels has no ignore_index unless you pass one"
    if not_int is not None and bool(not_int.any()):
        hint = "labels must be whole numbers (class ids), not fractions or NaN; " + hint
    raise ValidationIndexError(
        op="check_labels",
        argument="labels",
        valid=valid,
        n_bad=n_bad,
        examples=examples,
        cause_id="nll_loss2d_target_out_of_range" if t.dim() >= 3 else "nll_loss_target_out_of_range",
        hint=hint.strip("; "),
    )
