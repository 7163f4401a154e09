"""Validators for losses: raise exactly when CPU PyTorch raises (ctc_loss: exactly when the
targets leave the documented range), with the same exception type, and never change results."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from helpers.validator_outcomes import SETTINGS, outcome
from hypothesis import given
from hypothesis import strategies as st

from cudaassert_ipy.checks import ValidationError, ValidationIndexError, ValidationRuntimeError, validators

pytestmark = pytest.mark.usefixtures("validator_strategy")

#: CPU messages for bad values (the rest are host-side dtype/shape checks torch keeps doing)
VALUE_ERRORS = ("out of bounds", "should be between 0 and 1")


def assert_same_outcome(fn: Callable[[], Any]) -> ValidationError | None:
    """Run ``fn`` without and with validators: same success/failure, same exception family."""
    torch.manual_seed(0)
    plain_error, plain_result = outcome(fn)
    torch.manual_seed(0)
    with validators():
        checked_error, checked_result = outcome(fn)
    if plain_error is None:
        assert checked_error is None, f"false positive: {checked_error}"
        if isinstance(plain_result, torch.Tensor):
            torch.testing.assert_close(checked_result, plain_result, equal_nan=True)
        return None
    if isinstance(plain_error, UnicodeDecodeError):
        # CPU nll_loss(reduction="none") formats a bad uint8 target as a character:
        # "Target \x9c is out of bounds." fails to decode. It is the IndexError in disguise.
        assert b"is out of bounds" in plain_error.object
        assert isinstance(checked_error, ValidationIndexError)
        return checked_error
    assert isinstance(checked_error, type(plain_error)), (plain_error, checked_error)
    if any(text in str(plain_error) for text in VALUE_ERRORS):
        assert isinstance(checked_error, ValidationError), f"missed: CPU raised {plain_error!r}"
    # otherwise a host-side dtype/shape check (e.g. uint8 targets with weight and label_smoothing
    # meet "gather(): Expected dtype int32/int64"): torch's own error, or ours if a value is bad too
    return checked_error if isinstance(checked_error, ValidationError) else None


def labels(n_classes: int, ignore: int, size: int) -> st.SearchStrategy[list[int]]:
    valid = st.one_of(st.integers(0, n_classes - 1), st.just(ignore))
    anything = st.one_of(valid, st.integers(-3, n_classes + 3), st.sampled_from([255, -100, -1]))
    return st.one_of(st.lists(valid, min_size=size, max_size=size), st.lists(anything, min_size=size, max_size=size))


# ---------------------------------------------------------------- cross_entropy / nll_loss
@st.composite
def class_target_case(draw: Any) -> dict:
    n_classes = draw(st.integers(1, 6))
    form = draw(st.sampled_from(["1d", "2d", "3d", "4d", "5d"]))
    ignore = draw(st.sampled_from([-100, -1, 255, 0, n_classes - 1, 3]))
    batch = draw(st.integers(1, 3))
    extra = {"1d": (), "2d": (), "3d": (2,), "4d": (2, 2), "5d": (1, 2, 2)}[form]
    input_shape = (n_classes,) if form == "1d" else (batch, n_classes, *extra)
    target_shape = () if form == "1d" else (batch, *extra)
    size = 1 if form == "1d" else batch * int(torch.tensor(extra).prod().item() if extra else 1)
    values = draw(labels(n_classes, ignore, size))
    # uint8 targets are accepted by the 1-D/2-D kernels only (N-D: "expected scalar type Long")
    dtype = draw(st.sampled_from([torch.int64, torch.int64, torch.uint8] if form in ("1d", "2d") else [torch.int64]))
    if dtype is torch.uint8:
        values = [v % 256 for v in values]
    return {
        "input": torch.randn(input_shape),
        "target": torch.tensor(values, dtype=dtype).reshape(target_shape),
        "ignore_index": ignore,
        "label_smoothing": draw(st.sampled_from([0.0, 0.0, 0.1])),
        "weight": torch.rand(n_classes) + 0.1 if draw(st.booleans()) else None,
        "reduction": draw(st.sampled_from(["mean", "sum", "none"])),
    }


@SETTINGS
@given(class_target_case())
def test_cross_entropy_raises_exactly_when_cpu_does(case: dict) -> None:
    inp, target = case["input"], case["target"]
    error = assert_same_outcome(
        lambda: F.cross_entropy(
            inp,
            target,
            weight=case["weight"],
            ignore_index=case["ignore_index"],
            reduction=case["reduction"],
            label_smoothing=case["label_smoothing"],
        )
    )
    if error is not None:
        assert isinstance(error, ValidationIndexError)
        assert error.op == "cross_entropy" and error.argument == "target"


@SETTINGS
@given(class_target_case())
def test_nll_loss_raises_exactly_when_cpu_does(case: dict) -> None:
    log_probs = case["input"].log_softmax(0 if case["input"].dim() == 1 else 1)
    error = assert_same_outcome(
        lambda: F.nll_loss(
            log_probs,
            case["target"],
            weight=case["weight"],
            ignore_index=case["ignore_index"],
            reduction=case["reduction"],
        )
    )
    if error is not None:
        assert error.op == "nll_loss"


@SETTINGS
@given(st.integers(2, 5), st.booleans())
def test_probability_targets_are_never_index_checked(n_classes: int, smoothing: bool) -> None:
    """Float targets are class probabilities, not indices: whatever their values, the call goes through and
    gives the loss it gives without validators."""
    logits = torch.randn(3, n_classes)
    target = torch.randn(3, n_classes) * 5  # any float values, even negative: CPU accepts them
    label_smoothing = 0.1 if smoothing else 0.0
    plain = F.cross_entropy(logits, target, label_smoothing=label_smoothing)
    with validators():
        checked = F.cross_entropy(logits, target, label_smoothing=label_smoothing)
    assert torch.equal(checked, plain)


def test_cross_entropy_message_names_target_range_positions_and_the_fix() -> None:
    with validators(), pytest.raises(IndexError) as info:
        F.cross_entropy(torch.randn(4, 195), torch.tensor([3, 195, 7, 195]))
    error = info.value
    assert isinstance(error, ValidationIndexError)
    assert (error.op, error.argument, error.valid) == ("cross_entropy", "target", "0..194 (or ignore_index=-100)")
    assert error.n_bad == 2
    assert error.examples == [((1,), 195), ((3,), 195)]
    assert error.cause_id == "nll_loss_target_out_of_range"
    assert "make the last layer output 196 logits (out_features=196)" in error.hint
    text = str(error)
    assert text.startswith(
        "cross_entropy: target has 2 bad values; valid: 0..194 (or ignore_index=-100). "
        "First bad: target[1]=195, target[3]=195.\n"
    )
    assert "Likely fix: the labels reach 195 with 195 classes: if you have 196 classes" in text
    assert "\nIn general: " in text
    assert text.endswith(
        "(Caught by cudaassert validators: on a GPU this input triggers a device-side assert; raised as "
        "this Python error instead, so no GPU context is harmed.)"
    )


def test_voc_void_label_255_suggests_ignore_index_255_for_segmentation() -> None:
    mask = torch.zeros(1, 4, 4, dtype=torch.long)
    mask[0, 0, :] = 255
    with validators(), pytest.raises(ValidationIndexError) as info:
        torch.nn.CrossEntropyLoss()(torch.randn(1, 21, 4, 4), mask)
    error = info.value
    assert error.op == "nn.CrossEntropyLoss"
    assert error.cause_id == "nll_loss2d_target_out_of_range"
    assert error.n_bad == 4
    assert error.examples[0] == ((0, 0, 0), 255)
    assert "255 is the 'void' label of VOC-style segmentation masks: pass ignore_index=255 to the loss" in error.hint
    assert "First bad: target[0, 0, 0]=255, target[0, 0, 1]=255" in str(error)


def test_minus_100_with_another_ignore_index_says_so_and_reduction_none_picks_its_cause() -> None:
    with validators(), pytest.raises(ValidationIndexError) as info:
        F.cross_entropy(torch.randn(2, 3), torch.tensor([-100, 1]), ignore_index=255, reduction="none")
    error = info.value
    assert error.valid == "0..2 (or ignore_index=255)"
    assert error.cause_id == "nll_loss_target_out_of_range_no_reduce"
    assert error.hint == (
        "negative labels are only allowed as the loss's ignore_index (now 255): if -100 marks "
        "padding or unlabelled items, pass ignore_index=-100"
    )


def test_large_labels_suggest_remapping_and_more_than_five_bad_values_are_counted() -> None:
    with validators(), pytest.raises(ValidationIndexError) as info:
        F.cross_entropy(torch.randn(8, 3), torch.arange(100, 108))
    error = info.value
    assert error.n_bad == 8 and len(error.examples) == 5
    assert "(and 3 more)" in str(error)
    assert "remap the labels to 0..2 (for example torch.unique(labels, return_inverse=True))" in error.hint
    assert "out_features=108" in error.hint


def test_minus_one_labels_suggest_ignore_index_minus_one() -> None:
    with validators(), pytest.raises(ValidationIndexError) as info:
        F.nll_loss(torch.randn(2, 3), torch.tensor([-1, 0]))
    assert "if -1 marks padding or unlabelled items, pass ignore_index=-1" in info.value.hint


def test_validation_error_still_caught_by_a_cpu_style_except_index_error() -> None:
    caught = False
    with validators():
        try:
            F.cross_entropy(torch.randn(2, 3), torch.tensor([0, 3]))
        except IndexError:
            caught = True
    assert caught


# ---------------------------------------------------------------- binary_cross_entropy
unit_values = st.one_of(
    st.floats(0.0, 1.0),
    st.floats(-2.0, 3.0),
    st.sampled_from([0.0, 1.0, float("nan"), float("inf"), -float("inf"), 255.0]),
)


@SETTINGS
@given(st.lists(st.tuples(unit_values, unit_values), min_size=1, max_size=6), st.sampled_from(["mean", "none"]))
def test_binary_cross_entropy_raises_exactly_when_cpu_does(pairs: list, reduction: str) -> None:
    inp = torch.tensor([p for p, _ in pairs])
    target = torch.tensor([t for _, t in pairs])
    error = assert_same_outcome(lambda: F.binary_cross_entropy(inp, target, reduction=reduction))
    if error is not None:
        assert isinstance(error, ValidationRuntimeError)
        assert error.argument == ("input" if not bool(((inp >= 0) & (inp <= 1)).all()) else "target")


def test_bce_on_logits_suggests_bce_with_logits() -> None:
    with validators(), pytest.raises(RuntimeError) as info:
        torch.nn.BCELoss()(torch.tensor([0.5, 2.5, -1.0]), torch.tensor([0.0, 1.0, 1.0]))
    error = info.value
    assert isinstance(error, ValidationRuntimeError)
    assert (error.op, error.argument, error.n_bad) == ("nn.BCELoss", "input", 2)
    assert error.cause_id == "bce_input_out_of_range"
    assert "nn.BCEWithLogitsLoss" in error.hint and "torch.sigmoid" in error.hint
    assert str(error).startswith(
        "nn.BCELoss: input has 2 bad values; valid: [0, 1] (NaN is not allowed). First bad: input[1]=2.5, input[2]=-1."
    )


def test_bce_nan_input_and_mask_targets_get_their_own_hints() -> None:
    with validators(), pytest.raises(ValidationRuntimeError) as info:
        F.binary_cross_entropy(torch.tensor([float("nan"), 0.5]), torch.tensor([0.0, 1.0]))
    assert "the input holds NaN" in info.value.hint
    with validators(), pytest.raises(ValidationRuntimeError) as info:
        F.binary_cross_entropy(torch.tensor([0.2, 0.5]), torch.tensor([0.0, 255.0]))
    assert info.value.cause_id == "bce_target_out_of_range"
    assert "targets look like 0..255 mask pixels: divide by 255" in info.value.hint


def test_bce_with_logits_accepts_any_values() -> None:
    """No validator checks binary_cross_entropy_with_logits today, and none may reject its input: raw logits
    take any value (the [0, 1] rule is binary_cross_entropy's, whose hint sends users here)."""
    logits, target = torch.tensor([5.0, -7.0]), torch.tensor([0.0, 1.0])
    plain = F.binary_cross_entropy_with_logits(logits, target)
    with validators():
        checked = F.binary_cross_entropy_with_logits(logits, target)
    assert torch.equal(checked, plain)


# ---------------------------------------------------------------- ctc_loss
def ctc_reference_bad(targets: torch.Tensor, lengths: list[int], n_classes: int, blank: int) -> bool:
    rows = targets.tolist() if targets.dim() == 2 else [targets.tolist()]
    used = [row[:n] for row, n in zip(rows, lengths)] if targets.dim() == 2 else [rows[0][: sum(lengths)]]
    return any(not (0 <= v < n_classes) or v == blank for row in used for v in row)


@SETTINGS
@given(st.data())
def test_ctc_loss_raises_exactly_when_targets_leave_the_documented_range(data: Any) -> None:
    n_classes = data.draw(st.integers(2, 6))
    blank = data.draw(st.sampled_from([0, n_classes - 1]))
    batch, steps, max_len = 2, 12, 4
    lengths = data.draw(st.lists(st.integers(1, max_len), min_size=batch, max_size=batch))
    values = st.one_of(st.integers(0, n_classes - 1), st.integers(-2, n_classes + 2))
    padded = data.draw(st.booleans())
    if padded:
        rows = [data.draw(st.lists(values, min_size=max_len, max_size=max_len)) for _ in range(batch)]
        targets = torch.tensor(rows)
    else:
        targets = torch.tensor(data.draw(st.lists(values, min_size=sum(lengths), max_size=sum(lengths))))
    targets = targets.to(data.draw(st.sampled_from([torch.int64, torch.int32])))
    log_probs = torch.randn(steps, batch, n_classes).log_softmax(2)
    lengths_arg = data.draw(st.sampled_from(["list", "tensor"]))
    target_lengths = lengths if lengths_arg == "list" else torch.tensor(lengths)
    input_lengths = [steps] * batch if lengths_arg == "list" else torch.full((batch,), steps)
    expected_bad = ctc_reference_bad(targets, lengths, n_classes, blank)
    with validators():
        error, _ = outcome(lambda: F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=blank))
    assert isinstance(error, ValidationRuntimeError) == expected_bad, error
    if not expected_bad:
        assert error is None


