"""checks/scatter.py: gather and the scatter family (scatter_, scatter_add_, scatter_reduce, torch.scatter).

Each property: for random valid and invalid indices on the CPU, the validator raises exactly when
CPU PyTorch raises, with an exception that is an instance of CPU PyTorch's type (negative indices
are never valid here), and gather's results with validators on equal those with them off."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from helpers.index_cases import INDEX_DTYPE, assert_same_outcome, dim_op_case, index_values
from helpers.validator_outcomes import SETTINGS, outcome
from hypothesis import given
from hypothesis import strategies as st

from cudaassert_ipy.checks import ValidationRuntimeError, validators

pytestmark = pytest.mark.usefixtures("validator_strategy")


@SETTINGS
@given(
    dim_op_case(4),
    INDEX_DTYPE,
    st.sampled_from(
        ["gather", "scatter_", "scatter_value", "scatter_add_", "scatter_add", "scatter_reduce", "torch.scatter"]
    ),
)
def test_gather_and_scatter_family_raise_exactly_when_cpu_does(case: Any, dtype: torch.dtype, which: str) -> None:
    rows, cols, dim, data = case
    x = torch.zeros(rows, cols)
    size = x.shape[dim]
    index = torch.tensor(data.draw(index_values(size, rows * cols)), dtype=dtype).reshape(rows, cols)
    src = torch.ones(rows, cols)
    call = {
        "gather": lambda: x.gather(dim, index),
        "scatter_": lambda: x.clone().scatter_(dim, index, src),
        "scatter_value": lambda: x.clone().scatter_(dim, index, 2.0),
        "scatter_add_": lambda: x.clone().scatter_add_(dim, index, src),
        "scatter_add": lambda: x.scatter_add(dim, index, src),
        "scatter_reduce": lambda: x.scatter_reduce(dim, index, src, "amax"),
        "torch.scatter": lambda: torch.scatter(x, dim, index, src),
    }[which]
    plain_error, _ = outcome(call)
    if which != "gather" and plain_error is None:
        # scatter results with repeated indices may differ in order: compare the verdict only
        with validators():
            assert outcome(call)[0] is None
        return
    error = assert_same_outcome(call)
    if error is not None:
        assert isinstance(error, ValidationRuntimeError)
        assert error.cause_id == "scatter_gather_index_out_of_range_v2"
        assert error.valid.startswith("0..")


def test_gather_message_names_the_dimension_of_input() -> None:
    with validators(), pytest.raises(RuntimeError) as info:
        torch.gather(torch.zeros(2, 3), 1, torch.tensor([[0, 3], [1, 2]]))
    error = info.value
    assert isinstance(error, ValidationRuntimeError)
    assert error.op == "torch.gather"
    assert str(error).startswith(
        "torch.gather: index has 1 bad value; valid: 0..2 (dimension 1 of input has size 3). First bad: index[0, 1]=3."
    )
