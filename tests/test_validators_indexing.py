"""Validators for index ops: embedding, embedding_bag, x[idx], x[idx] = v, index_put_, index_select,
take/put_, index_add_/index_copy_/index_fill_, gather and the scatter family.

Each property: for random valid and invalid indices on the CPU, the validator raises exactly when
CPU PyTorch raises, with an exception that is an instance of CPU PyTorch's type, and results with
validators on equal results with them off. Negative indices are valid exactly where PyTorch accepts
them."""

from __future__ import annotations

from typing import Any, Callable, Optional

import pytest
import torch
import torch.nn.functional as F
from helpers.validator_outcomes import SETTINGS, outcome
from hypothesis import given
from hypothesis import strategies as st

from cudaassert_ipy.checks import ValidationError, ValidationIndexError, ValidationRuntimeError, validators

pytestmark = pytest.mark.usefixtures("validator_strategy")


#: CPU messages for bad index *values* (the rest are host-side shape/dtype checks torch keeps doing)
VALUE_ERRORS = ("out of bounds", "out of range", "out of DATA bounds", "index_size")


def assert_same_outcome(fn: Callable[[], Any], must_validate: bool = True) -> Optional[ValidationError]:
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


# ---------------------------------------------------------------- embedding
@SETTINGS
@given(st.integers(1, 8), st.data(), INDEX_DTYPE, st.sampled_from([None, 1.0]))
def test_embedding_raises_exactly_when_cpu_does(num: int, data: Any, dtype: torch.dtype, max_norm: Any) -> None:
    ids = torch.tensor(data.draw(index_values(num, 6)), dtype=dtype).reshape(2, 3)
    weight = torch.randn(num, 4)
    error = assert_same_outcome(lambda: F.embedding(ids, weight.clone(), max_norm=max_norm))
    if error is not None:
        assert isinstance(error, ValidationIndexError)
        assert (error.op, error.argument, error.cause_id) == ("embedding", "input", "index_select_out_of_range")


@SETTINGS
@given(st.integers(2, 8), st.data())
def test_nn_embedding_with_negative_padding_idx_still_rejects_negative_ids(num: int, data: Any) -> None:
    module = torch.nn.Embedding(num, 3, padding_idx=-1)
    ids = torch.tensor(data.draw(index_values(num, 4)))
    error = assert_same_outcome(lambda: module(ids))
    if error is not None:
        assert error.op == "nn.Embedding"
        assert bool((ids < 0).any() or (ids >= num).any())


def test_embedding_message_suggests_resize_token_embeddings_and_pad_token_id() -> None:
    with validators(), pytest.raises(IndexError) as info:
        torch.nn.Embedding(1000, 8)(torch.tensor([[1, 1003], [-100, 2]]))
    error = info.value
    assert isinstance(error, ValidationIndexError)
    assert error.valid == "0..999 (num_embeddings=1000)"
    assert error.examples == [((0, 1), 1003), ((1, 0), -100)]
    assert "model.resize_token_embeddings(len(tokenizer))" in error.hint
    assert "num_embeddings=1004" in error.hint
    assert "pad input_ids with the tokenizer's pad_token_id" in error.hint
    assert str(error).startswith(
        "nn.Embedding: input has 2 bad values; valid: 0..999 (num_embeddings=1000). "
        "First bad: input[0, 1]=1003, input[1, 0]=-100.\nLikely fix: "
    )


def embedding_bag_reference_bad(
    ids: torch.Tensor, offsets: Optional[torch.Tensor], num: int, last: bool, mode: str
) -> bool:
    """PyTorch's documented rule (the CUDA kernel asserts it; CPU misses a decreasing last offset)."""
    values = ids.flatten().tolist()
    if offsets is None:
        return any(not 0 <= v < num for v in values)
    offs = offsets.tolist()
    decreasing = any(b < a for a, b in zip(offs, offs[1:]))
    offsets_bad = offs[0] != 0 or decreasing or any(not 0 <= o <= len(values) for o in offs)
    used = values[: offs[-1]] if last and mode != "max" and not offsets_bad else values
    return offsets_bad or any(not 0 <= v < num for v in used)


