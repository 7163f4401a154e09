"""Every printed form: printf's extra stdout line, ROCm's silence, unknown conditions, words hidden in a macro."""

from __future__ import annotations

from gpu_double import DEVICE_ASSERT_WORDINGS, STICKY_WORDINGS, make_exception
from helpers.causes import explain_one
from log_samples import CENSUS

from cudaassert_ipy.capture.assert_lines import scan
from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.causes.texts import NO_LINE, ROCM_NO_LINE
from cudaassert_ipy.diagnose.detection import classify_text
from cudaassert_ipy.diagnose.diagnosis import Diagnosis, diagnose
from cudaassert_ipy.diagnose.evidence import Evidence, collect
from cudaassert_ipy.diagnose.pipeline import read_failure

LINE = {e["id"]: e["line"] for e in CENSUS}
# CUDA_KERNEL_ASSERT_PRINTF (repeat_interleave, torchtitan#3335): the stdout line, then __assert_fail's on stderr
PRINTF = (
    "[rank0]:[CUDA_KERNEL_ASSERT] /opt/pytorch/pytorch/aten/src/ATen/native/cuda/Repeat.cu:20: "
    "compute_cuda_kernel: block: [3,0,0], thread: [416,0,0]: Assertion failed: `result_size == "
    "cumsum_ptr[size - 1]`: Invalid input! In `repeat_interleave`, the `output_size` argument (30364) must be "
    "the same as the sum of the elements in the `repeats` tensor (30365)."
)
CLASSIC = (
    "[rank0]:/opt/pytorch/pytorch/aten/src/ATen/native/cuda/Repeat.cu:20: compute_cuda_kernel: block: [3,0,0], "
    "thread: [416,0,0] Assertion `result_size == cumsum_ptr[size - 1]` failed."
)
UNKNOWN = (
    "/src/ext/my_kernels.cu:77: scatter_rows: block: [{b},0,0], thread: [{t},0,0] Assertion `row < n_rows` failed."
)


def _live(error: BaseException, text: str, cell: str = "") -> Diagnosis:
    detection, sites = read_failure(error, text)
    assert detection is not None
    return diagnose(collect(detection, sites, cell, user_ns={}))


def test_the_printf_line_on_stdout_and_the_classic_line_fold_into_one_site_with_its_message() -> None:
    (site,) = scan(PRINTF + "\n" + CLASSIC + "\n")
    assert (site.count, site.threads, site.blocks) == (2, 1, 1)
    assert site.message is not None and site.message.startswith("Invalid input! In `repeat_interleave`")


def test_the_printf_message_gives_both_sizes_and_the_exact_output_size() -> None:
    d = _live(make_exception(*DEVICE_ASSERT_WORDINGS["2.9+"]), PRINTF + "\n" + CLASSIC + "\n")
    assert (d.cause_id, d.title) == (
        "repeat_interleave_output_size_mismatch",
        "repeat_interleave output_size does not match",
    )
    assert d.specific == (
        "repeat_interleave got output_size=30364, but the repeats add up to 30365. Likely fix: "
        + hints.OUTPUT_SIZE.format(required=30365)
        + "."
    )
    assert ("output_size", "30364 (repeats.sum() = 30365)") in d.facts


def test_the_new_repeat_interleave_text_names_negative_repeats_or_a_small_output_size() -> None:
    d = explain_one(LINE["repeat_interleave_invalid_repeats_v2"])
    assert (d.cause_id, d.title) == (
        "repeat_interleave_invalid_repeats_v2",
        "bad repeats or output_size in repeat_interleave",
    )
    assert "output_size=int(repeats.sum())" in d.fix


