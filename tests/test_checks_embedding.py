"""checks/embedding.py: embedding, nn.Embedding and embedding_bag (ids and offsets).

Each property: for random valid and invalid ids on the CPU, the validator raises exactly when CPU
PyTorch raises (embedding_bag: exactly when outside the documented range, which the CUDA kernel
asserts), with an exception that is an instance of CPU PyTorch's type, and results with validators
on equal results with them off."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from helpers.index_cases import INDEX_DTYPE, assert_same_outcome, index_values
from helpers.validator_outcomes import SETTINGS, outcome
from hypothesis import given
from hypothesis import strategies as st

from cudaassert_ipy.checks import ValidationError, ValidationIndexError, ValidationRuntimeError, validators

pytestmark = pytest.mark.usefixtures("validator_strategy")


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
    ids: torch.Tensor, offsets: torch.Tensor | None, num: int, last: bool, mode: str
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
