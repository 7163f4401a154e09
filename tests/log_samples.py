"""Logs for the explainer's tests, built only from recorded texts (the catalogue's sample lines, the census of
tests/data/assert_census.json, the printed forms listed in docs/causes.md) and from the formats the issue names:
launcher prefixes, splicing, paste damage.

Nothing here is invented: each assertion line is a catalogue ``sample_stderr_line``, else the census's printed
line for that entry (reconstructed from the release binary), else the gpu_double's line; each error text is a
wording from gpu_double.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from gpu_double import BY_ID, CATALOGUE, DEVICE_ASSERT_WORDINGS, FOLLOW_ON_WORDINGS, STICKY_WORDINGS, assertion_lines

LOSS = (
    "../aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [{b},0,0], "
    "thread: [{t},0,0] Assertion `t >= 0 && t < n_classes` failed."
)
ASSERT_24 = "RuntimeError: " + DEVICE_ASSERT_WORDINGS["2.4-2.7"][1]
ASSERT_29 = "torch.AcceleratorError: " + DEVICE_ASSERT_WORDINGS["2.9+"][1]
CUDNN_NOT_INITIALIZED = "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED"
CUBLAS_FAILED = "RuntimeError: " + FOLLOW_ON_WORDINGS["cublas sgemm"][1]
ILLEGAL_ADDRESS = "RuntimeError: " + STICKY_WORDINGS["illegal address 2.4"][1]

# A user's log (modelscope/ms-swift#3267): torchrun-tagged traceback, untagged assertion lines after it, the last
# one cut.
S5 = """[rank0]:   File "/data/miniconda3/envs/fffan_debug/lib/python3.10/site-packages/accelerate/utils/\
operations.py", line 778, in _convert_to_fp32
[rank0]:     return tensor.float()
[rank0]: RuntimeError: CUDA error: device-side assert triggered
[rank0]: CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be \
incorrect.
[rank0]: For debugging consider passing CUDA_LAUNCH_BLOCKING=1
[rank0]: Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.

../aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [0,0,0] \
Assertion `t >= 0 && t < n_classes` failed.
../aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], t[...]
"""

# A user's log (facebookresearch/fairseq#3507): threads spliced mid-token, then the error.
S10 = (
    ",0,0/pytorch/aten/src/ATen/native/cuda/ScatterGatherKernel.cu], thread: [60,0:115,0], thread: [16: operator(),0,0"
    ': block: [12] Assertion `idx_dim >= 0 && idx_dim < index_size && "index out of bounds",0,0` failed.\n'
    '] Assertion `idx_dim >= 0 && idx_dim < index_size && "index out of bounds",0/pytorch/aten/src/ATen/native/cuda/'
    "ScatterGatherKernel.cu` failed.\n" + ASSERT_24 + "\n"
)

# A user's log (NVIDIA/pix2pixHD#9): THCUNN template signature, then the 0.3-era dtor report glued to the traceback.
S1 = (
    "/opt/conda/conda-bld/pytorch_1512386481460/work/torch/lib/THCUNN/BCECriterion.cu:30: Acctype bce_functor<Dtype, "
    "Acctype>::operator()(Tuple) [with Tuple = thrust::tuple<float, float, thrust::null_type, thrust::null_type, "
    "thrust::null_type, thrust::null_type, thrust::null_type, thrust::null_type, thrust::null_type, "
    "thrust::null_type>, Dtype = float, Acctype = float]: block: [16,0,0], thread: [31,0,0] Assertion `input >= 0. "
    "&& input <= 1.` failed.\n"
    "CUDA error after cudaEventDestroy in future dtor: device-side assert triggeredTraceback (most recent call last):\n"
    '  File "train.py", line 56, in <module>\n'
)

# A user's log (open-mmlab/mmdetection#3742): a C++ terminate from the caching allocator.
S12 = """terminate called after throwing an instance of 'c10::Error'
  what():  CUDA error: device-side assert triggered (insert_events at \
/tmp/pip-req-build-4baxydiv/c10/cuda/CUDACachingAllocator.cpp:569)
frame #0: c10::Error::Error(c10::SourceLocation, std::__cxx11::basic_string<char, std::char_traits<char>, \
std::allocator<char> > const&) + 0x6d (0x7f0e393a8e7d in /running_package/open-mmlab/lib/python3.7/site-packages/\
torch/lib/libc10.so)
"""

# The NCCL watchdog on another rank (its format in ProcessGroupNCCL.cpp), and the catalogue's Windows conda
# DynamicCast line.
NCCL_WATCHDOG = (
    "[rank1]:[E509 16:18:30.801728316 ProcessGroupNCCL.cpp:1895] [PG ID 2 PG GUID 3 Rank 1] Process group watchdog "
    "thread terminated with exception: CUDA error: an illegal memory access was encountered"
)

# Triton's device_assert without debug info, after a tqdm bar with no newline (a public log).
TRITON = (
    " 99%|██████████████  | 987/999 [00:22<00:00, 131.15it/s]unknown:0: unknown: block: [0,0,0], thread: [32,0,0] "
    "Assertion `index out of bounds: 0 <= tmp42 < 1024` failed.\n"
    "unknown:0: unknown: block: [0,0,0], thread: [33,0,0] Assertion `index out of bounds: 0 <= tmp42 < 1024` failed.\n"
    "RuntimeError: Triton Error [CUDA]: device-side assert triggered\n"
)

# ROCm/HIP: the device __assert_fail format "%s:%u: %s: Device-side assertion `%s' failed." (HIP headers).
HIP = (
    "/pytorch/aten/src/ATen/native/hip/Loss.hip:250: nll_loss_forward_reduce_cuda_kernel_2d: Device-side assertion "
    "`t >= 0 && t < n_classes' failed.\n"
)


def ranks_log() -> str:
    """Two ranks failing at two sites (torchrun-tagged lines), another rank's NCCL watchdog, Ray and mpirun tags."""
    gather = BY_ID["scatter_gather_index_out_of_range_v1"]["sample_stderr_line"]
    return "\n".join(
        [
            "[rank1]:" + LOSS.format(b=0, t=3),
            "[rank1]:" + LOSS.format(b=1, t=4),
            "[rank3]:" + gather,
            "[rank3]: " + ASSERT_29.splitlines()[0],
            "[rank1]: " + ASSERT_24.splitlines()[0],
            NCCL_WATCHDOG,
            "",
        ]
    )


