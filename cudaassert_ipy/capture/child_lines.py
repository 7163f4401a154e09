"""What another process wrote, read through the prefixes launchers, engines and servers put in front of it.

A launcher (torchrun, accelerate, ``mp.spawn``, DeepSpeed, Ultralytics' DDP) or an inference engine (vLLM's
EngineCore, TGI's shards) runs the model in a child process; the notebook cell gets only a wrapper
exception, and the child's traceback and the kernel's assertion lines are in what the child wrote (the fd
tap sees it: children inherit fd 1/2) or in the wrapper's own text. Before matching, each line loses:
ANSI colour codes, JSON-escaped newlines (``\\n`` inside a logged JSON string), and the prefixes
``[rank1]:``, ``[default1]:``, ``(EngineCore pid=339) ERROR 08-19 10:11:55 [core.py:1348]``, vLLM's worker
tags (``(VllmWorker rank=1 pid=219)``, ``(VllmWorker TP1 pid=22110)``, ``(Worker_PP1_TP0 pid=88241)``), glog's
``E1126 20:45:48.278000 6892 torch/.../api.py:836]``, ``text_generation_launcher:``, a timestamp and a log
level. :func:`child_error` is the child's first CUDA error line; :func:`first_failure` is which process
the launcher's own lines say failed first; :func:`error_process` is the vLLM worker whose line carried it
(:data:`VLLM_WORKER` and :func:`worker_label` read a worker's tag as its rank, for the log explainer too);
:func:`child_samples` reads the "Bad samples" lines a child printed for its launcher (:data:`SAMPLES_LINE`).

Standard library only, like the rest of capture/.
"""

from __future__ import annotations

import re

from cudaassert_ipy.base.wording import PREFIX

__all__ = [
    "SAMPLES_LINE",
    "VLLM_WORKER",
    "child_error",
    "child_samples",
    "error_frames",
    "error_process",
    "first_failure",
    "plain_lines",
    "readable",
    "worker_label",
]

#: One line of a child's "Bad samples" check, printed on its stderr for the process that launched it
#: (data/child_samples.py): the child's pid, the kind of value its check was against (a child cannot know its
#: cause: the kernel's assertion lines went to its fd 2), then one line of the report's section.
SAMPLES_LINE = PREFIX + " Bad samples of pid {pid} ({kind}): {line}"
_SAMPLES_MARK = PREFIX + " Bad samples of pid "
_SAMPLES = re.compile(re.escape(_SAMPLES_MARK) + r"(\d+) \(([\w ]+)\): (.+)$")

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: vLLM's worker processes tag their lines with their rank, in the words of successive releases:
#: ``(VllmWorker rank=1 pid=219)``, ``(VllmWorker TP1 pid=22110)``, then ``(Worker_TP1 pid=530)``,
#: ``(Worker_PP1_TP0 pid=88241)``, ``(EngineCore_DP1 pid=77)``: ``Worker`` + ``_DP``/``_PP``/``_PCP``/``_TP``/
#: ``_DCP``/``_EP`` and the rank in each group whose size is over 1 (multiproc_executor.py's
#: ``setup_proc_title_and_log_prefix``).
VLLM_WORKER = (
    r"\((?:VllmWorker rank=(?P<vllm_rank>\d+)|(?:VllmWorker|Worker|EngineCore)"
    r"(?P<vllm_groups>(?:[ _](?:DP|PP|PCP|TP|DCP|EP)\d+)+)) pid=\d+\)"
)
_WORKER = re.compile(VLLM_WORKER, re.ASCII)
_GROUP = re.compile(r"([A-Z]+)(\d+)", re.ASCII)
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in ')
#: prefixes in front of a child's line, any number of them, in any order
_PREFIX = re.compile(
    r"^(?:\s*(?:"
    r"\[rank\d+\]:|\[default\d+\]:|\[\d+,\d+\]<std(?:out|err)>:"  # torchrun, torchrun --tee, mpirun --tag-output
    r"|\(\w+ pid=\d+(?:, ip=[\d.]+)?\)"  # vLLM's (EngineCore pid=339), Ray's (RayTrainWorker pid=611035)
    r"|\(VllmWorker (?:rank=\d+|[A-Z]{2,3}\d+) pid=\d+\)"  # vLLM's workers: (VllmWorker rank=1 pid=219)
    r"|[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [^\]\n]{1,200}\]"  # glog: E1126 20:45:48.278000 6892 file.py:836]
    r"|(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\b:?"  # a log level
    r"|\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?"  # vLLM's 08-19 10:11:55
    r"|\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?Z?\]?"  # 2024-01-01T00:00:00.123Z, [2023-04-14 13:11:27,879]
    r"|\[(?:DEBUG|INFO|WARNING|ERROR)\]"  # DeepSpeed's [ERROR]
    r"|\[[\w./-]+\.py:\d+(?::\w+)?\]"  # vLLM's [core.py:1348], DeepSpeed's [launch.py:434:sigkill_handler]
    r"|[\w:]*text_generation_\w+(?:::\w+)*:"  # TGI's text_generation_launcher:, text_generation_router_v3::client:
    r"))+\s?"
)
#: a Python error line: ``torch.AcceleratorError: CUDA error: ...`` (the type need not start the line)
_TYPED = re.compile(r"(?<![\w.:])((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception)): (.+)", re.ASCII)
#: a C++ error that ended the process (its NCCL watchdog): "terminate called after throwing an instance of 'T'" and
#: "  what():  [PG 1 Rank 1] Process group watchdog thread terminated with exception: CUDA error: ..."
_TERMINATE = re.compile(r"terminate called after throwing an instance of '([\w:]+)'")
_WHAT = re.compile(r"what\(\):\s+(.+)")
_CUDA = re.compile(
    r"device-side assert|CUDA error|cudaError|illegal memory access|misaligned address|"
    r"unspecified launch failure|illegal instruction",
    re.IGNORECASE,
)
#: The lines PyTorch adds to a CUDA error's message (c10/cuda/CUDAMiscFunctions.cpp), and nothing else: a
#: line of another process may follow in a log.
_MESSAGE_MORE = re.compile(
    r"^(?:Search for `cuda|CUDA kernel errors might|For debugging consider|"
    r"Compile with `TORCH_USE_CUDA_DSA`|For more detailed error information)"
)

