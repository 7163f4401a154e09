"""Checks for ``one_hot`` and ``repeat_interleave``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from cudaassert_ipy.checks.common import (
    INDEX_DTYPES,
    LONG_ONLY,
    arg,
    bad_details,
    caller_name,
    plain,
    read,
    read_minmax,
    readable,
)
from cudaassert_ipy.checks.errors import ValidationError, ValidationRuntimeError, range_text
from cudaassert_ipy.diagnose import hints


def check_one_hot(op: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> ValidationError | None:
    """``one_hot``: values in ``[0, num_classes)``; with ``num_classes=-1`` just ``>= 0``."""
    labels = arg(args, kwargs, 0, "tensor")
    if labels is None:
        labels = kwargs.get("input")
    num_classes = arg(args, kwargs, 1, "num_classes", -1)
    if not readable(labels) or labels.dtype not in LONG_ONLY or not isinstance(num_classes, int):
        return None
    if num_classes < -1:
        return None
    lo, hi = read_minmax(labels)
    if lo >= 0 and (num_classes == -1 or hi < num_classes):
        return None
    if num_classes == -1:
        bad = labels < 0
        valid = ">= 0 (num_classes=-1 means max + 1)"
    else:
        bad = (labels < 0) | (labels >= num_classes)
        valid = f"{range_text(0, num_classes)} (num_classes={num_classes})"
    n_bad, examples, distinct = bad_details(labels, bad)
    clauses = []
    if any(v < 0 for v in distinct):
        clauses.append(hints.ONE_HOT_NEGATIVE)
    too_big = [v for v in distinct if num_classes != -1 and v >= num_classes]
    if too_big:
        top = max(too_big)
        clauses.append(
            hints.ONE_HOT_TOO_BIG.format(num_classes=num_classes, top=top, more=top + 1, last=num_classes - 1)
        )
    return ValidationRuntimeError.out_of_range(
        caller_name(op),
        "tensor",
        valid,
        n_bad,
        examples,
        cause_id="scatter_gather_index_out_of_range_v1",
        hint="; ".join(clauses),
    )


def _repeats_and_input(op: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """(input or None, repeats, dim) for every ``repeat_interleave`` spelling."""
    if op.startswith("torch.") and len(args) == 1 and "repeats" not in kwargs:
        return None, args[0], None  # torch.repeat_interleave(repeats)
    return arg(args, kwargs, 0, "input"), arg(args, kwargs, 1, "repeats"), arg(args, kwargs, 2, "dim", None)


def check_repeat_interleave(op: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> ValidationError | None:
    """``repeat_interleave`` with a repeats tensor: repeats >= 0; ``output_size`` == the total."""
    inp, repeats, dim = _repeats_and_input(op, args, kwargs)
    output_size = kwargs.get("output_size")
    if not isinstance(repeats, Tensor) or not readable(repeats) or repeats.dtype not in INDEX_DTYPES:
        return None
    if repeats.dim() > 1:
        return None
    # how many times the repeats are used: once, or broadcast over the input's dimension
    copies = 1
    if inp is not None:
        if not plain(inp):
            return None
        if dim is None:
            length = inp.numel()
        elif isinstance(dim, int) and -max(inp.dim(), 1) <= dim < max(inp.dim(), 1):
            length = inp.shape[dim] if inp.dim() else 1
        else:
            return None
        if repeats.numel() == 1:
            copies = length
        elif repeats.numel() != length:
            return None  # torch raises "repeats must have the same size as input along dim"
    lo, total = read(torch.stack([repeats.min(), repeats.sum()]).to(torch.int64))
    name = caller_name(op)
    if lo < 0:
        n_bad, examples, _ = bad_details(repeats, repeats < 0)
        return ValidationRuntimeError.out_of_range(
            name,
            "repeats",
            ">= 0",
            n_bad,
            examples,
            cause_id="repeat_interleave_negative_repeats",
            hint=hints.REPEATS_NEGATIVE,
        )
    required = total * copies
    if output_size is None or output_size == required:
        return None
    return ValidationRuntimeError.output_size(
        name,
        output_size,
        required,
        cause_id="repeat_interleave_output_size_mismatch",
        hint=hints.OUTPUT_SIZE.format(required=required),
    )
