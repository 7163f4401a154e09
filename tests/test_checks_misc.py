"""checks/misc.py: one_hot and repeat_interleave: raise exactly when CPU PyTorch raises, with an
exception of its type (and stop the negative repeats CPU PyTorch may crash on)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from helpers.validator_outcomes import SETTINGS, assert_same_verdict, outcome
from hypothesis import given
from hypothesis import strategies as st

from cudaassert_ipy.checks import ValidationRuntimeError, validators

pytestmark = pytest.mark.usefixtures("validator_strategy")


@SETTINGS
@given(st.integers(1, 6), st.data(), st.booleans())
def test_one_hot_raises_exactly_when_cpu_does(num_classes: int, data: Any, infer: bool) -> None:
    values = data.draw(
        st.one_of(
            st.lists(st.integers(0, num_classes - 1), min_size=1, max_size=5),
            st.lists(st.integers(-2, num_classes + 2), min_size=1, max_size=5),
        )
    )
    labels = torch.tensor(values)
    error = assert_same_verdict(lambda: F.one_hot(labels, -1 if infer else num_classes))
    if error is not None:
        assert error.cause_id == "scatter_gather_index_out_of_range_v1"


def test_one_hot_messages_for_too_large_and_negative_labels() -> None:
    with validators(), pytest.raises(RuntimeError) as info:
        F.one_hot(torch.tensor([0, 3, 4]), 4)
    error = info.value
    assert isinstance(error, ValidationRuntimeError)
    assert str(error).startswith(
        "one_hot: tensor has 1 bad value; valid: 0..3 (num_classes=4). First bad: tensor[2]=4.\n"
    )
    assert "pass num_classes=5 if there are that many classes" in error.hint
    with validators(), pytest.raises(ValidationRuntimeError) as info:
        F.one_hot(torch.tensor([-1, 2]))
    assert info.value.valid == ">= 0 (num_classes=-1 means max + 1)"
    assert "one_hot cannot encode negative labels" in info.value.hint


# ---------------------------------------------------------------- repeat_interleave
@SETTINGS
@given(
    st.data(),
    st.sampled_from(["single", "torch_dim", "method_flat", "broadcast"]),
    st.booleans(),
    st.sampled_from([torch.int64, torch.int32]),
)
def test_repeat_interleave_raises_exactly_when_cpu_does(
    data: Any, form: str, with_size: bool, dtype: torch.dtype
) -> None:
    counts = data.draw(
        st.one_of(
            st.lists(st.integers(0, 3), min_size=1, max_size=4),
            st.lists(st.integers(-2, 3), min_size=1, max_size=4),
        )
    )
    if form == "broadcast":
        counts = counts[:1]
    repeats = torch.tensor(counts, dtype=dtype)
    x = torch.arange(len(counts) if form != "broadcast" else 3)
    total = sum(counts) if form != "broadcast" else counts[0] * 3
    kwargs = {"output_size": data.draw(st.sampled_from([total, total + 1, max(total - 1, 0)]))} if with_size else {}
    call = {
        "single": lambda: torch.repeat_interleave(repeats, **kwargs),
        "torch_dim": lambda: torch.repeat_interleave(x, repeats, dim=0, **kwargs),
        "method_flat": lambda: x.repeat_interleave(repeats, **kwargs),
        "broadcast": lambda: x.repeat_interleave(repeats, dim=0, **kwargs),
    }[form]
    if with_size and min(counts) < 0:
        # CPU PyTorch 2.13 can crash the process here (repeat_interleave(tensor([-2, -1, 3]),
        # output_size=0) is a segfault): never run it unchecked; the validator must stop it
        with validators():
            error, _ = outcome(call)
        assert isinstance(error, ValidationRuntimeError)
        assert error.cause_id == "repeat_interleave_negative_repeats"
        return
    error = assert_same_verdict(call)
    if error is not None:
        assert error.cause_id in ("repeat_interleave_negative_repeats", "repeat_interleave_output_size_mismatch")


def test_repeat_interleave_messages() -> None:
    with validators(), pytest.raises(ValidationRuntimeError) as info:
        torch.repeat_interleave(torch.tensor([1, -2]))
    assert str(info.value).startswith(
        "torch.repeat_interleave: repeats has 1 bad value; valid: >= 0. First bad: repeats[1]=-2."
    )
    with validators(), pytest.raises(ValidationRuntimeError) as info:
        torch.arange(2).repeat_interleave(torch.tensor([1, 2]), dim=0, output_size=5)
    error = info.value
    assert (error.argument, error.n_bad, error.examples) == ("output_size", 1, [((), 5)])
    assert str(error).startswith(
        "Tensor.repeat_interleave: output_size=5 but the repeats add up to 3; valid: output_size == 3"
    )
    assert error.hint.startswith("pass output_size=3")