@SETTINGS
@given(st.integers(1, 6), st.data(), INDEX_DTYPE, st.sampled_from(["sum", "mean", "max"]), st.booleans())
def test_embedding_bag_ids_and_offsets_raise_exactly_when_outside_the_documented_range(
    num: int, data: Any, dtype: torch.dtype, mode: str, include_last: bool
) -> None:
    weight = torch.randn(num, 3)
    offsets = None
    if data.draw(st.booleans()):
        ids = torch.tensor(data.draw(index_values(num, 6)), dtype=dtype).reshape(2, 3)
        include_last = False
    else:
        ids = torch.tensor(data.draw(index_values(num, 5)), dtype=dtype)
        valid_offsets = st.lists(st.integers(0, 5), min_size=2, max_size=4).map(lambda v: [0, *sorted(v)[1:]])
        any_offsets = st.lists(st.integers(-1, 7), min_size=2, max_size=4)
        offsets = torch.tensor(data.draw(st.one_of(valid_offsets, any_offsets)), dtype=dtype)
    expected_bad = embedding_bag_reference_bad(ids, offsets, num, include_last, mode)
    plain_error, _ = outcome(lambda: F.embedding_bag(ids, weight, offsets, mode=mode, include_last_offset=include_last))
    with validators():
        error, _ = outcome(lambda: F.embedding_bag(ids, weight, offsets, mode=mode, include_last_offset=include_last))
    assert isinstance(error, ValidationError) == expected_bad, error
    if plain_error is not None:  # everything CPU rejects is rejected, with an exception of CPU's type
        assert isinstance(error, type(plain_error))
    if error is not None:
        assert isinstance(error, ValidationRuntimeError) and isinstance(error, IndexError)


def test_embedding_bag_offsets_message_shows_how_to_build_offsets() -> None:
    with validators(), pytest.raises(ValidationRuntimeError) as info:
        torch.nn.EmbeddingBag(10, 3)(torch.tensor([1, 2, 3]), torch.tensor([0, 2, 1]))
    error = info.value
    assert (error.op, error.argument) == ("nn.EmbeddingBag", "offsets")
    assert error.cause_id == "embedding_bag_offsets_not_increasing"
    assert error.examples == [((2,), 1)]
    assert str(error).startswith(
        "nn.EmbeddingBag: offsets has 1 bad value; valid: offsets[0] == 0, never decreasing, at most "
        "len(input)=3. First bad: offsets[2]=1."
    )
    assert "torch.cumsum of the bag lengths" in error.hint


# ---------------------------------------------------------------- x[idx], x[idx] = v, index_put_
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
def dim_op_case(size_hint: int = 5) -> Any:
    return st.tuples(st.integers(1, size_hint), st.integers(1, 3), st.sampled_from([0, 1, -1, -2]), st.data())


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
@given(dim_op_case(), st.sampled_from(["add", "copy", "fill", "add out of place", "copy out of place",
                                       "fill out of place"]))
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


# ---------------------------------------------------------------- gather / scatter
@SETTINGS
@given(dim_op_case(4), INDEX_DTYPE, st.sampled_from(["gather", "scatter_", "scatter_value", "scatter_add_",
                                                    "scatter_add", "scatter_reduce", "torch.scatter"]))
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


def test_numpy_array_keys_are_checked_on_the_host() -> None:
    import numpy as np

    x = torch.zeros(5, 3)
    with validators():
        assert x[np.array([0, -5, 4])].shape == (3, 3)
        assert x[np.array([True, False, True, False, True])].shape == (3, 3)
        with pytest.raises(ValidationIndexError, match=r"valid: -3..2 \(dimension 1 has size 3\)"):
            x[:, np.array([3])]
