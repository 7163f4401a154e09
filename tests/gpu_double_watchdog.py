"""The GPU double for a rank that dies without Python: the NCCL watchdog's abort after a device-side assert.

On a GPU, a rank whose kernel asserted can be ended by its own NCCL watchdog thread before Python ever raises:
the watchdog polls its work, hits the sticky CUDA error, throws ``c10::DistBackendError`` from a C++ thread,
and the C++ runtime aborts the process (SIGABRT, exit code -6). What reaches fd 2 is the kernel's assertion
lines and the runtime's two lines below, verbatim from sgl-project/sglang#271 (the same shape in
huggingface/trl#5386, modelscope/ms-swift#6211, pytorch/pytorch#136390). No excepthook, no atexit runs.
"""

from __future__ import annotations

import os

from gpu_double import assertion_lines

WATCHDOG = (
    "terminate called after throwing an instance of 'c10::DistBackendError'\n"
    "  what():  [PG 1 Rank {rank}] Process group watchdog thread terminated with exception: CUDA error: "
    "device-side assert triggered\n"
)


def die_like_nccl_watchdog(rank: int, cause_id: str = "nll_loss_target_out_of_range") -> None:
    """Write what the GPU and the watchdog write to fd 2, then abort as the C++ runtime does."""
    os.write(2, assertion_lines(cause_id, threads=4))
    os.write(2, WATCHDOG.format(rank=rank).encode())
    os.abort()