# Which process failed first, as launchers print it (each is that launcher's exact wording):
_FIRST = (
    # torch.distributed.elastic's ChildFailedError table: "Root Cause (first observed failure):\n[0]:\n ... rank : 1"
    (
        re.compile(
            r"Root Cause \(first observed failure\):\s*\[\d+\]:(?:\s*\w+\s*:[^\n]*\n)*?\s*rank\s*: (\d+) "
            r"\(local_rank: (\d+)\)"
        ),
        "rank {0} (first observed failure)",
    ),
    # elastic's agent: "failed (exitcode: 1) local_rank: 1 (pid: 6944) of fn: train"
    (re.compile(r"failed \(exitcode: -?\d+\) local_rank: (\d+) \(pid: \d+\)"), "local_rank {0}"),
    # torch.multiprocessing.spawn: "-- Process 1 terminated with the following error:"
    (re.compile(r"-- Process (\d+) terminated with the following error"), "process {0}"),
    # DeepSpeed's launcher: "[... '--local_rank=0', ...] exits with return code = 1"
    (re.compile(r"'--local_rank=(\d+)'[^\n]*\] exits with return code = -?\d+"), "local_rank {0}"),
    # Lightning's _ChildProcessObserver: "Child process with PID 4242 terminated with code 1."
    (re.compile(r"Child process with PID (\d+) terminated with code -?\d+"), "the child process with PID {0}"),
)


def readable(text: str) -> str:
    """``text`` without ANSI codes, JSON-escaped newlines made real; launcher tags kept (they name the rank)."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "\\n" in text:
        text = "\n".join(_unescaped(line) for line in text.split("\n"))
    return text


def _json(line: str) -> bool:
    """A line a log shipper wrote as JSON (``{"message":"...\\n..."}``): only there is ``\\n`` a newline; a Windows
    path has ``\\native`` too."""
    return '":' in line and ("{" in line or '\\"' in line)


def _unescaped(line: str) -> str:
    return line.replace("\\n", "\n") if "\\n" in line and _json(line) else line


def plain_lines(text: str) -> list[str]:
    """``text``'s lines without ANSI codes and launcher/engine prefixes, JSON-escaped newlines split."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    out = []
    for line in text.splitlines():
        for part in _unescaped(line).split("\n"):
            out.append(_PREFIX.sub("", part.rstrip("\r")) if part else part)
    return out