def test_rocm_builds_print_no_line_and_the_report_says_so_from_the_exception() -> None:
    for message in ("HIP error: unspecified launch failure", "HIP error: device-side assert triggered"):
        detection = classify_text("RuntimeError", message)
        assert detection is not None
        d = diagnose(Evidence(detection=detection))
        assert (d.title, d.fix) == (ROCM_NO_LINE.title, ROCM_NO_LINE.fix), message
        assert "No log holds the assertion line: it was never printed." in d.explanation
    cuda = classify_text(*DEVICE_ASSERT_WORDINGS["2.9+"])
    assert cuda is not None and diagnose(Evidence(detection=cuda)).title == NO_LINE.title
    crash = classify_text(*STICKY_WORDINGS["illegal address 2.4"])
    assert crash is not None and diagnose(Evidence(detection=crash)).title == "illegal memory access on the GPU"


def test_a_condition_not_in_the_catalogue_still_folds_and_is_quoted_in_the_kernels_own_words() -> None:
    text = "\n".join(UNKNOWN.format(b=b, t=t) for b in range(3) for t in range(4))
    d = explain_one(text)
    assert d.cause_id == "unknown_kernel_assert" and d.title == "a kernel assertion failed (not in the catalogue)"
    assert d.specific == (
        "Not in the catalogue. The kernel reported: `row < n_rows` failed in src/ext/my_kernels.cu. "
        "Kernel function: `scatter_rows`."
    )
    assert d.assert_sites == ("my_kernels.cu:77 scatter_rows: `row < n_rows` failed in 12 threads of 3 blocks",)
    live = _live(make_exception(*DEVICE_ASSERT_WORDINGS["2.9+"]), text)
    assert live.specific == d.specific and live.assert_sites == d.assert_sites


def test_the_words_hidden_behind_cond_and_message_are_explained_from_the_op_in_the_cell() -> None:
    d = explain_one(LINE["sparse_compressed_invariant_violated"])
    assert d.title == "invalid indices in a compressed sparse tensor (CSR/CSC/BSR/BSC)"
    assert "`cond && message`" in d.explanation and "crow_indices" in d.explanation
    cell = "A = torch.sparse_csr_tensor(crow, col, val, size=(4, 4), device='cuda', check_invariants=True)"
    live = _live(make_exception(*DEVICE_ASSERT_WORDINGS["2.9+"]), LINE["sparse_compressed_invariant_violated"], cell)
    assert live.op == "sparse_csr_tensor"
    assert live.likely_fix == hints.SPARSE_ON_CPU.format(call="sparse_csr_tensor")


def test_a_hip_build_with_kernel_asserts_prints_the_new_texts_in_its_own_format() -> None:
    hip = (
        "/pytorch/aten/src/ATen/native/hip/Distributions.hip:49: operator(): Device-side assertion "
        '`lambda >= 0 && "invalid Poisson rate, expected rate to be non-negative"\' failed.'
    )
    assert explain_one(hip).cause_id == "poisson_negative_rate"


def test_fractional_max_pool_and_segment_reduce_name_their_causes() -> None:
    expected = {
        "fractional_max_pool2d_backward_bad_index": "FractionalMaxPool2d found no maximum (NaN in its input)",
        "fractional_max_pool2d_backward_index_row": "FractionalMaxPool2d indices do not match its input",
        "fractional_max_pool3d_backward_bad_index": "FractionalMaxPool3d found no maximum (NaN in its input)",
        "fractional_max_pool3d_backward_index_plane": "FractionalMaxPool3d indices do not match its input",
        "segment_reduce_negative_length": "negative segment length in segment_reduce",
        "segment_reduce_mean_negative_length": "negative segment length in segment_reduce",
    }
    for cause_id, title in expected.items():
        d = explain_one(LINE[cause_id])
        assert (d.cause_id, d.title) == (cause_id, title)
        assert "torch.isfinite" in d.fix or "lengths >= 0" in d.fix


def test_a_device_assert_in_a_live_cell_with_only_an_empty_condition_line_is_read() -> None:
    d = _live(make_exception(*DEVICE_ASSERT_WORDINGS["2.9+"]), "[rank0]:" + LINE["assert_async_empty_message"] + "\n")
    assert d.cause_id == "assert_async_empty_message"
