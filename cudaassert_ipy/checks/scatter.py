"""Checks for ``gather`` and the scatter family (``scatter``, ``scatter_add``, ``scatter_reduce``,
in place or not): indices in ``[0, size(dim))``, no negatives.

Under a label-smoothing loss (timm's, the HF Trainer's ``LabelSmoother``) or Mixup's ``one_hot`` the index IS the
class labels: the stop then words the class-count fix, the same sentence as the post-mortem's label-smoothing
rule and ``preflight`` (``hints.class_labels``), instead of an index fix."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from types import FrameType
from typing import Any

from cudaassert_ipy.checks.common import INDEX_DTYPES, arg, bad_details, caller_name, plain, readable
from cudaassert_ipy.checks.errors import ValidationError, ValidationRuntimeError, range_text
from cudaassert_ipy.checks.indexing import check_indices
from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.causes.rule_smoothing import LABEL_INDEX_OWNERS
from cudaassert_ipy.diagnose.hints import LabelFacts
from cudaassert_ipy.frameworks import class_head_near
from cudaassert_ipy.frameworks.base import class_names, frame_self

_CAUSE = "scatter_gather_index_out_of_range_v2"
_OWNER_FRAMES = 12  # how far up from the check a label-smoothing loss's method may be


def check_gather_scatter(op: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> ValidationError | None:
    """``gather(input, dim, index)`` / ``scatter*(self, dim, index, ...)``: ``[0, self.size(dim))``."""
    self = arg(args, kwargs, 0, "input")
    dim = arg(args, kwargs, 1, "dim")
    index = arg(args, kwargs, 2, "index")
    if not (plain(self) and readable(index)) or index.dtype not in INDEX_DTYPES or not isinstance(dim, int):
        return None
    if self.dim() == 0 or not -self.dim() <= dim < self.dim():
        return None
    dim %= self.dim()
    what = "input" if "gather" in op else "self"
    error = check_indices(
        op,
        self.shape,
        [(dim, index)],
        negative_ok=False,
        names=["index"],
        cause_id=_CAUSE,
        exc=ValidationRuntimeError,
        size_label=f"dimension {{dim}} of {what} has size {{size}}",
    )
    if error is None:
        return None
    owner = _label_index_owner(sys._getframe(1))
    if owner is None:
        return error
    return _labels_error(op, index, int(self.shape[dim]), owner)


def _label_index_owner(frame: FrameType | None) -> FrameType | None:
    """The frame of a label-smoothing loss (or Mixup) method that made this call, or None (failure path only)."""
    for _ in range(_OWNER_FRAMES):
        if frame is None:
            return None
        obj = frame_self(frame)
        if obj is not None and any(name in LABEL_INDEX_OWNERS for name in class_names(obj)):
            return frame
        frame = frame.f_back
    return None


def _labels_error(op: str, labels: Any, n_classes: int, owner: FrameType) -> ValidationError:
    """The index is the class labels: say so, with the class-count fix in the model's framework's words."""
    bad = (labels < 0) | (labels >= n_classes)
    n_bad, examples, distinct = bad_details(labels, bad)
    facts = LabelFacts(bad=tuple(int(v) for v in distinct), n_classes=n_classes, head=class_head_near(owner))
    return ValidationRuntimeError.out_of_range(
        caller_name(op),
        "index (the class labels)",
        range_text(0, n_classes),
        n_bad,
        examples,
        cause_id=_CAUSE,
        hint=hints.class_labels(facts),
        facts=facts,
    )
