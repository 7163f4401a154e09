"""Kernel assertion lines: every printed format (listed with examples in docs/causes.md) and lines users posted in
public issue threads (S1-S12), then folding."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cudaassert_ipy.capture.assert_lines import (
    AssertLine,
    AssertSite,
    fold,
    normalise_file,
    parse_line,
    parse_lines,
    scan,
    scan_all,
    short_function,
)

CATALOGUE = Path(__file__).resolve().parents[1] / "cudaassert_ipy" / "diagnose" / "causes" / "device_asserts.json"
LOSS_LINE = (
    "../aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: "
    "block: [{b},0,0], thread: [{t},0,0] Assertion `t >= 0 && t < n_classes` failed."
)
GATHER_LINE = (
    "/pytorch/aten/src/ATen/native/cuda/ScatterGatherKernel.cu:115: operator(): block: [{b},0,0], "
    'thread: [{t},0,0] Assertion `idx_dim >= 0 && idx_dim < index_size && "index out of bounds"` failed.'
)

# (name, text, expected records as (file, line, function, block, thread, condition, message, printf))
SAMPLES = [
    (
        "S1 THCUNN pretty signature followed by a dtor message",
        "(...)\n/opt/conda/conda-bld/pytorch_1512386481460/work/torch/lib/THCUNN/BCECriterion.cu:30: Acctype "
        "bce_functor<Dtype, Acctype>::operator()(Tuple) [with Tuple = thrust::tuple<float, float, "
        "thrust::null_type, thrust::null_type, thrust::null_type, thrust::null_type, thrust::null_type, "
        "thrust::null_type, thrust::null_type, thrust::null_type>, Dtype = float, Acctype = float]: block: "
        "[16,0,0], thread: [31,0,0] Assertion `input >= 0. && input <= 1.` failed.\n"
        "CUDA error after cudaEventDestroy in future dtor: device-side assert triggeredTraceback (most recent "
        'call last):\n  File "train.py", line 56, in <module>\n',
        [
            (
                "torch/lib/THCUNN/BCECriterion.cu",
                30,
                "Acctype bce_functor<Dtype, Acctype>::operator()(Tuple) [with Tuple = thrust::tuple<float, float, "
                "thrust::null_type, thrust::null_type, thrust::null_type, thrust::null_type, thrust::null_type, "
                "thrust::null_type, thrust::null_type, thrust::null_type>, Dtype = float, Acctype = float]",
                (16, 0, 0),
                (31, 0, 0),
                "input >= 0. && input <= 1.",
                None,
                False,
            )
        ],
    ),
    (
        "S3 Windows line wrapped by the console inside 'thread'",
        "C:/w/1/s/windows/pytorch/aten/src/THCUNN/BCECriterion.cu:42: block: [0,0,0], thr\n"
        "ead: [215,0,0] Assertion `input >= 0. && input <= 1.` failed.\n[...]\nTraceback (most recent call last):\n",
        [
            (
                "aten/src/THCUNN/BCECriterion.cu",
                42,
                None,
                (0, 0, 0),
                (215, 0, 0),
                "input >= 0. && input <= 1.",
                None,
                False,
            )
        ],
    ),
    (
        "S4 line printed after the exception",
        "**RuntimeError: CUDA error: device-side assert triggered**\nCUDA kernel errors might be asynchronously "
        "reported at some other API call,so the stacktrace below might be incorrect.\nFor debugging consider "
        "passing CUDA_LAUNCH_BLOCKING=1.\n" + GATHER_LINE.format(b=0, t=1) + "\n",
        [
            (
                "aten/src/ATen/native/cuda/ScatterGatherKernel.cu",
                115,
                "operator()",
                (0, 0, 0),
                (1, 0, 0),
                'idx_dim >= 0 && idx_dim < index_size && "index out of bounds"',
                None,
                False,
            )
        ],
    ),
    (
        "S5 torchrun traceback then one whole and one truncated line",
        "[rank0]: RuntimeError: CUDA error: device-side assert triggered\n"
        "[rank0]: Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n\n"
        + LOSS_LINE.format(b=0, t=0)
        + "\n../aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], "
        "t[...]\n",
        [
            (
                "aten/src/ATen/native/cuda/Loss.cu",
                250,
                "nll_loss_forward_reduce_cuda_kernel_2d",
                (0, 0, 0),
                (0, 0, 0),
                "t >= 0 && t < n_classes",
                None,
                False,
            )
        ],
    ),
    (
        "S6 glued to model output, condition with backticks",
        "Chat: 你能做什么？\n您好！有关 inherent capabilities, 我能够帮助您解答/pytorch/aten/src/ATen/native/cuda/"
        "TensorCompare.cu:110: _assert_async_cuda_kernel: block: [0,0,0], thread: [0,0,0] Assertion `probability "
        "tensor contains either `inf`, `nan` or element < 0` failed.\nTraceback (most recent call last):\n",
        [
            (
                "aten/src/ATen/native/cuda/TensorCompare.cu",
                110,
                "_assert_async_cuda_kernel",
                (0, 0, 0),
                (0, 0, 0),
                "probability tensor contains either `inf`, `nan` or element < 0",
                None,
                False,
            )
        ],
    ),
    (
        "S8 Windows wheel with backslashes and no function",
        "C:\\actions-runner\\_work\\pytorch\\pytorch\\pytorch\\aten\\src\\ATen\\native\\cuda\\TensorCompare.cu:112: "
        "block: [0,0,0], thread: [0,0,0] Assertion `input[0] != 0` failed.\n",
        [
            (
                "aten/src/ATen/native/cuda/TensorCompare.cu",
                112,
                None,
                (0, 0, 0),
                (0, 0, 0),
                "input[0] != 0",
                None,
                False,
            )
        ],
    ),
    (
        "S9 printf form on stdout with a rank prefix and a message",
        "[rank0]:[CUDA_KERNEL_ASSERT] /opt/pytorch/pytorch/aten/src/ATen/native/cuda/Repeat.cu:20: "
        "compute_cuda_kernel: block: [3,0,0], thread: [416,0,0]: Assertion failed: `result_size == "
        "cumsum_ptr[size - 1]`: Invalid input! In `repeat_interleave`, the `output_size` argument (30364) must be "
        "the same as the sum of the elements in the `repeats` tensor (30365).\n",
        [
            (
                "aten/src/ATen/native/cuda/Repeat.cu",
                20,
                "compute_cuda_kernel",
                (3, 0, 0),
                (416, 0, 0),
                "result_size == cumsum_ptr[size - 1]",
                "Invalid input! In `repeat_interleave`, the `output_size` argument (30364) must be the same as the "
                "sum of the elements in the `repeats` tensor (30365).",
                True,
            )
        ],
    ),
    (
        "S10 interleaved threads: nothing whole, so nothing is invented",
        ",0,0/pytorch/aten/src/ATen/native/cuda/ScatterGatherKernel.cu], thread: [60,0:115,0], thread: [16: "
        'operator(),0,0: block: [12] Assertion `idx_dim >= 0 && idx_dim < index_size && "index out of bounds",0,0'
        '` failed.\n] Assertion `idx_dim >= 0 && idx_dim < index_size && "index out of bounds",0/pytorch/aten/src/'
        "ATen/native/cuda/ScatterGatherKernel.cu` failed.\n",
        [],
    ),
    (
        "S11 Inductor Triton kernel with function unknown",
        "/tmp/torchinductor_dberard/3h/c3hlb22fpptebupstsuhl6kexa6z3upgbnyxln7c24gfcr5747iu.py:30: unknown: "
        "block: [0,0,0], thread: [10,0,0] Assertion `index out of bounds: 0 <= tmp5 < 4` failed.\n",
        [
            (
                "torchinductor_dberard/3h/c3hlb22fpptebupstsuhl6kexa6z3upgbnyxln7c24gfcr5747iu.py",
                30,
                "unknown",
                (0, 0, 0),
                (10, 0, 0),
                "index out of bounds: 0 <= tmp5 < 4",
                None,
                False,
            )
        ],
    ),
    (
        "1.4.0 conda lambda function name",
        "/opt/conda/conda-bld/pytorch_1579040055865/work/aten/src/ATen/native/cuda/IndexKernel.cu:60: lambda "
        "[](int)->auto::operator()(int)->auto: block: [0,0,0], thread: [48,0,0] Assertion `index >= -sizes[i] && "
        'index < sizes[i] && "index out of bounds"` failed.',
        [
            (
                "aten/src/ATen/native/cuda/IndexKernel.cu",
                60,
                "lambda [](int)->auto::operator()(int)->auto",
                (0, 0, 0),
                (48, 0, 0),
                'index >= -sizes[i] && index < sizes[i] && "index out of bounds"',
                None,
                False,
            )
        ],
    ),
    (
        "Windows builder wheel",
        "C:\\actions-runner\\_work\\pytorch\\pytorch\\builder\\windows\\pytorch\\aten\\src\\ATen\\native\\cuda\\"
        "IndexKernel.cu:91: block: [0,0,0], thread: [11,0,0] Assertion `index >= -sizes[i] && index < sizes[i] && "
        '"index out of bounds"` failed.',
        [
            (
                "aten/src/ATen/native/cuda/IndexKernel.cu",
                91,
                None,
                (0, 0, 0),
                (11, 0, 0),
                'index >= -sizes[i] && index < sizes[i] && "index out of bounds"',
                None,
                False,
            )
        ],
    ),
    (
        "2.8 vectorized gather",
        "/pytorch/aten/src/ATen/native/cuda/IndexKernelUtils.cu:16: vectorized_gather_kernel: block: [963,0,0], "
        'thread: [90,0,0] Assertion `ind >=0 && ind < ind_dim_size && "vectorized gather kernel index out of '
        'bounds"` failed.',
        [
            (
                "aten/src/ATen/native/cuda/IndexKernelUtils.cu",
                16,
                "vectorized_gather_kernel",
                (963, 0, 0),
                (90, 0, 0),
                'ind >=0 && ind < ind_dim_size && "vectorized gather kernel index out of bounds"',
                None,
                False,
            )
        ],
    ),
    (
        "0.x THC template signature seen from a Jupyter kernel",
        "/b/wheel/pytorch-src/torch/lib/THC/THCTensorIndex.cu:321: void indexSelectLargeIndex(...) [with T = "
        "float, IndexType = unsigned int, DstDim = 2, SrcDim = 2, IdxDim = -2]: block: [18,0,0], thread: "
        "[64,0,0] Assertion `srcIndex < srcSelectDimSize` failed.",
        [
            (
                "torch/lib/THC/THCTensorIndex.cu",
                321,
                "void indexSelectLargeIndex(...) [with T = float, IndexType = unsigned int, DstDim = 2, SrcDim = 2, "
                "IdxDim = -2]",
                (18, 0, 0),
                (64, 0, 0),
                "srcIndex < srcSelectDimSize",
                None,
                False,
            )
        ],
    ),
]


def _facts(line: AssertLine) -> tuple:
    return (
        line.file,
        line.line,
        line.function,
        line.block,
        line.thread,
        line.condition,
        line.message,
        line.printf,
    )


@pytest.mark.parametrize(("text", "expected"), [s[1:] for s in SAMPLES], ids=[s[0] for s in SAMPLES])
def test_every_documented_sample_parses_to_exactly_its_records(text: str, expected: list) -> None:
    assert [_facts(line) for line in parse_lines(text)] == expected


def _catalogue() -> list:
    return [e for e in json.loads(CATALOGUE.read_text(encoding="utf-8")) if e.get("sample_stderr_line")]


@pytest.mark.parametrize("entry", _catalogue(), ids=lambda e: e["id"])
def test_every_catalogue_sample_line_yields_its_catalogued_condition(entry: dict) -> None:
    line = parse_line(entry["sample_stderr_line"])
    assert line is not None
    allowed = [entry["condition"], *entry.get("condition_variants", [])]
    regex = entry.get("condition_regex")
    assert line.condition in allowed or (regex is not None and re.fullmatch(regex, line.condition))
    kernel_files = [entry["kernel_file"], *entry.get("kernel_file_variants", [])]
    if line.file.startswith("torchinductor_"):
        assert all("torchinductor_" in k for k in kernel_files)
    else:
        assert any(line.file.rsplit("/", 1)[-1] in k for k in kernel_files), kernel_files
    assert line.function is None or line.function in entry["kernel_functions"] or line.function == "operator()"


def test_the_catalogue_has_sample_lines_to_test() -> None:
    assert len(_catalogue()) >= 20


@pytest.mark.parametrize(
    "prefix",
    ["[rank0]:", "[rank3]: ", "[1,0]<stderr>:", "(WorkerDict pid=611035) ", "2025-01-01 12:00:00 ", "\x1b[31m"],
)
def test_launcher_prefixes_are_ignored_and_left_out_of_raw(prefix: str) -> None:
    line = parse_line(prefix + LOSS_LINE.format(b=2, t=7))
    assert line is not None
    assert (line.path, line.block, line.thread) == ("../aten/src/ATen/native/cuda/Loss.cu", (2, 0, 0), (7, 0, 0))
    assert line.raw == LOSS_LINE.format(b=2, t=7)


def test_printf_form_without_a_message_keeps_the_condition() -> None:
    line = parse_line(
        "[CUDA_KERNEL_ASSERT] /pytorch/aten/src/ATen/native/cuda/Repeat.cu:20: compute_cuda_kernel: "
        "block: [0,0,0], thread: [1,0,0]: Assertion failed: `repeat >= 0`"
    )
    assert line is not None and (line.condition, line.message, line.printf) == ("repeat >= 0", None, True)


def test_mixed_slash_windows_conda_path_is_normalised() -> None:
    line = parse_line(
        "C:/cb/pytorch_1000000000000/work\\c10/core/DynamicCast.h:78: block: [34,0,0], thread: [110,0,0] "
        "Assertion `false` failed."
    )
    assert line is not None and (line.file, line.line, line.function) == ("c10/core/DynamicCast.h", 78, None)


def test_long_runs_of_spaces_in_a_condition_are_collapsed() -> None:
    line = parse_line(
        "../aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [86,0,0], thread: [28,0,0] Assertion "
        '`index >= -sizes[i] && index < sizes[i]                                           && "index out of bounds"`'
        " failed."
    )
    assert line is not None
    assert line.condition == 'index >= -sizes[i] && index < sizes[i] && "index out of bounds"'


def test_two_records_glued_on_one_line_are_both_recovered() -> None:
    text = LOSS_LINE.format(b=0, t=1) + "noise" + LOSS_LINE.format(b=0, t=2) + "\n"
    assert [line.thread for line in parse_lines(text)] == [(1, 0, 0), (2, 0, 0)]
    assert {line.condition for line in parse_lines(text)} == {"t >= 0 && t < n_classes"}


def test_a_whole_record_between_garbage_is_recovered_and_the_garbage_is_not() -> None:
    text = "],0,0] Assertion `x` failed.garbage " + LOSS_LINE.format(b=1, t=1) + " ,0,0] thread: [5\n] Assertion `y\n"
    assert [(line.condition, line.thread) for line in parse_lines(text)] == [("t >= 0 && t < n_classes", (1, 0, 0))]


def test_a_wrapped_line_already_parsed_is_not_counted_twice() -> None:
    text = LOSS_LINE.format(b=0, t=0) + "\n] Assertion `junk` failed.\n"
    assert len(parse_lines(text)) == 1


@pytest.mark.parametrize(
    "text",
    [
        "",
        "epoch 1: loss=0.3\nAssertionError: expected 3\n",
        "RuntimeError: CUDA error: device-side assert triggered\nCompile with `TORCH_USE_CUDA_DSA` to enable "
        "device-side assertions.\n",
        "python: foo.c:12: main: Assertion `x > 0' failed.\n",
        "Loss.cu:250: f: block: [0,0,0], thread: [0,0,0] Assertion `t >= 0",
        "\x00\xff" * 100,
        "Assertion " * 1000,
    ],
    ids=["empty", "python-assert", "host-error", "host-glibc-assert", "truncated", "binary", "repeated-word"],
)
def test_unrelated_stderr_noise_yields_nothing(text: str) -> None:
    assert parse_lines(text) == []
    assert scan(text) == []


def test_5000_lines_from_64_threads_of_many_blocks_fold_into_one_site() -> None:
    lines = [LOSS_LINE.format(b=i // 64, t=i % 64) for i in range(5000)]
    (site,) = scan("\n".join(lines))
    assert (site.count, site.threads, site.blocks) == (5000, 5000, 79)
    assert site.first.thread == (0, 0, 0)
    assert site.summary() == (
        "Loss.cu:250 nll_loss_forward_reduce_cuda_kernel_2d: `t >= 0 && t < n_classes` failed in 5000 threads of "
        "79 blocks"
    )


def test_repeated_lines_count_as_seen_but_not_as_new_threads() -> None:
    lines = [LOSS_LINE.format(b=b, t=t) for _ in range(3) for b in range(2) for t in range(64)]
    (site,) = fold(parse_lines("\n".join(lines)))
    assert (site.count, site.threads, site.blocks) == (384, 128, 2)
    assert site.summary().endswith("failed in 128 threads of 2 blocks")


def test_two_interleaved_sites_fold_apart_in_first_seen_order() -> None:
    text = "\n".join((GATHER_LINE if i % 3 == 0 else LOSS_LINE).format(b=i % 2, t=i % 64) for i in range(1, 301))
    loss, gather = scan(text)
    assert (loss.file, loss.count, loss.threads, loss.blocks) == ("aten/src/ATen/native/cuda/Loss.cu", 200, 64, 2)
    assert (gather.function, gather.count, gather.threads, gather.blocks) == ("operator()", 100, 64, 2)


def test_summary_is_singular_for_one_thread_and_includes_the_printf_message() -> None:
    stdout = (
        "[CUDA_KERNEL_ASSERT] /pytorch/aten/src/ATen/native/cuda/Repeat.cu:20: compute_cuda_kernel: block: "
        "[3,0,0], thread: [416,0,0]: Assertion failed: `result_size == cumsum_ptr[size - 1]`: Invalid input!"
    )
    stderr = (
        "/pytorch/aten/src/ATen/native/cuda/Repeat.cu:20: compute_cuda_kernel: block: [3,0,0], thread: "
        "[416,0,0] Assertion `result_size == cumsum_ptr[size - 1]` failed."
    )
    (site,) = scan(stderr + "\n" + stdout + "\n")
    assert (site.count, site.threads, site.message, site.first.printf) == (2, 1, "Invalid input!", False)
    assert site.summary() == (
        "Repeat.cu:20 compute_cuda_kernel: `result_size == cumsum_ptr[size - 1]` failed in 1 thread of 1 block: "
        "Invalid input!"
    )


def test_summary_without_a_function_names_file_and_line_only() -> None:
    (site,) = scan(SAMPLES[5][1])
    assert site.summary() == "TensorCompare.cu:112: `input[0] != 0` failed in 1 thread of 1 block"


def test_fold_agrees_with_scan() -> None:
    text = "\n".join(s[1] for s in SAMPLES)
    assert fold(parse_lines(text)) == scan(text)
    assert all(isinstance(site, AssertSite) for site in scan(text))


@pytest.mark.parametrize(
    ("function", "short"),
    [
        ("void indexSelectLargeIndex(TensorInfo<T, IndexType>, long) [with T = float]", "indexSelectLargeIndex"),
        (
            "Acctype bce_functor<Dtype, Acctype>::operator()(Tuple) [with Tuple = x]",
            "bce_functor<Dtype, Acctype>::operator()",
        ),
        ("lambda [](int)->auto::operator()(int)->auto", "lambda"),
        ("operator()", "operator()"),
        ("nll_loss2d_forward_kernel", "nll_loss2d_forward_kernel"),
        (None, None),
    ],
)
def test_short_function_keeps_only_the_kernel_name(function: str | None, short: str | None) -> None:
    assert short_function(function) == short


@pytest.mark.parametrize(
    ("path", "file"),
    [
        ("/pytorch/aten/src/ATen/native/cuda/Loss.cu", "aten/src/ATen/native/cuda/Loss.cu"),
        ("/tmp/pip-req-build-4baxydiv/aten/src/ATen/native/cuda/Loss.cu", "aten/src/ATen/native/cuda/Loss.cu"),
        ("C:\\cb\\pytorch_1000000000000\\work\\aten\\src\\THC\\THCTensorIndex.cu", "aten/src/THC/THCTensorIndex.cu"),
        ("/opt/conda/conda-bld/pytorch_1/work/torch/lib/THCUNN/BCECriterion.cu", "torch/lib/THCUNN/BCECriterion.cu"),
        ("/home/me/ext/lib/kernels/my.cu", "lib/kernels/my.cu"),
        ("../csrc/my_kernel.cu", "csrc/my_kernel.cu"),
        ("/tmp/torchinductor_root/ab/cabcdef.py", "torchinductor_root/ab/cabcdef.py"),
    ],
)
def test_normalise_file_keeps_the_build_independent_suffix(path: str, file: str) -> None:
    assert normalise_file(path) == file


# --- issue #10: what real processes write ---------------------------------------------------------------------
# Triton without debug info (public log: a tqdm bar with no newline, then Triton's device_assert line).
TRITON_NO_DEBUG = (
    " 99%|██████████████████████  | 987/999 [00:22<00:00, 131.15it/s]unknown:0: unknown: block: [0,0,0], "
    "thread: [32,0,0] Assertion `index out of bounds: 0 <= tmp42 < 1024` failed.\n"
    "unknown:0: unknown: block: [0,0,0], thread: [33,0,0] Assertion `index out of bounds: 0 <= tmp42 < 1024` failed.\n"
)
# Triton takes the location of the Python frame current when the kernel was generated.
TRITON_FROZEN = (
    "<frozen importlib._bootstrap>:488: unknown: block: [0,0,0], thread: [3,0,0] Assertion `index out of bounds: "
    "0 <= tmp3 < 50257` failed.\n"
)
# ROCm/HIP's device __assert_fail: fmt "%s:%u: %s: Device-side assertion `%s' failed.\n" (no block, no thread).
HIP_LINE = (
    "/pytorch/aten/src/ATen/native/hip/Loss.hip:250: nll_loss_forward_reduce_cuda_kernel_2d: Device-side "
    "assertion `t >= 0 && t < n_classes' failed.\n"
)


def test_a_triton_assert_without_debug_info_after_a_tqdm_bar_folds_into_one_site() -> None:
    (site,) = scan(TRITON_NO_DEBUG)
    assert (site.file, site.line, site.condition, site.threads) == (
        "unknown",
        0,
        "index out of bounds: 0 <= tmp42 < 1024",
        2,
    )
    assert site.first.raw.startswith("unknown:0: unknown: block: [0,0,0]")
    assert site.summary() == (
        "Triton kernel (no source location): `index out of bounds: 0 <= tmp42 < 1024` failed in 2 threads of 1 block"
    )


def test_a_triton_assert_located_at_a_frozen_importlib_frame_is_read() -> None:
    line = parse_line(TRITON_FROZEN)
    assert line is not None
    assert (line.path, line.line, line.function, line.condition) == (
        "<frozen importlib._bootstrap>",
        488,
        "unknown",
        "index out of bounds: 0 <= tmp3 < 50257",
    )
    assert scan(TRITON_FROZEN)[0].where == "Triton kernel (no source location)"


def test_a_rocm_hip_device_side_assertion_is_read_and_counted_in_times() -> None:
    (site,) = scan(HIP_LINE * 3)
    assert (site.file, site.line, site.condition, site.count) == (
        "aten/src/ATen/native/hip/Loss.hip",
        250,
        "t >= 0 && t < n_classes",
        3,
    )
    assert site.summary() == (
        "Loss.hip:250 nll_loss_forward_reduce_cuda_kernel_2d: `t >= 0 && t < n_classes` failed 3 times"
    )


@pytest.mark.parametrize(
    "prefix",
    [
        "Epoch 1:  45%|████▌     | 45/100 [00:03<00:14,  3.81it/s]",
        "[rank3]:",
        "[rank0]:[E509 16:18:30.801728316 ProcessGroupNCCL.cpp:1895] ",
        "(RayTrainWorker pid=611035) ",
        "1234:",
        "train.log:1234:",
        "2024-05-01T12:00:00.123Z ERROR ",
        "[2024-05-01 12:00:00,123][ERROR] ",
        "E0501 12:00:00.123456 1234 trainer.py:88] ",
    ],
)
def test_glued_prefixes_stay_out_of_the_path(prefix: str) -> None:
    line = parse_line(prefix + LOSS_LINE.format(b=1, t=2))
    assert line is not None
    assert (line.path, line.file, line.line) == (
        "../aten/src/ATen/native/cuda/Loss.cu",
        "aten/src/ATen/native/cuda/Loss.cu",
        250,
    )
    assert line.raw == LOSS_LINE.format(b=1, t=2)


def test_text_glued_after_the_record_is_left_out() -> None:
    line = parse_line(LOSS_LINE.format(b=0, t=0) + " terminate called after throwing an instance of 'c10::Error'")
    assert line is not None and line.raw == LOSS_LINE.format(b=0, t=0)


def test_a_file_name_spliced_from_another_process_does_not_become_the_site() -> None:
    spliced = "/pytorch/aten/src/ATen/native/cuda/ScatterGatherKer" + LOSS_LINE.format(b=0, t=3)
    (site,) = scan(spliced)
    assert (site.file, site.line, site.function) == (
        "aten/src/ATen/native/cuda/Loss.cu",
        250,
        "nll_loss_forward_reduce_cuda_kernel_2d",
    )


def test_a_kernel_name_cut_by_another_processs_line_is_replaced_by_the_whole_one() -> None:
    spliced = "../aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forw" + LOSS_LINE.format(b=0, t=4)
    (site,) = scan(spliced)
    assert site.function == "nll_loss_forward_reduce_cuda_kernel_2d"


def test_a_condition_spliced_with_another_writers_text_is_an_orphan_never_a_site() -> None:
    result = scan_all(SAMPLES[7][1])  # S10: fairseq, several threads spliced mid-token
    assert result.sites == []
    assert [o.fragment for o in result.orphans] == [
        'idx_dim >= 0 && idx_dim < index_size && "index out of bounds",0,0',
        'idx_dim >= 0 && idx_dim < index_size && "index out of bounds",0/pytorch/aten/src/ATen/native/cuda/'
        "ScatterGatherKernel.cu",
    ]


def test_a_whole_record_and_a_spliced_one_on_one_line_give_one_site_and_one_orphan() -> None:
    line = LOSS_LINE.format(b=0, t=1) + LOSS_LINE.format(b=0, t=2).replace("n_classes`", "n_cl,0,0asses`")
    result = scan_all(line)
    assert [(s.condition, s.count) for s in result.sites] == [("t >= 0 && t < n_classes", 1)]
    assert [o.fragment for o in result.orphans] == ["t >= 0 && t < n_cl,0,0asses"]


def test_a_truncated_record_is_reported_as_unreadable() -> None:
    result = scan_all(SAMPLES[3][1])  # S5: one whole line, one cut at "t[...]"
    assert len(result.sites) == 1 and result.records == 1
    assert [line for _, line in result.unreadable] == [
        "../aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], t[...]"
    ]


def test_sites_are_grouped_by_the_key_the_caller_reads_from_each_line() -> None:
    text = "\n".join(f"[rank{r}]:" + LOSS_LINE.format(b=0, t=t) for r in (0, 1) for t in range(3))
    result = scan_all(text, group=lambda line: line[1:6])
    assert {k: [s.threads for s in v] for k, v in result.groups.items()} == {"rank0": [3], "rank1": [3]}


def test_the_bulk_path_folds_exactly_as_parsing_every_line_does() -> None:
    lines = []
    for i in range(600):
        record = (LOSS_LINE if i % 3 else GATHER_LINE).format(b=i % 5, t=i % 64)
        kind = i % 6
        if kind == 1:
            record = f"[rank{i % 4}]:" + record
        elif kind == 2:
            record = "\x1b[31m" + record + "\x1b[0m"
        elif kind == 3:
            record = record + record.replace(f"[{i % 64},0,0]", "[99,0,0]")
        elif kind == 4:
            record = HIP_LINE.rstrip("\n")
        lines.append(record)
    text = "\n".join(lines) + "\n" + SAMPLES[7][1]
    assert scan(text) == fold(parse_lines(text))
    assert sum(s.count for s in scan(text)) == len(parse_lines(text)) == 700