def pasted_markdown() -> str:
    """S5's lines as a forum renders and a reader copies them back: quotes, lost and doubled backticks, a link,
    bold, HTML entities, a lost line number."""
    return "\n".join(
        [
            "> **RuntimeError: CUDA error: device-side assert triggered**",
            "> ../aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], "
            "thread: [0,0,0] Assertion t >= 0 && t < n_classes failed.",
            "[../aten/src/ATen/native/cuda/Loss.cu](https://github.com/pytorch/pytorch/blob/main/aten/src/ATen/native/"
            "cuda/Loss.cu):250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [1,0,0] Assertion "
            "`t >= 0 && t < n_classes` failed.",
            "../aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], "
            "thread: [2,0,0] Assertion ``t >= 0 && t < n_classes`` failed.",
            "../aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], "
            "thread: [3,0,0] Assertion `t &gt;= 0 &amp;&amp; t &lt; n_classes` failed.",
            "../aten/src/ATen/native/cuda/Loss.cu: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], "
            "thread: [4,0,0] Assertion `t >= 0 && t < n_classes` failed.",
        ]
    )


CENSUS = json.loads((Path(__file__).resolve().parent / "data" / "assert_census.json").read_text(encoding="utf-8"))
CENSUS_LINES = {e["id"]: e["line"] for e in CENSUS if e["cause"] == e["id"]}  # lines another cause names: not its own
_THREAD_DIMS = re.compile(r"thread: \[\d+,\d+,\d+\]")


def catalogue_lines(entry_id: str, threads: int = 4) -> str:
    """``threads`` assertion lines for a catalogue entry: its own sample as the gpu double writes it, else the
    census's printed line with each thread's dims (a line with no dims, a printf before a trap, repeats)."""
    if BY_ID[entry_id].get("sample_stderr_line") is None and entry_id in CENSUS_LINES:
        line = CENSUS_LINES[entry_id]
        return "".join(_THREAD_DIMS.sub(f"thread: [{t},0,0]", line) + "\n" for t in range(threads))
    if BY_ID[entry_id].get("file_regex"):  # a catch-all bound to generated kernels: its own text, from one of them
        return "".join(
            f"unknown:0: unknown: block: [0,0,0], thread: [{t},0,0] Assertion "
            f"`{BY_ID[entry_id]['condition']}` failed.\n"
            for t in range(threads)
        )
    return assertion_lines(entry_id, threads=threads).decode()


ALL_IDS = [e["id"] for e in CATALOGUE]