def test_ctc_message_explains_blank_and_that_cpu_does_not_check() -> None:
    log_probs = torch.randn(10, 1, 5).log_softmax(2)
    with validators(), pytest.raises(ValidationRuntimeError) as info:
        F.ctc_loss(log_probs, torch.tensor([[0, 2, 7]]), [10], [3])
    error = info.value
    assert (error.op, error.argument, error.valid) == ("ctc_loss", "targets", "0..4 except the blank label 0")
    assert error.n_bad == 2 and error.examples == [((0, 0), 0), ((0, 2), 7)]
    assert "the targets contain the blank label 0, which CTC reserves" in error.hint
    assert "log_probs has C=5 classes but the targets reach 7" in error.hint
    assert "CPU PyTorch does not check this and silently returns a wrong loss" in error.hint


def test_ctc_padding_past_the_target_length_is_not_checked() -> None:
    """Padded targets are read only up to each target length: the -1 padding and the blank label 0 past it
    are not targets, so the call goes through and gives the loss it gives without validators."""
    log_probs = torch.randn(10, 2, 5).log_softmax(2)
    targets = torch.tensor([[1, 2, -1, -1], [3, 0, 0, 0]])
    plain = F.ctc_loss(log_probs, targets, [10, 10], [2, 1])
    with validators():
        checked = F.ctc_loss(log_probs, targets, [10, 10], [2, 1])
    assert torch.equal(checked, plain)
