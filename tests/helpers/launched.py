"""What the children of a launcher or an engine run in tests/test_frameworks_launchers.py: real processes.

Each child does what a real device assert does to a process (``gpu_double``: the kernel's assertion lines
on fd 2, then the exact exception PyTorch raises); the launcher around it is the real one. vLLM cannot be
installed here: ``engine_core`` writes what vLLM's EngineCore logs, in vLLM's exact log format
(``(EngineCore pid=N) ERROR MM-DD hh:mm:ss [core.py:1348] ...``), and ``EngineDeadError`` is defined with
vLLM's exact message (``vllm/v1/engine/exceptions.py``), raised ``from None`` as ``core_client.py`` does.
"""

from __future__ import annotations

import os
import sys
import time
import traceback

from gpu_double import DEVICE_ASSERT_WORDINGS, assertion_lines, fail_like_gpu, make_exception

#: vllm/v1/engine/exceptions.py
ENGINE_DEAD = "EngineCore encountered an issue. See stack trace (above) for the root cause."


class EngineDeadError(Exception):
    """vLLM's class of that name (``vllm.v1.engine.exceptions``), as the client raises it."""

    def __init__(self, *args: object, suppress_context: bool = False) -> None:
        super().__init__(ENGINE_DEAD, *args)
        self.__suppress_context__ = suppress_context


def free_port() -> int:
    """A TCP port nobody listens on now, for a launcher's rendezvous (tests may run side by side)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def spawned(index: int) -> None:
    """``torch.multiprocessing.spawn``'s target: process 1 hits the assert."""
    if index == 1:
        fail_like_gpu(threads=2)


#: a rank's NCCL watchdog hitting the sticky error and aborting the process before Python can raise
#: (sgl-project/sglang#271, verbatim)
WATCHDOG = (
    "terminate called after throwing an instance of 'c10::DistBackendError'\n"
    "  what():  [PG 1 Rank 1] Process group watchdog thread terminated with exception: CUDA error: "
    "device-side assert triggered\n"
)


def aborted(index: int) -> None:
    """``mp.spawn``'s target: process 1's watchdog aborts it (SIGABRT) after the kernel's lines."""
    if index == 1:
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file from the abort
        os.write(2, assertion_lines("nll_loss_target_out_of_range", threads=2) + WATCHDOG.encode())
        os.abort()
    time.sleep(30)  # the other rank waits in its "collective" until the launcher stops it


def engine_core() -> None:
    """vLLM's EngineCore dying of a device assert: the kernel lines (the CUDA runtime's, no prefix), then its
    logger's traceback, every line prefixed as vLLM prefixes them."""
    os.write(2, assertion_lines("index_select_out_of_range", threads=2))
    try:
        raise make_exception(*DEVICE_ASSERT_WORDINGS["2.9+"])
    except Exception:
        stamp = time.strftime("%m-%d %H:%M:%S")
        prefix = f"(EngineCore pid={os.getpid()}) ERROR {stamp} [core.py:1348] "
        text = "EngineCore encountered a fatal error.\n" + traceback.format_exc()
        os.write(2, "".join(prefix + line + "\n" for line in text.splitlines()).encode())
    sys.exit(1)


def peer_lost() -> None:
    """``notebook_launcher``'s function: rank 1 hits the assert and takes a while to die (a CUDA context's teardown);
    rank 0, waiting for it in a real gloo all_reduce, sees its connection go and exits first, with gloo's error."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    dist.all_reduce(torch.ones(1))
    if os.environ["RANK"] == "1":
        os.write(2, assertion_lines("nll_loss_target_out_of_range", threads=2))
        dist.destroy_process_group()  # its sockets close, as a dying process's do
        time.sleep(20)  # still dying when the launcher stops it
        raise make_exception(*DEVICE_ASSERT_WORDINGS["2.9+"])
    dist.all_reduce(torch.ones(1))


def tp_worker() -> None:
    """A tensor-parallel vLLM's worker rank 1 dying of a device assert: the kernel lines, then its logger's
    traceback with the worker's prefix (``(VllmWorker rank=1 pid=N) ERROR MM-DD hh:mm:ss [multiproc_executor.py:546]``),
    then the engine core's line about the dead worker."""
    os.write(2, assertion_lines("index_select_out_of_range", threads=2))
    stamp = time.strftime("%m-%d %H:%M:%S")
    try:
        raise make_exception(*DEVICE_ASSERT_WORDINGS["2.9+"])
    except Exception:
        prefix = f"(VllmWorker rank=1 pid={os.getpid()}) ERROR {stamp} [multiproc_executor.py:546] "
        text = "WorkerProc hit an exception.\n" + traceback.format_exc()
        os.write(2, "".join(prefix + line + "\n" for line in text.splitlines()).encode())
    os.write(2, f"ERROR {stamp} [core.py:586] EngineCore encountered a fatal error.\n".encode())
    sys.exit(1)


def rank_1_fails() -> None:
    """A torchrun worker: rank 1 hits the assert."""
    if os.environ["RANK"] == "1":
        fail_like_gpu(threads=2)


if __name__ == "__main__":
    {
        "engine_core": engine_core,
        "tp_worker": tp_worker,
        "fail": lambda: fail_like_gpu(threads=2),
        "rank_1_fails": rank_1_fails,
    }[sys.argv[1]]()
