"""The one stand-in the test suite allows: a GPU failure, replayed from texts real PyTorch builds printed.

``fail_like_gpu`` writes real kernel assertion lines (the catalogue's ``sample_stderr_line`` of each
entry in ``cudaassert_ipy/diagnose/causes/device_asserts.json``, or one in the same format from the entry's
file, function and condition where no line was seen) to fd 2, at the file-descriptor level as the CUDA
runtime does, then raises the exact exception a given PyTorch release raises
(``torch.AcceleratorError`` with ``error_code=710`` from 2.8 on). The wordings below are this
project's fixtures, verbatim: each says where it was read, in PyTorch's source (``pytorch/pytorch``
paths) or in a public report (``owner/repo#number`` on GitHub). docs/design.md says how the double
is used.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

CATALOGUE = json.loads(
    (Path(__file__).resolve().parents[1] / "cudaassert_ipy" / "diagnose" / "causes" / "device_asserts.json").read_text()
)
BY_ID = {e["id"]: e for e in CATALOGUE}

_ASYNC_19 = (
    "\nCUDA kernel errors might be asynchronously reported at some other API call,so the stacktrace below "
    "might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1."
)
_ASYNC_20 = (
    "\nCUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
    "might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1."
)
_ASYNC_24 = _ASYNC_20[:-1]
_DSA = "\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
_HELP_ASSERT = (
    "\nSearch for `cudaErrorAssert' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html "
    "for more information."
)

# label -> (exception type name, exact message), by release family. The host-side text of cudaErrorAssert (710; 59
# with CUDA before 10.1), raised at the next synchronising call:
# - THC's THCudaCheck (0.x-1.x): rdcolema/pytorch-image-classification#1; with CUDA 11, 710: DeepVAC/TorchPod#56
# - thrust's failed synchronisation (1.x): nv-tlabs/GSCNN#27 (1.0), motefly/DeepGBM#23 (reduce)
# - C10_CUDA_CHECK's one line (about 1.0-1.8; c10/cuda/CUDAException.h), and the origin in a C++ what():
#   open-mmlab/mmdetection#3742
# - the async suffix (1.9-1.13, "call,so"): pytorch/pytorch#59467, seen in xhw205/GPLinker_torch#14
# - the TORCH_USE_CUDA_DSA line (2.0-2.3): pytorch/pytorch#84609; no period after "=1" (2.4-2.7):
#   get_cuda_check_suffix() in c10/cuda/CUDAMiscFunctions.cpp
# - torch.AcceleratorError with error_code (2.8): pytorch/pytorch#152023
# - the "Search for `cudaErrorAssert'" line (2.9+): get_cuda_error_help() in c10/cuda/CUDAMiscFunctions.cpp, seen in
#   mrdbourke/pytorch-deep-learning#1290; without the DSA line (main, 2026): pytorch/pytorch#180427
DEVICE_ASSERT_WORDINGS: dict[str, tuple[str, str]] = {
    "0.x-1.x THC (59)": (
        "RuntimeError",
        "cuda runtime error (59) : device-side assert triggered at /pytorch/aten/src/THC/generic/THCTensorMath.cu:35",
    ),
    "1.9 conda THC (710)": (
        "RuntimeError",
        "cuda runtime error (710) : device-side assert triggered at "
        "/opt/conda/conda-bld/pytorch_1623448278899/work/aten/src/THC/generic/THCTensorMath.cu:29",
    ),
    "1.0 thrust copy_if": ("RuntimeError", "copy_if failed to synchronize: device-side assert triggered"),
    "1.x thrust copy_if cudaErrorAssert": (
        "RuntimeError",
        "copy_if failed to synchronize: cudaErrorAssert: device-side assert triggered",
    ),
    "1.5 thrust transform": (
        "RuntimeError",
        "transform: failed to synchronize: cudaErrorAssert: device-side assert triggered",
    ),
    "1.x thrust reduce": (
        "RuntimeError",
        "reduce failed to synchronize: cudaErrorAssert: device-side assert triggered",
    ),
    "1.0-1.8 one line": ("RuntimeError", "CUDA error: device-side assert triggered"),
    "1.x C++ what() with origin": (
        "RuntimeError",
        "CUDA error: device-side assert triggered (insert_events at "
        "/tmp/pip-req-build-4baxydiv/c10/cuda/CUDACachingAllocator.cpp:569)",
    ),
    "1.9-1.13": ("RuntimeError", "CUDA error: device-side assert triggered" + _ASYNC_19),
    "2.0-2.3": ("RuntimeError", "CUDA error: device-side assert triggered" + _ASYNC_20 + _DSA),
    "2.4-2.7": ("RuntimeError", "CUDA error: device-side assert triggered" + _ASYNC_24 + _DSA),
    "2.8": ("AcceleratorError", "CUDA error: device-side assert triggered" + _ASYNC_24 + _DSA),
    "2.9+": ("AcceleratorError", "CUDA error: device-side assert triggered" + _HELP_ASSERT + _ASYNC_24 + _DSA),
    "main 2026 (no DSA line)": (
        "AcceleratorError",
        "CUDA error: device-side assert triggered" + _HELP_ASSERT + _ASYNC_24,
    ),
}

# Other sticky errors: the context is unusable afterwards too (cudaErrorIllegalAddress 700, MisalignedAddress 716,
# LaunchFailure 719, IllegalInstruction 715). With CUDA_LAUNCH_BLOCKING=1 get_cuda_check_suffix() adds no async
# lines (the "blocking" form); thrust's merge_sort wording is 1.x's, as above.
STICKY_WORDINGS: dict[str, tuple[str, str]] = {
    "illegal address, blocking": ("RuntimeError", "CUDA error: an illegal memory access was encountered" + _DSA),
    "illegal address 2.4": ("RuntimeError", "CUDA error: an illegal memory access was encountered" + _ASYNC_24 + _DSA),
    "thrust merge_sort illegal address": (
        "RuntimeError",
        "merge_sort: failed to synchronize: cudaErrorIllegalAddress: an illegal memory access was encountered",
    ),
    "misaligned address": ("AcceleratorError", "CUDA error: misaligned address" + _ASYNC_24 + _DSA),
    "unspecified launch failure": ("AcceleratorError", "CUDA error: unspecified launch failure" + _ASYNC_24 + _DSA),
    "illegal instruction": ("AcceleratorError", "CUDA error: an illegal instruction was encountered"),
}

# Library errors that follow a sticky one in the same process, in the formats of aten/src/ATen/cuda/Exceptions.h:
# cuBLAS "CUDA error: <status> when calling `<call>`", cuDNN "cuDNN error: <status>" (after an IndexKernel assert:
# cvlab-stonybrook/Scanpath_Prediction#13), and the Lua era's cuBLAS text (torch/cutorch#818).
FOLLOW_ON_WORDINGS: dict[str, tuple[str, str]] = {
    "cublas sgemm": (
        "RuntimeError",
        "CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm( handle, opa, opb, m, n, k, &alpha, "
        "a, lda, b, ldb, &beta, c, ldc)`",
    ),
    "cublas strided batched": (
        "RuntimeError",
        "CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmStridedBatchedExFix`",
    ),
    "cudnn execution failed": ("RuntimeError", "cuDNN error: CUDNN_STATUS_EXECUTION_FAILED"),
    "cudnn mapping error": ("RuntimeError", "cuDNN error: CUDNN_STATUS_MAPPING_ERROR"),
    "lua cublas": ("RuntimeError", "cublas runtime error : the GPU program failed to execute"),
}

# Errors that must NOT be classified (not sticky, or not CUDA at all). The CUDA_LOG_FILE line follows non-sticky
# errors in get_cuda_async_error_suffix() (c10/cuda/CUDAMiscFunctions.cpp); "GPU device may be out of range" is
# get_cuda_error_help()'s for cudaErrorInvalidDevice.
NOT_OURS_WORDINGS: dict[str, tuple[str, str]] = {
    "oom": ("OutOfMemoryError", "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.90 GiB total capacity)"),
    "invalid argument": (
        "AcceleratorError",
        "CUDA error: invalid argument\nFor more detailed error information, run with CUDA_LOG_FILE=stderr",
    ),
    "invalid device": (
        "AcceleratorError",
        "CUDA error: invalid device ordinal\nGPU device may be out of range, do you have enough GPUs?",
    ),
    "cublas not supported": (
        "RuntimeError",
        "CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling cublasLtMatmul "
        "with transpose_mat1 1 transpose_mat2 0 m 3584 n 90 k 3584",
    ),
    "plain value error": ("ValueError", "could not convert string to float: 'abc'"),
}

# cudaError_t values, from the CUDA runtime API's data types
CODES = {
    "device-side assert triggered": 710,
    "an illegal memory access was encountered": 700,
    "misaligned address": 716,
    "unspecified launch failure": 719,
    "an illegal instruction was encountered": 715,
    "invalid argument": 1,
    "invalid device ordinal": 101,
}


_ACCELERATOR_ERROR = type("AcceleratorError", (RuntimeError,), {"__module__": "torch"})


def make_exception(type_name: str, message: str) -> BaseException:
    """The exception object PyTorch raises: AcceleratorError carries ``error_code``."""
    import torch

    if type_name == "AcceleratorError":
        # torch < 2.8 (the oldest-torch CI env) has no AcceleratorError: the 2.8+ wordings then raise a class of
        # that name and shape (a RuntimeError subclass in module torch), which is all the extension reads of it
        cls = getattr(torch, "AcceleratorError", None) or _ACCELERATOR_ERROR
        exc = cls(message)
        reason = message.split("CUDA error: ", 1)[-1].splitlines()[0]
        exc.error_code = CODES.get(reason, 999)
        return exc
    if type_name == "OutOfMemoryError":
        return torch.OutOfMemoryError(message)
    return {"RuntimeError": RuntimeError, "ValueError": ValueError, "IndexError": IndexError}[type_name](message)


def assertion_lines(cause_id: str, threads: int = 64, blocks: int = 1) -> bytes:
    """``threads`` x ``blocks`` assertion lines for a catalogued assert, as the CUDA runtime prints them."""
    entry = BY_ID[cause_id]
    sample = entry.get("sample_stderr_line")
    if sample is None:
        func = (entry.get("kernel_functions") or ["operator()"])[0]
        path = (
            entry["kernel_file"]
            if entry["kernel_file"].startswith("aten/")
            else "aten/src/ATen/native/cuda/UnknownFile.cu"
        )  # the catalogue is unsure where this one lives
        sample = (
            f"/pytorch/{path}:100: {func}: block: [0,0,0], thread: [0,0,0] Assertion `{entry['condition']}` failed."
        )
    head, _, tail = sample.partition("block: [")
    tail = tail.split("Assertion", 1)[1]
    out = []
    for b in range(blocks):
        for t in range(threads):
            out.append(f"{head}block: [{b},0,0], thread: [{t},0,0] Assertion{tail}\n")
    return "".join(out).encode()


def fail_like_gpu(
    cause_id: str = "nll_loss_target_out_of_range", version: str = "2.9+", threads: int = 64, blocks: int = 1
) -> None:
    """Do what a real device assert does to this process's fd 2 and Python, minus the GPU."""
    os.write(2, assertion_lines(cause_id, threads, blocks))
    type_name, message = DEVICE_ASSERT_WORDINGS[version]
    raise make_exception(type_name, message)
