"""Checks for losses whose CUDA kernels assert on their targets or inputs.

``cross_entropy`` / ``nll_loss`` (1-D, 2-D and N-D segmentation form), ``binary_cross_entropy``
and ``ctc_loss`` (which CPU PyTorch silently accepts with out-of-range targets).
"""

from __future__ import annotations

import math
from typing import Any, List, Mapping, Optional, Sequence

import torch
from torch import Tensor

from cudaassert_ipy.checks.common import (
    arg,
    bad_details,
    caller_name,
    plain,
    range_text,
    read_flag,
    read_minmax,
    readable,
)
from cudaassert_ipy.checks.errors import (
    CLASSES_OF_INPUT,
    HINT_BCE_LOGITS,
    HINT_BCE_MASK_PIXELS,
    HINT_BCE_MULTICLASS,
    HINT_BCE_NAN_INPUT,
    HINT_BCE_NAN_TARGET,
    HINT_BCE_NEGATIVE_TARGETS,
    HINT_BCE_SCALE_TARGETS,
    HINT_CTC_BLANK,
    HINT_CTC_CPU_SILENT,
    HINT_CTC_NEGATIVE,
    HINT_CTC_TOO_BIG,
    HINT_MINUS_100,
    HINT_MINUS_ONE,
    HINT_NEAREST_RESIZE,
    HINT_NEGATIVE_LABELS,
    HINT_ONE_MORE_CLASS,
    HINT_REMAP_LABELS,
    HINT_VOC_VOID,
    ValidationError,
    ValidationIndexError,
    ValidationRuntimeError,
)

#: dtypes nll_loss accepts for class targets ("expected target dtype to be Long or Byte");
#: the N-D (nll_loss2d) kernels take Long only.
CLASS_TARGET_DTYPES = frozenset({torch.int64, torch.uint8})
ND_CLASS_TARGET_DTYPES = frozenset({torch.int64})


# ---------------------------------------------------------------- cross_entropy / nll_loss
def _class_target_hint(
    n_classes: int,
    distinct: List[int],
    ignore_index: Optional[int],
    segmentation: bool,
    class_dim: int,
    classes_phrase: Optional[str] = None,
    reaches_phrase: str = "the target reaches",
) -> str:
    """The specific fix for class labels outside ``0..n_classes-1`` (``distinct``: the bad values).

    ``classes_phrase`` replaces "the input has C classes (input.shape[1] == C)".
    """
    hints: List[str] = []
    too_big = [v for v in distinct if v >= n_classes]
    negative = [v for v in distinct if v < 0]
    if 255 in too_big and ignore_index != 255:
        hints.append(HINT_VOC_VOID)
    top = max((v for v in too_big if v != 255), default=None)
    if top is not None:
        classes = classes_phrase or CLASSES_OF_INPUT.format(n=n_classes, dim=class_dim)
        template = HINT_ONE_MORE_CLASS if top == n_classes else HINT_REMAP_LABELS
        hints.append(
            template.format(classes=classes, reaches=reaches_phrase, top=top, more=top + 1, last=n_classes - 1)
        )
        if segmentation and top < 255:
            hints.append(HINT_NEAREST_RESIZE)
    if -100 in negative:
        now = "no ignore_index is set" if ignore_index is None else f"ignore_index={ignore_index}"
        hints.append(HINT_MINUS_100.format(now=now))
    if -1 in negative:
        hints.append(HINT_MINUS_ONE)
    if not set(negative) <= {-1, -100}:
        hints.append(HINT_NEGATIVE_LABELS)
    return "; ".join(hints)


def _check_class_target(op: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Optional[ValidationError]:
    inp = arg(args, kwargs, 0, "input")
    target = arg(args, kwargs, 1, "target")
    if not (plain(inp) and readable(target)) or target.dtype not in CLASS_TARGET_DTYPES:
        return None  # probability (float) targets and wrong dtypes: nothing to index / torch raises
    if inp.dim() == 1:
        if target.dim() != 0:
            return None
        n_classes, class_dim = inp.shape[0], 0
    elif inp.dim() >= 2:
        if tuple(target.shape) != (inp.shape[0], *inp.shape[2:]):
            return None  # torch raises its own shape error on the host
        if inp.dim() >= 3 and target.dtype not in ND_CLASS_TARGET_DTYPES:
            return None
        n_classes, class_dim = inp.shape[1], 1
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
    valid = range_text(0, n_classes)
    if ignore_matters:
        valid += f" (or ignore_index={ignore_index})"
    return ValidationIndexError(
        op=caller_name(op),
        argument="target",
        valid=valid,
        n_bad=n_bad,
        examples=examples,
        cause_id=cause,
        hint=_class_target_hint(n_classes, distinct, ignore_index, segmentation, class_dim),
    )


def check_cross_entropy(op: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Optional[ValidationError]:
    """``cross_entropy`` / ``nll_loss``: class targets in ``[0, C)`` or equal to ``ignore_index``."""
    return _check_class_target(op, args, kwargs)


# ---------------------------------------------------------------- binary_cross_entropy
def _unit_interval_bad(t: Tensor) -> Tensor:
    return ~((t >= 0) & (t <= 1))  # NaN compares false: bad


def _bce_hint(argument: str, distinct: List[float], n_nan: int) -> str:
    finite = [v for v in distinct if not math.isnan(v)]
    hints = []
    if argument == "input":
        if finite:
            hints.append(HINT_BCE_LOGITS)
        if n_nan:
            hints.append(HINT_BCE_NAN_INPUT)
        return "; ".join(hints)
    if finite and all(float(v).is_integer() for v in finite):
        top = max(finite)
        if 1 < top <= 255:
            hints.append(HINT_BCE_MASK_PIXELS)
        if top > 1:
            hints.append(HINT_BCE_MULTICLASS)
        if min(finite) < 0:
            hints.append(HINT_BCE_NEGATIVE_TARGETS)
    elif finite:
        hints.append(HINT_BCE_SCALE_TARGETS)
    if n_nan:
        hints.append(HINT_BCE_NAN_TARGET)
    return "; ".join(hints)


def check_binary_cross_entropy(
    op: str, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> Optional[ValidationError]:
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
    n_bad, examples, distinct = bad_details(tensor, bad)
    n_nan = int(torch.isnan(tensor).sum().item())
    return ValidationRuntimeError(
        op=caller_name(op),
        argument=argument,
        valid="[0, 1] (NaN is not allowed)",
        n_bad=n_bad,
        examples=examples,
        cause_id="bce_input_out_of_range" if argument == "input" else "bce_target_out_of_range",
        hint=_bce_hint(argument, distinct, n_nan),
    )


# ---------------------------------------------------------------- ctc_loss
def _ctc_used_mask(targets: Tensor, target_lengths: Tensor, batched: bool) -> Optional[Tensor]:
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


def check_ctc_loss(op: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Optional[ValidationError]:
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
    hints = []
    if blank in distinct:
        hints.append(HINT_CTC_BLANK.format(blank=blank))
    if any(v >= n_classes for v in distinct):
        hints.append(HINT_CTC_TOO_BIG.format(n_classes=n_classes, top=max(distinct)))
    if any(v < 0 for v in distinct):
        hints.append(HINT_CTC_NEGATIVE)
    hints.append(HINT_CTC_CPU_SILENT)
    return ValidationRuntimeError(
        op=caller_name(op),
        argument="targets",
        valid=f"{range_text(0, n_classes)} except the blank label {blank}",
        n_bad=n_bad,
        examples=examples,
        cause_id="ctc_loss_target_out_of_range",
        hint="; ".join(hints),
    )
