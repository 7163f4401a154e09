"""Shared by the index validators' property tests (embedding, indexing, gather/scatter): the index
values to draw, and the comparison of one call without and with validators."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from hypothesis import strategies as st

from cudaassert_ipy.checks import ValidationError, validators
from helpers.validator_outcomes import outcome

#: CPU messages for bad index *values* (the rest are host-side shape/dtype checks torch keeps doing)
VALUE_ERRORS = ("out of bounds", "out of range", "out of DATA bounds", "index_size")


def assert_same_outcome(fn: Callable[[], Any], must_validate: bool = True) -> ValidationError | None:
    """Without and with validators: the same verdict, an exception of CPU's type, the same result.

    A bad index value must be caught by the validator; host-side shape errors stay torch's own.
    """
    plain_error, plain_result = outcome(fn)
    with validators():
        checked_error, checked_result = outcome(fn)
    if plain_error is None:
        assert checked_error is None, f"false positive: {checked_error}"
        if isinstance(plain_result, torch.Tensor):
            torch.testing.assert_close(checked_result, plain_result)
        return None
    assert isinstance(checked_error, type(plain_error)), (plain_error, checked_error)
    if must_validate and any(text in str(plain_error) for text in VALUE_ERRORS):
        assert isinstance(checked_error, ValidationError), f"missed: CPU raised {plain_error!r}"
    return checked_error if isinstance(checked_error, ValidationError) else None


def index_values(size: int, count: int) -> st.SearchStrategy[list[int]]:
    """Lists that are often all valid ([-size, size)) and often not."""
    valid = st.integers(-size, size - 1)
    anything = st.integers(-size - 3, size + 3)
    return st.one_of(
        st.lists(valid, min_size=count, max_size=count),
        st.lists(anything, min_size=count, max_size=count),
    )


INDEX_DTYPE = st.sampled_from([torch.int64, torch.int32])


def dim_op_case(size_hint: int = 5) -> Any:
    return st.tuples(st.integers(1, size_hint), st.integers(1, 3), st.sampled_from([0, 1, -1, -2]), st.data())
