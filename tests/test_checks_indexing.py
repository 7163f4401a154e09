"""checks/indexing.py: x[idx], x[idx] = v, index_put_, index_select, index_add_/index_copy_/index_fill_,
take/put_, and keys given as Python lists or numpy arrays.

Each property: for random valid and invalid indices on the CPU, the validator raises exactly when
CPU PyTorch raises, with an exception that is an instance of CPU PyTorch's type, and results with
validators on equal results with them off. Negative indices are valid exactly where PyTorch accepts
them."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from helpers.index_cases import INDEX_DTYPE, assert_same_outcome, dim_op_case, index_values
from helpers.validator_outcomes import SETTINGS
from hypothesis import given
from hypothesis import strategies as st

from cudaassert_ipy.checks import ValidationIndexError, validators

pytestmark = pytest.mark.usefixtures("validator_strategy")


@st.composite
def getitem_case(draw: Any) -> tuple[torch.Tensor, Any]:
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    x = torch.arange(int(torch.tensor(shape).prod())).reshape(shape)
    dim_keys = []
    for size in shape[: draw(st.integers(1, len(shape)))]:
        kind = draw(st.sampled_from(["tensor", "tensor", "list", "slice", "int", "mask"]))
        if kind == "tensor":
            dim_keys.append(torch.tensor(draw(index_values(size, 3)), dtype=draw(INDEX_DTYPE)))
        elif kind == "list":
            dim_keys.append(draw(index_values(size, 2)))
        elif kind == "slice":
            dim_keys.append(slice(None))
        elif kind == "int":
            dim_keys.append(draw(st.integers(-size, size - 1)))
        else:
            dim_keys.append(torch.tensor(draw(st.lists(st.booleans(), min_size=size, max_size=size))))
    if draw(st.booleans()):
        dim_keys.insert(0, None)
    if len(dim_keys) == 1 and draw(st.booleans()):
        return x, dim_keys[0]
    if draw(st.booleans()) and len(dim_keys) < len(shape) + 1:
        dim_keys.insert(0, Ellipsis) if dim_keys and draw(st.booleans()) else dim_keys.append(Ellipsis)
    return x, tuple(dim_keys)


def has_python_int(key: Any) -> bool:
    """A Python int in a key is bounds-checked by torch itself, on the host (also on CUDA)."""
    items = key if isinstance(key, tuple) else (key,)
    return any(isinstance(k, int) and not isinstance(k, bool) for k in items)


@SETTINGS
@given(getitem_case())
def test_getitem_raises_exactly_when_cpu_does(case: tuple[torch.Tensor, Any]) -> None:
    x, key = case
    error = assert_same_outcome(lambda: x[key], must_validate=not has_python_int(key))
    if error is not None:
        assert error.op == "Tensor.__getitem__"
        assert error.cause_id == "advanced_indexing_out_of_range_v2"


@SETTINGS
@given(getitem_case())
def test_setitem_raises_exactly_when_cpu_does_and_leaves_the_tensor_alone(case: tuple[torch.Tensor, Any]) -> None:
    x, key = case

    def assign() -> torch.Tensor:
        y = x.clone()
        y[key] = -7
        return y

    error = assert_same_outcome(assign, must_validate=not has_python_int(key))
    if error is not None:
        assert error.op == "Tensor.__setitem__"


@SETTINGS
@given(st.integers(1, 5), st.integers(1, 4), st.data(), st.booleans(), st.booleans())
def test_index_put_accepts_negative_indices_exactly_like_cpu(
    rows: int, cols: int, data: Any, accumulate: bool, in_place: bool
) -> None:
    i0 = torch.tensor(data.draw(index_values(rows, 3)))
    i1 = torch.tensor(data.draw(index_values(cols, 3)), dtype=data.draw(INDEX_DTYPE))
    x = torch.zeros(rows, cols)
    put = x.index_put_ if in_place else x.index_put
    error = assert_same_outcome(lambda: put((i0, i1), torch.tensor(1.0), accumulate=accumulate))
    if error is not None:
        assert error.argument in ("indices[0]", "indices[1]")


def test_getitem_message_names_dimension_size_and_the_off_by_one() -> None:
    x = torch.zeros(5, 3)
    with validators(), pytest.raises(IndexError) as info:
        x[:, torch.tensor([0, 3, -4])]
    error = info.value
    assert isinstance(error, ValidationIndexError)
    assert (error.argument, error.valid, error.n_bad) == ("index", "-3..2 (dimension 1 has size 3)", 2)
    assert error.examples == [((1,), 3), ((2,), -4)]
    assert "dimension 1 has size 3 but the index reaches 3: indices are 0-based" in error.hint
    assert "negative indices count from the end and stop at -3" in error.hint
    assert str(error).startswith(
        "Tensor.__getitem__: index has 2 bad values; valid: -3..2 (dimension 1 has size 3). "
        "First bad: index[1]=3, index[2]=-4."
    )


# torch deprecates the legacy form (a list of lists as several indices) but still accepts it, and users still write it
@pytest.mark.filterwarnings("ignore:Using a non-tuple sequence for multidimensional indexing is deprecated:UserWarning")
def test_python_list_keys_are_checked_on_the_host_including_legacy_nested_lists() -> None:
    x = torch.zeros(3, 4)
    with validators():
        with pytest.raises(ValidationIndexError, match=r"index has 1 bad value; valid: -3..2"):
            x[[0, 3]]
        with pytest.raises(ValidationIndexError, match=r"index for dimension 1 has 1 bad value; valid: -4..3"):
            x[[[0, 1], [1, 4]]]  # legacy: a list of lists means x[[0, 1], [1, 4]]
        x[[True, False, True]]  # a bool list is a mask


def test_boolean_masks_and_zero_dim_indices_are_left_to_torch() -> None:
    x = torch.zeros(3, 4)
    with validators():
        x[torch.tensor([True, False, True])]
        x[torch.tensor(True)]
        with pytest.raises(IndexError):
            x[torch.tensor([True, False])]  # torch's own shape check


# ---------------------------------------------------------------- dim-indexed ops
@SETTINGS
@given(dim_op_case(), INDEX_DTYPE)
def test_index_select_rejects_negatives_exactly_like_cpu(case: Any, dtype: torch.dtype) -> None:
    rows, cols, dim, data = case
    x = torch.randn(rows, cols)
    index = torch.tensor(data.draw(index_values(x.shape[dim], 4)), dtype=dtype)
    error = assert_same_outcome(lambda: torch.index_select(x, dim, index))
    if error is not None:
        assert error.cause_id == "index_select_out_of_range"
        assert error.valid.startswith("0..")


@SETTINGS
@given(
    dim_op_case(),
    st.sampled_from(["add", "copy", "fill", "add out of place", "copy out of place", "fill out of place"]),
)
def test_index_add_copy_fill_raise_exactly_when_cpu_does(case: Any, which: str) -> None:
    rows, cols, dim, data = case
    x = torch.zeros(rows, cols)
    size = x.shape[dim]
    dtype = data.draw(INDEX_DTYPE) if which.startswith("add") else torch.int64
    index = torch.tensor(data.draw(index_values(size, 2)), dtype=dtype)
    source_shape = list(x.shape)
    source_shape[dim] = 2
    source = torch.ones(source_shape)
    call = {
        "add": lambda: x.clone().index_add_(dim, index, source),
        "copy": lambda: x.clone().index_copy_(dim, index, source),
        "fill": lambda: x.clone().index_fill_(dim, index, 3.0),
        "add out of place": lambda: x.index_add(dim, index, source),
        "copy out of place": lambda: x.index_copy(dim, index, source),
        "fill out of place": lambda: x.index_fill(dim, index, 3.0),
    }[which]
    error = assert_same_outcome(call)
    if error is not None:
        kind = which.split()[0]
        assert error.cause_id == f"index_{kind}_out_of_range"
        assert error.valid.startswith(f"-{size}.." if kind == "fill" else "0..")


@SETTINGS
@given(st.integers(1, 12), st.data(), st.sampled_from(["take", "put_", "put", "torch.take"]))
def test_take_and_put_accept_flat_negative_indices_like_cpu(numel: int, data: Any, which: str) -> None:
    x = torch.arange(float(numel))
    index = torch.tensor(data.draw(index_values(numel, 3)))
    call = {
        "take": lambda: x.take(index),
        "torch.take": lambda: torch.take(x, index),
        "put_": lambda: x.clone().put_(index, torch.ones(3), accumulate=True),
        "put": lambda: x.put(index, torch.ones(3), accumulate=True),
    }[which]
    error = assert_same_outcome(call)
    if error is not None:
        assert error.cause_id == "take_put_out_of_range"
        assert error.valid == f"{-numel}..{numel - 1} (the tensor has {numel} elements)"


def test_index_select_message_explains_negative_indices_are_not_accepted() -> None:
    with validators(), pytest.raises(ValidationIndexError) as info:
        torch.zeros(5, 3).index_select(0, torch.tensor([-1]))
    assert info.value.op == "Tensor.index_select"
    assert "this call does not accept negative indices (x[idx] does)" in info.value.hint


def test_numpy_array_keys_are_checked_on_the_host() -> None:
    import numpy as np

    x = torch.zeros(5, 3)
    with validators():
        assert x[np.array([0, -5, 4])].shape == (3, 3)
        assert x[np.array([True, False, True, False, True])].shape == (3, 3)
        with pytest.raises(ValidationIndexError, match=r"valid: -3..2 \(dimension 1 has size 3\)"):
            x[:, np.array([3])]
