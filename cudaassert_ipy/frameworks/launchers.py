"""Process launchers: the cell gets only a wrapper, the failure happened in a child process.

* ``torch.distributed.elastic.multiprocessing.errors.ChildFailedError``: torchrun's ``elastic_launch``, so
  accelerate's ``notebook_launcher(fn, num_processes=N)`` (fork), ``accelerate launch`` with several
  processes and DeepSpeed through accelerate. Its ``failures`` map each global rank to a ``ProcessFailure``;
  ``get_first_failure()`` is the root cause (earliest timestamp), and with ``@record`` (elastic wraps a
  function entrypoint in it) the failure's ``message`` is the error file's JSON:
  ``{"message": "AcceleratorError: CUDA error: ...", "extraInfo": {"py_callstack": <traceback>, ...}}``.
  Without an error file it reads "To enable traceback see: ..." or "Signal 6 (SIGABRT) received by PID n":
  the child's text is then only in what it wrote to fd 2.
* ``torch.multiprocessing.spawn.ProcessRaisedException`` (``mp.spawn``, Lightning's ``ddp_spawn`` /
  ``ddp_notebook``, accelerate's ``debug_launcher``): its message is "-- Process N terminated with the
  following error:" and the child's traceback as text; ``error_index`` is the process. Its sibling
  ``ProcessExitedException`` (a signal, an exit code) carries no traceback.
* ``subprocess.CalledProcessError``: Ultralytics' multi-GPU DDP (``python -m torch.distributed.run ...`` run
  with ``check=True``), ``accelerate launch`` of one process, any ``!torchrun`` a user wraps. It carries the
  command and the exit status, and the child's output only when it was captured (``stderr`` / ``output``).

Found by type names and attributes; nothing is imported.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cudaassert_ipy.frameworks.base import Adapter, Launch, class_names

__all__ = ["ADAPTER"]

#: subprocess is always loaded; the torch wrappers only with torch.
PACKAGES = ("torch", "subprocess")

ELASTIC = "torch.distributed.elastic's `ChildFailedError` (torchrun, accelerate's `notebook_launcher` or `launch`)"
SPAWN = "`torch.multiprocessing.spawn`'s `{name}` (mp.spawn, Lightning's ddp_spawn/ddp_notebook)"
COMMAND = "`CalledProcessError` from the command {command} (exit status {status})"
#: What a command line says about its launcher: the words the wrapper line adds.
_COMMANDS = (
    ("torch.distributed.run", "torchrun"),
    ("torchrun", "torchrun"),
    ("Ultralytics/DDP", "Ultralytics' DDP"),
    ("accelerate", "accelerate launch"),
    ("deepspeed", "the DeepSpeed launcher"),
)


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else ""


def _split(error: str) -> tuple[str, str] | None:
    """``"AcceleratorError: CUDA error: ..."`` -> (type name, message), as ``@record`` writes it."""
    name, sep, message = error.partition(": ")
    if not sep or not name.replace(".", "").replace("_", "").isalnum():
        return None
    return name, message


def _elastic(exc: BaseException) -> Launch | None:
    failures = getattr(exc, "failures", None)
    first = getattr(exc, "get_first_failure", None)
    if not isinstance(failures, Mapping) or not failures or not callable(first):
        return Launch(ELASTIC, text=str(exc))  # the table alone: diagnose/ reads the root cause from it
    rank, failure = first()
    local = getattr(failure, "local_rank", None)
    process = f"rank {rank} (first observed failure" + (f", local_rank {local})" if local is not None else ")")
    error, text = _carried(failure)
    return Launch(ELASTIC, process=process, error=error, text=text or str(exc), others=_others(failures, rank))


def _carried(failure: Any) -> tuple[tuple[str, str] | None, str]:
    """A ``ProcessFailure``'s error (from its error file) and traceback text."""
    message = getattr(failure, "message", None)
    if isinstance(message, Mapping):
        extra = message.get("extraInfo")
        text = _text(extra.get("py_callstack")) if isinstance(extra, Mapping) else ""
        return _split(_text(message.get("message"))), text
    if isinstance(message, str):
        return None, message  # "Signal 6 (SIGABRT) received by PID 33054", "To enable traceback see: ..."
    return None, ""


def _others(failures: Mapping[Any, Any], first: Any) -> tuple[tuple[str, tuple[str, str]], ...]:
    """The other failed ranks that carry an error, earliest first: a rank that only lost its connection to the
    rank that hit the CUDA error can fail first (its error file is written while the other is still dying)."""
    out = []
    for rank, failure in sorted(failures.items(), key=lambda item: _timestamp(item[1])):
        error, _ = _carried(failure)
        if rank != first and error is not None:
            local = getattr(failure, "local_rank", None)
            out.append((f"rank {rank}" + (f" (local_rank {local})" if local is not None else ""), error))
    return tuple(out)


def _timestamp(failure: Any) -> int:
    stamp = getattr(failure, "timestamp", 0)
    return stamp if isinstance(stamp, int) else 0


def _spawn(exc: BaseException, name: str) -> Launch:
    index = getattr(exc, "error_index", None)
    process = f"process {index} of mp.spawn" if isinstance(index, int) else "an mp.spawn process"
    return Launch(SPAWN.format(name=name), process=process, text=str(exc))


def _command(exc: BaseException) -> Launch:
    cmd = getattr(exc, "cmd", None)
    words = " ".join(str(part) for part in cmd) if isinstance(cmd, (list, tuple)) else _text(cmd)
    launcher = next((label for key, label in _COMMANDS if key in words), "")
    shown = words if len(words) <= 120 else words[:117] + "..."
    wrapper = COMMAND.format(command=f"`{shown}`", status=getattr(exc, "returncode", "?"))
    if launcher:
        wrapper += f", run by {launcher}"
    captured = _text(getattr(exc, "stderr", None)) + "\n" + _text(getattr(exc, "output", None))
    # which of its processes failed first is read from what they wrote (a torchrun table, a DeepSpeed line)
    return Launch(wrapper, text=captured.strip())


def _launch(exc: BaseException) -> Launch | None:
    names: Sequence[str] = class_names(exc)
    if "ChildFailedError" in names:
        return _elastic(exc)
    for name in ("ProcessRaisedException", "ProcessExitedException"):
        if name in names:
            return _spawn(exc, name)
    if "CalledProcessError" in names and hasattr(exc, "returncode"):
        return _command(exc)
    return None


ADAPTER = Adapter(name="launchers", packages=PACKAGES, owns=lambda stack: False, launch=_launch)
