"""Detection: every PyTorch wording is recognised, everything else is left alone."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from gpu_double import (
    DEVICE_ASSERT_WORDINGS,
    FOLLOW_ON_WORDINGS,
    NOT_OURS_WORDINGS,
    STICKY_WORDINGS,
    make_exception,
)

from cudaassert_ipy.diagnose.detection import Kind, classify, classify_text


@pytest.mark.parametrize("label", sorted(DEVICE_ASSERT_WORDINGS))
def test_every_device_assert_wording_is_a_device_assert(label):
    exc = make_exception(*DEVICE_ASSERT_WORDINGS[label])
    found = classify(exc)
    assert found is not None and found.kind is Kind.DEVICE_ASSERT
    assert found.kills_context


def test_accelerator_error_code_710_is_read_from_the_attribute():
    exc = make_exception(*DEVICE_ASSERT_WORDINGS["2.9+"])
    assert type(exc).__name__ == "AcceleratorError" and exc.error_code == 710  # torch.AcceleratorError from 2.8
    assert classify(exc).error_code == 710


def test_error_code_alone_is_enough_even_with_an_unknown_text():
    exc = make_exception("AcceleratorError", "CUDA error: something new in 2.14")
    exc.error_code = 710
    assert classify(exc).kind is Kind.DEVICE_ASSERT


def test_thc_error_number_is_read_from_the_text():
    exc = make_exception(*DEVICE_ASSERT_WORDINGS["1.9 conda THC (710)"])
    assert classify(exc).error_code == 710


@pytest.mark.parametrize("label", sorted(STICKY_WORDINGS))
def test_other_sticky_errors_are_sticky(label):
    found = classify(make_exception(*STICKY_WORDINGS[label]))
    assert found is not None and found.kind is Kind.STICKY and found.kills_context


@pytest.mark.parametrize("label", sorted(FOLLOW_ON_WORDINGS))
def test_library_execution_failures_are_follow_on_errors(label):
    found = classify(make_exception(*FOLLOW_ON_WORDINGS[label]))
    assert found is not None and found.kind is Kind.FOLLOW_ON


@pytest.mark.parametrize("label", sorted(NOT_OURS_WORDINGS))
def test_out_of_memory_invalid_argument_and_ordinary_errors_are_not_ours(label):
    assert classify(make_exception(*NOT_OURS_WORDINGS[label])) is None


def test_after_the_context_died_any_cuda_error_is_part_of_the_cascade():
    exc = make_exception(*NOT_OURS_WORDINGS["cublas not supported"])
    assert classify(exc) is None
    assert classify(exc, context_dead=True).kind is Kind.FOLLOW_ON
    assert classify(ValueError("x"), context_dead=True) is None


def test_the_chain_is_followed_through_cause_and_context():
    inner = make_exception(*DEVICE_ASSERT_WORDINGS["2.4-2.7"])
    try:
        try:
            raise inner
        except RuntimeError as e:
            raise ValueError("wrapper failed") from e
    except ValueError as outer:
        assert classify(outer).exception is inner
    try:
        try:
            raise inner
        except RuntimeError:
            raise KeyError("during handling")  # noqa: B904 (implicit __context__ on purpose)
    except KeyError as outer:
        assert classify(outer).kind is Kind.DEVICE_ASSERT


def test_a_cyclic_chain_terminates():
    a, b = RuntimeError("a"), RuntimeError("CUDA error: device-side assert triggered")
    a.__context__, b.__context__ = b, a
    assert classify(a).exception is b


def _raises(fn):
    try:
        fn()
    except Exception as e:  # the real CPU error
        return e
    raise AssertionError("expected an error")


CPU_TWINS = {
    "cross_entropy": (
        lambda: F.cross_entropy(torch.randn(4, 3), torch.tensor([0, 1, 2, 3])),
        "nll_loss_target_out_of_range",
        3,
    ),
    "cross_entropy negative": (
        lambda: F.cross_entropy(torch.randn(2, 3), torch.tensor([0, -1])),
        "nll_loss_target_out_of_range",
        -1,
    ),
    "segmentation 255": (
        lambda: F.cross_entropy(torch.randn(1, 3, 2, 2), torch.full((1, 2, 2), 255)),
        "nll_loss_target_out_of_range",
        255,
    ),
    "embedding": (lambda: F.embedding(torch.tensor([5]), torch.randn(3, 2)), "index_select_out_of_range", None),
    "index_select": (
        lambda: torch.index_select(torch.randn(3, 2), 0, torch.tensor([3])),
        "index_select_out_of_range",
        None,
    ),
    "getitem": (lambda: torch.randn(3)[torch.tensor([3])], "advanced_indexing_out_of_range_v1", 3),
    "gather": (
        lambda: torch.gather(torch.randn(3, 3), 1, torch.tensor([[5]])),
        "scatter_gather_index_out_of_range_v1",
        5,
    ),
    "scatter_": (lambda: torch.zeros(3).scatter_(0, torch.tensor([5]), 1.0), "scatter_gather_index_out_of_range_v1", 5),
    "take": (lambda: torch.take(torch.randn(3), torch.tensor([5])), "take_put_out_of_range", 5),
    "index_copy_": (
        lambda: torch.zeros(3).index_copy_(0, torch.tensor([5]), torch.ones(1)),
        "index_copy_out_of_range",
        5,
    ),
    "one_hot": (lambda: F.one_hot(torch.tensor([5]), 3), "scatter_gather_index_out_of_range_v1", None),
    "bce input": (
        lambda: F.binary_cross_entropy(torch.tensor([1.5]), torch.tensor([1.0])),
        "bce_input_out_of_range",
        None,
    ),
    "bce target": (
        lambda: F.binary_cross_entropy(torch.tensor([0.5]), torch.tensor([2.0])),
        "bce_target_out_of_range",
        None,
    ),
    "multinomial nan": (
        lambda: torch.multinomial(torch.tensor([float("nan"), 1.0]), 1),
        "multinomial_invalid_probs_async",
        None,
    ),
    "multinomial zero": (lambda: torch.multinomial(torch.tensor([0.0, 0.0]), 1), "multinomial_zero_sum_async", None),
    "bernoulli": (lambda: torch.bernoulli(torch.tensor([1.5])), "bernoulli_prob_out_of_range", None),
    "repeat_interleave": (
        lambda: torch.repeat_interleave(torch.tensor([-1, 2])),
        "repeat_interleave_negative_repeats",
        None,
    ),
    "embedding_bag": (
        lambda: F.embedding_bag(torch.tensor([5, 1]), torch.randn(3, 2), torch.tensor([0])),
        "embedding_bag_index_out_of_range",
        5,
    ),
    "embedding_bag max": (
        lambda: F.embedding_bag(torch.tensor([5, 1]), torch.randn(3, 2), torch.tensor([0, 1]), mode="max"),
        "embedding_bag_index_out_of_range",
        5,
    ),
    "max_unpool2d": (
        lambda: F.max_unpool2d(torch.randn(1, 1, 2, 2), torch.full((1, 1, 2, 2), 100), 2),
        "max_unpool2d_index_out_of_range",
        100,
    ),
    "max_unpool3d": (
        lambda: F.max_unpool3d(torch.randn(1, 1, 2, 2, 2), torch.full((1, 1, 2, 2, 2), 100), 2),
        "max_unpool3d_index_out_of_range",
        100,
    ),
    "_assert_async": (lambda: torch._assert_async(torch.tensor(0)), "assert_async_false", None),
    "masked_scatter_": (
        lambda: torch.zeros(3).masked_scatter_(torch.tensor([True] * 3), torch.ones(2)),
        "masked_scatter_source_too_small",
        None,
    ),
}


@pytest.mark.parametrize("label", sorted(CPU_TWINS))
def test_real_cpu_errors_are_recognised_as_twins_of_the_device_asserts(label):
    fn, cause_id, value = CPU_TWINS[label]
    found = classify(_raises(fn))
    assert found is not None and found.kind is Kind.CPU_TWIN
    assert found.twin.cause_id == cause_id
    assert found.twin.value == value
    assert not found.kills_context


def test_ordinary_torch_errors_are_not_twins():
    err = _raises(lambda: torch.randn(2, 3) @ torch.randn(2, 3))
    assert classify(err) is None


# --- issue #10: every wording real runs print, and errors that only surface an assertion -----------------------
# Texts as real runs printed them: the 0.3-era dtor report (NVIDIA/pix2pixHD#9), thrust's 1.x wording
# (nv-tlabs/GSCNN#27), the cuDNN/cuBLAS formats of aten/src/ATen/cuda/Exceptions.h; the Triton launcher's wording.
TRITON_ASSERT = "Triton Error [CUDA]: device-side assert triggered"
CUDNN_NOT_INITIALIZED = "cuDNN error: CUDNN_STATUS_NOT_INITIALIZED"
CUBLAS_FAILED = FOLLOW_ON_WORDINGS["cublas sgemm"][1]
THRUST_REDUCE = "reduce failed to synchronize: device-side assert triggered"
DTOR = "CUDA error after cudaEventDestroy in future dtor: device-side assert triggered"


@pytest.mark.parametrize(
    "text",
    [
        "cuda error: DEVICE-SIDE ASSERT TRIGGERED",
        "CUDA ERROR: Device-Side Assert Triggered",
        TRITON_ASSERT,
        THRUST_REDUCE,
        DTOR,
    ],
)
def test_device_assert_wordings_match_in_any_case_and_through_any_layer(text):
    found = classify(RuntimeError(text))
    assert found is not None and found.kind is Kind.DEVICE_ASSERT and not found.follow_on


def test_a_cudnn_not_initialized_alone_is_not_ours():
    assert classify(RuntimeError(CUDNN_NOT_INITIALIZED)) is None


@pytest.mark.parametrize(
    "text",
    [
        CUDNN_NOT_INITIALIZED,
        CUBLAS_FAILED,
        TRITON_ASSERT,
        THRUST_REDUCE,
        DTOR,
        STICKY_WORDINGS["illegal address 2.4"][1],
    ],
)
def test_with_an_assertion_line_in_the_same_cell_any_cuda_error_is_its_follow_on(text):
    found = classify(RuntimeError(text), assert_seen=True)
    assert found is not None and found.kind is Kind.DEVICE_ASSERT and found.kills_context
    assert found.follow_on
    assert found.note == (
        f"`RuntimeError: {text.splitlines()[0]}` is a follow-on error: the kernel assertion above killed the GPU "
        "context first, and this call was only the next one to touch it. Fix the assertion; this error goes away "
        "with it."
    )


@pytest.mark.parametrize("label", ["2.4-2.7", "2.9+", "0.x-1.x THC (59)"])
def test_pytorchs_own_assert_report_is_never_called_a_follow_on(label):
    found = classify(make_exception(*DEVICE_ASSERT_WORDINGS[label]), assert_seen=True)
    assert found.kind is Kind.DEVICE_ASSERT and not found.follow_on and found.note is None


def test_an_error_read_from_a_log_keeps_its_printed_type_name():
    found = classify_text("torch.AcceleratorError", DEVICE_ASSERT_WORDINGS["2.9+"][1])
    assert found is not None and found.kind is Kind.DEVICE_ASSERT
    assert found.first_line == "AcceleratorError: CUDA error: device-side assert triggered"
    assert isinstance(found.exception, RuntimeError)


def test_an_ordinary_error_read_from_a_log_is_not_ours():
    assert classify_text("ValueError", "could not convert string to float: 'abc'") is None
    assert classify_text("RuntimeError", CUDNN_NOT_INITIALIZED) is None
    assert classify_text("RuntimeError", CUDNN_NOT_INITIALIZED, assert_seen=True).follow_on
