"""Checks for sampling: ``multinomial`` (and ``Categorical.sample``, which calls it) and
``bernoulli`` with a tensor of probabilities."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from cudaassert_ipy.checks.common import (
    arg,
    bad_details,
    caller_name,
    read,
    read_minmax,
    readable,
)
from cudaassert_ipy.checks.errors import ValidationError, ValidationRuntimeError
from cudaassert_ipy.diagnose import hints

MULTINOMIAL_VALID = "finite values >= 0, every row with a positive sum"


def _probs_hint(distinct: list[float]) -> str:
    clauses = []
    if any(math.isnan(v) or math.isinf(v) for v in distinct):
        clauses.append(hints.PROBS_NONFINITE)
    if any(v < 0 for v in distinct if not math.isnan(v)):
        clauses.append(hints.PROBS_NEGATIVE)
    return "; ".join(clauses)


def check_multinomial(op: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> ValidationError | None:
    """``multinomial``: entries finite and >= 0, every row with a positive sum."""
    probs = arg(args, kwargs, 0, "input")
    if not readable(probs) or not probs.is_floating_point() or probs.dim() not in (1, 2):
        return None
    mn, mx = torch.aminmax(probs)
    lo, hi, row_min = read(torch.stack([mn, mx, probs.sum(-1).amin()]))
    if lo >= 0 and hi < math.inf and row_min > 0:  # NaN fails every comparison
        return None
    name = caller_name(op)
    argument = "probs" if "." in name and not name.startswith(("torch.", "Tensor.")) else "input"
    entry_bad = ~((probs >= 0) & torch.isfinite(probs))
    if bool(entry_bad.any()):
        n_bad, examples, distinct = bad_details(probs, entry_bad)
        return ValidationRuntimeError.out_of_range(
            name,
            argument,
            MULTINOMIAL_VALID,
            n_bad,
            examples,
            cause_id="multinomial_invalid_probs_async",
            hint=_probs_hint(distinct),
        )
    sums = probs.sum(-1)
    n_bad, examples, _ = bad_details(sums, sums <= 0)
    return ValidationRuntimeError.zero_rows(
        name,
        argument,
        MULTINOMIAL_VALID,
        n_bad,
        examples,
        cause_id="multinomial_zero_sum_async",
        hint=hints.PROBS_ZERO_ROWS,
    )


def _check_probability_tensor(op: str, p: Any, argument: str) -> ValidationError | None:
    if not readable(p) or not p.is_floating_point():
        return None
    lo, hi = read_minmax(p)
    if lo >= 0 and hi <= 1:
        return None
    p_t: Tensor = p
    n_bad, examples, distinct = bad_details(p_t, ~((p_t >= 0) & (p_t <= 1)))
    clauses = []
    if any(not math.isnan(v) for v in distinct):
        clauses.append(hints.BERNOULLI_RANGE)
    if any(math.isnan(v) for v in distinct):
        clauses.append(hints.BERNOULLI_NAN)
    return ValidationRuntimeError.out_of_range(
        caller_name(op),
        argument,
        "[0, 1] (NaN is not allowed)",
        n_bad,
        examples,
        cause_id="bernoulli_prob_out_of_range",
        hint="; ".join(clauses),
    )


def check_bernoulli(op: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> ValidationError | None:
    """``torch.bernoulli(p)`` / ``p.bernoulli()``: the tensor itself holds the probabilities.

    With a float ``p`` argument PyTorch checks ``p`` on the host itself.
    """
    if arg(args, kwargs, 1, "p", None) is not None:
        return None
    return _check_probability_tensor(op, arg(args, kwargs, 0, "input"), "input")


def check_bernoulli_(op: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> ValidationError | None:
    """``x.bernoulli_(p)`` with a tensor ``p`` in ``[0, 1]``."""
    p = arg(args, kwargs, 1, "p", None)
    if not isinstance(p, Tensor):
        return None
    return _check_probability_tensor(op, p, "p")
