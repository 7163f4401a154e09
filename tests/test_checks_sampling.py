"""checks/sampling.py: multinomial, Categorical and bernoulli (tensor p, Bernoulli): raise exactly when
CPU PyTorch raises, with an exception of its type; NaN counts as bad everywhere."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from helpers.validator_outcomes import SETTINGS, assert_same_verdict, outcome
from hypothesis import given
from hypothesis import strategies as st
from torch.distributions import Bernoulli, Categorical

from cudaassert_ipy.checks import ValidationError, ValidationRuntimeError, validators

pytestmark = pytest.mark.usefixtures("validator_strategy")


weights = st.one_of(
    st.floats(0.0, 5.0),
    st.floats(-1.0, 2.0),
    st.sampled_from([0.0, 0.0, float("nan"), float("inf"), -0.0, 1e-30]),
)


@SETTINGS
@given(
    st.integers(1, 3),
    st.integers(1, 4),
    st.data(),
    st.sampled_from([torch.float32, torch.float64, torch.float16, torch.bfloat16]),
    st.booleans(),
)
def test_multinomial_raises_exactly_when_cpu_does(
    rows: int, cols: int, data: Any, dtype: torch.dtype, one_d: bool
) -> None:
    valid = st.lists(st.floats(0.01, 3.0), min_size=cols, max_size=cols)
    anything = st.lists(weights, min_size=cols, max_size=cols)
    table = [data.draw(st.one_of(valid, anything)) for _ in range(rows)]
    probs = torch.tensor(table[0] if one_d else table, dtype=dtype)
    replacement = data.draw(st.booleans())
    n = data.draw(st.integers(1, cols if not replacement else 4))
    error = assert_same_verdict(lambda: torch.multinomial(probs, n, replacement=replacement))
    if error is not None:
        assert error.cause_id in ("multinomial_invalid_probs_async", "multinomial_zero_sum_async")
        assert error.op == "torch.multinomial"


@SETTINGS
@given(st.lists(weights, min_size=1, max_size=4))
def test_categorical_without_validation_is_checked_when_it_samples(values: list[float]) -> None:
    probs = torch.tensor([values])
    error = assert_same_verdict(lambda: Categorical(probs=probs, validate_args=False).sample())
    if error is not None:
        assert (error.op, error.argument) == ("Categorical.sample", "probs")


def test_multinomial_messages_for_negative_nan_and_all_zero_rows() -> None:
    with validators(), pytest.raises(RuntimeError) as info:
        torch.multinomial(torch.tensor([[0.2, -0.1], [0.5, 0.5]]), 1)
    error = info.value
    assert isinstance(error, ValidationRuntimeError)
    assert str(error).startswith(
        "torch.multinomial: input has 1 bad value; valid: finite values >= 0, every row with a positive sum. "
        "First bad: input[0, 1]=-0.1."
    )
    assert "pass probabilities (softmax(logits)), not raw logits" in error.hint
    with validators(), pytest.raises(ValidationRuntimeError) as info:
        torch.tensor([float("nan"), 1.0]).multinomial(1)
    assert info.value.op == "Tensor.multinomial"
    assert "check torch.isfinite(logits).all() before softmax" in info.value.hint
    with validators(), pytest.raises(ValidationRuntimeError) as info:
        torch.multinomial(torch.tensor([[0.2, 0.1], [0.0, 0.0], [0.0, 0.0]]), 1)
    error = info.value
    assert (error.cause_id, error.n_bad) == ("multinomial_zero_sum_async", 2)
    assert error.examples == [((1,), 0.0), ((2,), 0.0)]
    assert str(error).startswith(
        "torch.multinomial: input has 2 rows whose weights sum to 0; valid: finite values >= 0, every row with a "
        "positive sum. First: input[1].sum()=0, input[2].sum()=0."
    )
    assert "keep at least one candidate per row" in error.hint


def test_categorical_with_validation_keeps_raising_its_own_value_error() -> None:
    # explicit: once torch._dynamo has been set up, PyTorch turns the default validation off
    with validators(), pytest.raises(ValueError) as info:
        Categorical(probs=torch.tensor([-1.0, 2.0]), validate_args=True)
    assert not isinstance(info.value, ValidationError)


probabilities = st.one_of(st.floats(0.0, 1.0), st.sampled_from([-0.5, 1.5, float("nan"), 0.0, 1.0, float("inf")]))


@SETTINGS
@given(st.lists(probabilities, min_size=1, max_size=5), st.sampled_from(["torch", "method", "inplace", "float_p"]))
def test_bernoulli_with_tensor_p_raises_exactly_when_cpu_does(values: list[float], form: str) -> None:
    p = torch.tensor(values)
    call = {
        "torch": lambda: torch.bernoulli(p),
        "method": lambda: p.bernoulli(),
        "inplace": lambda: torch.zeros(len(values)).bernoulli_(p),
        "float_p": lambda: torch.zeros(2).bernoulli_(0.5),
    }[form]
    error = assert_same_verdict(call)
    if error is not None:
        assert error.cause_id == "bernoulli_prob_out_of_range"
        assert error.argument == ("p" if form == "inplace" else "input")


def test_bernoulli_distribution_sample_is_named_and_explained() -> None:
    with validators(), pytest.raises(ValidationRuntimeError) as info:
        Bernoulli(probs=torch.tensor([0.5, 1.5]), validate_args=False).sample()
    error = info.value
    assert error.op == "Bernoulli.sample"
    assert str(error).startswith(
        "Bernoulli.sample: input has 1 bad value; valid: [0, 1] (NaN is not allowed). First bad: input[1]=1.5."
    )
    assert "apply torch.sigmoid to logits" in error.hint


def test_nan_comparisons_are_treated_as_bad_everywhere() -> None:
    nan = float("nan")  # NaN fails every comparison: a check written as `x < 0 or x > 1` would let it through
    with validators():
        for call, cause in (
            (lambda: torch.multinomial(torch.tensor([nan, 1.0]), 1), "multinomial_invalid_probs_async"),
            (lambda: torch.bernoulli(torch.tensor([nan])), "bernoulli_prob_out_of_range"),
            (lambda: F.binary_cross_entropy(torch.tensor([nan]), torch.tensor([1.0])), "bce_input_out_of_range"),
        ):
            error, _ = outcome(call)
            assert isinstance(error, ValidationError)
            assert error.cause_id == cause
            assert "input has 1 bad value;" in str(error) and "First bad: input[0]=nan." in str(error)
            assert "NaN" in error.hint
