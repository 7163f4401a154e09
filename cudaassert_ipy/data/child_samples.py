"""A launched child's own "Bad samples" check, printed for the process that launched it.

Why: accelerate's ``notebook_launcher`` (torch.distributed.elastic, fork) and ``mp.spawn`` / ``start_processes``
with fork run each rank in a fork of the kernel: the DataLoader bookmark is patched in there too and records the
rank's batches, in the rank's memory, which dies with it. So the rank checks them itself as it exits with a CUDA
error and prints each line of its check, tagged (``SAMPLES_LINE``), on its fd 2: the kernel's fd tap. The kernel's
report then shows the lines of the kind its cause is about (:func:`cudaassert_ipy.data.post_mortem.launched`). The
rank cannot know its cause (the kernel's assertion lines went to its fd 2, which it only writes), so it checks every
range its host facts bound (class labels, token ids; [0, 1] targets beside a BCE loss module). A rank that watches
itself (``import cudaassert_ipy.auto``, the runner's children) knows its cause and prints the lines of its own check
(run/guard.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from cudaassert_ipy.data.bookmark import Bookmark
from cudaassert_ipy.data.post_mortem import check_records
from cudaassert_ipy.data.valid_range import bounded
from cudaassert_ipy.diagnose.launched import SAMPLES_LINE
from cudaassert_ipy.diagnose.pipeline import diagnose_failure, read_failure

__all__ = ["child_lines", "tagged"]


def tagged(kind: str, lines: Sequence[str]) -> list[str]:
    """``lines`` of a check against ``kind`` values, as this process prints them for the process that launched it."""
    pid = os.getpid()
    return [SAMPLES_LINE.format(pid=pid, kind=kind, line=" ".join(line.split())) for line in lines]


def child_lines(bookmark: Bookmark, error: BaseException, user_ns: Mapping[str, Any]) -> list[str]:
    """The tagged lines of this process's check of its recorded batches against every bounded range; empty when
    ``error`` is no CUDA error that killed this process's context."""
    detection, _ = read_failure(error, "")
    if detection is None or not detection.kills_context or detection.launch is not None:
        return []
    evidence, _ = diagnose_failure(detection, [], "", "", None, user_ns)
    out = []
    for rng in bounded(evidence):
        out += tagged(rng.kind, check_records(bookmark, evidence, rng, user_ns).lines)
    return out
