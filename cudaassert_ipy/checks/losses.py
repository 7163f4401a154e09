"""Checks for losses whose CUDA kernels assert on their targets or inputs.

``cross_entropy`` / ``nll_loss`` (1-D, 2-D and N-D segmentation form), ``binary_cross_entropy``
and ``ctc_loss`` (which CPU PyTorch silently accepts with out-of-range targets).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from cudaassert_ipy.checks.common import (
    arg,
    bad_details,
    caller_name,
    plain,
    read_flag,
    read_minmax,
    readable,
)
from cudaassert_ipy.checks.errors import ValidationError, ValidationIndexError, ValidationRuntimeError, range_text
from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.hints import BceFacts, LabelFacts
from cudaassert_ipy.frameworks import class_head_near

#: dtypes nll_loss accepts for class targets ("expected target dtype to be Long or Byte");
#: the N-D (nll_loss2d) kernels take Long only.
CLASS_TARGET_DTYPES = frozenset({torch.int64, torch.uint8})
ND_CLASS_TARGET_DTYPES = frozenset({torch.int64})


# ---------------------------------------------------------------- cross_entropy / nll_loss
def _check_class_target(op: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> ValidationError | None:
    inp = arg(args, kwargs, 0, "input")
    target = arg(args, kwargs, 1, "target")
    if not (plain(inp) and readable(target)) or target.dtype not in CLASS_TARGET_DTYPES:
        return None  # probability (float) targets and wrong dtypes: nothing to index / torch raises
    if inp.dim() == 1:
        if target.dim() != 0:
            return None
        n_classes = inp.shape[0]
    elif inp.dim() >= 2:
        if tuple(target.shape) != (inp.shape[0], *inp.shape[2:]):
            return None  # torch raises its own shape error on the host
        if inp.dim() >= 3 and target.dtype not in ND_CLASS_TARGET_DTYPES:
            return None
        n_classes = inp.shape[1]
    else:
        return None
    ignore_index = int(arg(args, kwargs, 4, "ignore_index", -100))
    ignore_matters = not 0 <= ignore_index < n_classes
    if target.dtype is torch.uint8 and not 0 <= ignore_index <= 255:
        ignore_matters = False  # no uint8 value can equal it
    checked = target.masked_fill(target == ignore_index, 0) if ignore_matters else target
    lo, hi = read_minmax(checked)
    if lo >= 0 and hi < n_classes:
        return None

    bad = (target < 0) | (target >= n_classes)
    if ignore_matters:
        bad &= target != ignore_index
    n_bad, examples, distinct = bad_details(target, bad)
    segmentation = inp.dim() >= 3
    reduction = arg(args, kwargs, 6, "reduction", "mean")
    if arg(args, kwargs, 5, "reduce", None) is False:
        reduction = "none"
    cause = "nll_loss2d_target_out_of_range" if segmentation else "nll_loss_target_out_of_range"
    if reduction == "none":
        cause += "_no_reduce"
    # inside a framework (an HF classifier's forward, a LightningModule's step) the fix names its own knob
    facts = LabelFacts(
        bad=tuple(int(v) for v in distinct),
        n_classes=n_classes,
        ignore_index=ignore_index,
        dense=segmentation,
        head=class_head_near(sys._getframe(1)),
    )
    valid = range_text(0, n_classes)
    if ignore_matters:
        valid += f" (or ignore_index={ignore_index})"
    return ValidationIndexError.out_of_range(
        caller_name(op), "target", valid, n_bad, examples, cause_id=cause, hint=hints.class_labels(facts), facts=facts
    )


def check_cross_entropy(op: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> ValidationError | None:
    """``cross_entropy`` / ``nll_loss``: class targets in ``[0, C)`` or equal to ``ignore_index``."""
    return _check_class_target(op, args, kwargs)


# ---------------------------------------------------------------- binary_cross_entropy
def _unit_interval_bad(t: Tensor) -> Tensor:
    return ~((t >= 0) & (t <= 1))  # NaN compares false: bad


def _bce_facts(argument: str, t: Tensor) -> BceFacts:
    """Failure path only: the finite range, NaN, and whether the values outside [0, 1] are whole numbers."""
    finite = t[torch.isfinite(t)]
    lo, hi = (finite.min().item(), finite.max().item()) if finite.numel() else (0.0, 0.0)
    outside = finite[(finite < 0) | (finite > 1)]
    whole = bool(outside.numel()) and bool((outside == outside.round()).all().item())
    return BceFacts(
        argument=argument, lo=float(lo), hi=float(hi), has_nan=bool(torch.isnan(t).any().item()), whole=whole
    )


def check_binary_cross_entropy(op: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> ValidationError | None:
    """``binary_cross_entropy``: input and target in ``[0, 1]``; NaN is bad."""
    inp = arg(args, kwargs, 0, "input")
    target = arg(args, kwargs, 1, "target")
    if not (readable(inp) and readable(target)) or inp.shape != target.shape:
        return None  # a size mismatch is torch's own ValueError
    if not (inp.is_floating_point() and target.is_floating_point()):
        return None
    in_lo, in_hi, t_lo, t_hi = read_minmax(inp, target)
    input_ok = in_lo >= 0 and in_hi <= 1  # NaN makes both comparisons false
    if input_ok and t_lo >= 0 and t_hi <= 1:
        return None
    argument, tensor = ("input", inp) if not input_ok else ("target", target)
    bad = _unit_interval_bad(tensor)
    n_bad, examples, _ = bad_details(tensor, bad)
    facts = _bce_facts(argument, tensor)
    cause = "bce_input_out_of_range" if argument == "input" else "bce_target_out_of_range"
    return ValidationRuntimeError.out_of_range(
        caller_name(op),
        argument,
        "[0, 1] (NaN is not allowed)",
        n_bad,
        examples,
        cause_id=cause,
        hint=hints.bce(facts),
        facts=facts,
    )


# ---------------------------------------------------------------- ctc_loss
def _ctc_used_mask(targets: Tensor, target_lengths: Tensor, batched: bool) -> Tensor | None:
    """Which target positions the loss reads: padding past ``target_lengths`` is never read."""
    if targets.dim() == 2 and batched:
        if target_lengths.numel() != targets.shape[0]:
            return None
        steps = torch.arange(targets.shape[1], device=targets.device)
        return steps.unsqueeze(0) < target_lengths.reshape(-1, 1)
    if targets.dim() == 1:
        steps = torch.arange(targets.shape[0], device=targets.device)
        return steps < target_lengths.sum()
    return None


def _to_device_without_sync(t: Tensor, device: torch.device) -> Tensor:
    """A plain ``.to(cuda)`` of a CPU tensor waits for the stream; a pinned, non-blocking copy does not."""
    if t.device == device:
        return t
    if t.device.type == "cpu" and device.type == "cuda":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)


def check_ctc_loss(op: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> ValidationError | None:
    """``ctc_loss``: targets (up to each target length) in ``[0, C)`` and never the blank label."""
    log_probs = arg(args, kwargs, 0, "log_probs")
    targets = arg(args, kwargs, 1, "targets")
    target_lengths = arg(args, kwargs, 3, "target_lengths")
    blank = int(arg(args, kwargs, 4, "blank", 0))
    if not (plain(log_probs) and readable(targets)) or log_probs.dim() not in (2, 3):
        return None
    if targets.is_floating_point() or targets.is_complex() or targets.dtype is torch.bool:
        return None
    n_classes = log_probs.shape[-1]
    if not 0 <= blank < n_classes:
        return None  # torch raises "blank must be in label range"
    if isinstance(target_lengths, Tensor):
        if not plain(target_lengths) or target_lengths.is_floating_point():
            return None
        lengths = target_lengths
    else:
        try:
            items = target_lengths if isinstance(target_lengths, (list, tuple)) else [target_lengths]
            lengths = torch.as_tensor([int(v) for v in items], dtype=torch.int64)
        except (TypeError, ValueError):
            return None
    lengths = _to_device_without_sync(lengths.to(torch.int64), targets.device)
    used = _ctc_used_mask(targets, lengths, batched=log_probs.dim() == 3)
    if used is None:
        return None
    bad = used & ((targets < 0) | (targets >= n_classes) | (targets == blank))
    if not read_flag(bad.any()):
        return None
    n_bad, examples, distinct = bad_details(targets, bad)
    clauses = []
    if blank in distinct:
        clauses.append(hints.CTC_BLANK.format(blank=blank))
    if any(v >= n_classes for v in distinct):
        clauses.append(hints.CTC_TOO_BIG.format(n_classes=n_classes, top=max(distinct)))
    if any(v < 0 for v in distinct):
        clauses.append(hints.CTC_NEGATIVE)
    clauses.append(hints.CTC_CPU_SILENT)
    return ValidationRuntimeError.out_of_range(
        caller_name(op),
        "targets",
        f"{range_text(0, n_classes)} except the blank label {blank}",
        n_bad,
        examples,
        cause_id="ctc_loss_target_out_of_range",
        hint="; ".join(clauses),
    )