def child_error(text: str) -> tuple[str, str] | None:
    """The first CUDA error a child printed in ``text``: (type name as printed, message with the lines PyTorch
    adds to it), or None. Only lines holding an error word are read through their prefixes: a cell's output
    may be a long training log."""
    found = _first_error(text)
    return found[0] if found is not None else None


def child_samples(text: str) -> tuple[tuple[str, str], ...]:
    """The "Bad samples" lines a launched child printed (:data:`SAMPLES_LINE`) as (kind, line), in its order; those
    of the first child that printed any (the first to fail)."""
    if _SAMPLES_MARK not in text:
        return ()
    first, out = None, []
    for physical in text.splitlines():
        if _SAMPLES_MARK not in physical:
            continue
        for line in plain_lines(physical):  # through a launcher's prefix ([rank1]:, [default1]:)
            m = _SAMPLES.search(line)
            if m is None:
                continue
            first = first or m.group(1)
            if m.group(1) == first:
                out.append((m.group(2), m.group(3)))
    return tuple(out)


def error_process(text: str) -> str | None:
    """The vLLM worker whose tag is on the line of the first CUDA error in ``text``, in words
    (``worker rank 1 (VllmWorker rank=1 pid=219)``), or None: the engine core's own line, an untagged one."""
    found = _first_error(text)
    if found is None:
        return None
    m = _WORKER.search(_ANSI.sub("", found[1]))
    return f"vLLM's worker {worker_label(m)} ({m.group(0)[1:-1]})" if m is not None else None


def worker_label(m: re.Match[str]) -> str:
    """A vLLM worker tag (:data:`VLLM_WORKER`) as ranks: ``rank 1``, ``TP rank 1``, ``PP rank 1, TP rank 0``."""
    if m.group("vllm_rank") is not None:
        return f"rank {int(m.group('vllm_rank'))}"
    return ", ".join(f"{group} rank {int(rank)}" for group, rank in _GROUP.findall(m.group("vllm_groups")))


def error_frames(text: str) -> list[tuple[str, int, str]]:
    """The frames of the child's traceback that ends in its first CUDA error, outermost first: (file, line number,
    the code line printed under it); empty when ``text`` holds no such traceback."""
    if "Traceback" not in text:
        return []
    lines = plain_lines(text)
    frames: list[tuple[str, int, str]] = []
    for i, line in enumerate(lines):
        if line.lstrip().startswith("Traceback (most recent call last)"):
            frames = []
            continue
        m = _FRAME.match(line)
        if m is not None:
            after = lines[i + 1] if i + 1 < len(lines) else ""
            code = "" if _FRAME.match(after) else after.strip()
            frames.append((m.group(1), int(m.group(2)), code))
        elif frames and _error_in(line, lines[i + 1 :], lines[:i]) is not None:
            return frames
    return []


def _first_error(text: str) -> tuple[tuple[str, str], str] | None:
    """The first CUDA error (see :func:`child_error`) and the physical line that carried it."""
    raw = text.splitlines()
    for i, physical in enumerate(raw):
        if "rror" not in physical and "xception" not in physical and "what()" not in physical:
            continue
        lines = plain_lines("\n".join(raw[i : i + 8]))  # the line (JSON may hold several) and what follows it
        earlier = plain_lines("\n".join(raw[max(0, i - 3) : i]))
        for j, line in enumerate(lines):
            found = _error_in(line, lines[j + 1 :], earlier + lines[:j])
            if found is not None:
                return found, physical
    return None


def _error_in(line: str, after: list[str], before: list[str]) -> tuple[str, str] | None:
    what = _WHAT.search(line)
    if what is not None and _CUDA.search(what.group(1)):
        thrown = next((t.group(1) for t in map(_TERMINATE.search, reversed(before)) if t), "c10::Error")
        return thrown, what.group(1).strip()
    m = _TYPED.search(line)
    if m is None or not _CUDA.search(m.group(2)) or line.lstrip().startswith(("raise ", 'File "')):
        return None
    message = [m.group(2).strip().strip("\"'")]
    for more in after:
        if not _MESSAGE_MORE.match(more.strip()):
            break
        message.append(more.strip())
    return m.group(1), "\n".join(message)


def first_failure(text: str) -> str | None:
    """The process a launcher's own lines name as the first to fail (``rank 1 (first observed failure)``), or
    None when no launcher said."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    for pattern, label in _FIRST:
        m = pattern.search(text)
        if m is not None:
            return label.format(*m.groups())
    return None
