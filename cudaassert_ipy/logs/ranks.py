"""Which process wrote a log line, from the tag a launcher put in front of it.

torchrun's ``--local-ranks-filter``/log prefix ``[rank3]:``, older torchrun ``--tee`` ``[default3]:``,
OpenMPI/Horovod ``--tag-output`` ``[1,3]<stderr>:`` (job, rank), vLLM's workers ``(VllmWorker rank=1 pid=219)``,
``(Worker_PP1_TP0 pid=88241)`` (capture/child_lines.py reads them), Ray ``(RayTrainWorker pid=611035)``,
the NCCL watchdog's ``[PG ID 2 PG GUID 3 Rank 1]`` and ``srun --label``'s ``3: ``. Lines without a tag
belong to no rank (``None``).
"""

from __future__ import annotations

import re

from cudaassert_ipy.capture.child_lines import VLLM_WORKER, worker_label

__all__ = ["rank_label", "sort_key", "tag_end"]

_HEAD = 200  # a tag sits near the start of the line, after at most a timestamp or a grep prefix
_TAGS = re.compile(
    r"\[rank(?P<rank>\d+)\]:|\[default(?P<default>\d+)\]:|\[\d+,(?P<mpi>\d+)\]<std(?:out|err)>:"
    rf"|{VLLM_WORKER}|\((?P<ray>\w+ pid=\d+)[,)]|\[PG ID \d+ PG GUID \d+ Rank (?P<pg>\d+)\]",
    re.ASCII,
)
_QUICK = ("[rank", "[default", "]<std", " pid=", " GUID ")
_NUMBER = re.compile(r"\d+", re.ASCII)
_SRUN = re.compile(r"\s{0,4}(\d{1,5}): ", re.ASCII)


def rank_label(line: str) -> str | None:
    """``rank 3``, ``TP rank 1`` (vLLM), ``RayTrainWorker pid=611035``, ``task 3`` (srun), or None when no launcher
    tagged the line."""
    head = line[:_HEAD]
    m = _TAGS.search(head) if any(quick in head for quick in _QUICK) else None
    if m is not None:
        # a vLLM worker's rank wins over the process tag Ray or vLLM may put before it ("(Worker pid=899) (Worker_TP1")
        worker = next((w for w in _TAGS.finditer(head) if w.group("vllm_rank") or w.group("vllm_groups")), None)
        if worker is not None:
            return worker_label(worker)
        if m.group("ray"):
            return m.group("ray")
        number = m.group("rank") or m.group("default") or m.group("mpi") or m.group("pg")
        return f"rank {int(number)}"
    m = _SRUN.match(head)
    if m is not None:
        return f"task {int(m.group(1))}"
    return None


def sort_key(label: str | None) -> tuple[int, tuple[int, ...], str]:
    """Untagged lines first, then ranks in numeric order (vLLM's ``PP rank 1, TP rank 0`` by each number), then
    other tags (a process id) by name."""
    if label is None:
        return (0, (), "")
    numbers = tuple(int(n) for n in _NUMBER.findall(label))
    if numbers and "pid=" not in label:
        return (1, numbers, label)
    return (2, (), label)


def tag_end(line: str) -> int:
    """Where the last launcher tag near the start of the line ends (0 when there is none)."""
    end = 0
    for m in _TAGS.finditer(line[:_HEAD]):
        end = m.end()
    if not end:
        srun = _SRUN.match(line)
        end = srun.end() if srun is not None else 0
    return end
