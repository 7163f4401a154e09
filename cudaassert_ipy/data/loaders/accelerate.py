"""accelerate: ``DataLoaderShard`` yields batch k after fetching batch k+1 ("we iterate one batch ahead to check
when we are at the end"); ``DataLoaderDispatcher`` fetches on rank 0 for every process, and one step ahead."""

from __future__ import annotations

from typing import Any

from cudaassert_ipy.frameworks.base import class_names, made_by

__all__ = ["ahead"]

SHARD = "accelerate's DataLoaderShard fetches the next batch before it yields one"
DISPATCHER = "accelerate's DataLoaderDispatcher fetches the next step's {n} before it yields one"


def ahead(obj: Any) -> tuple[int, int, tuple[str, ...]] | None:
    """(low, high, why) when ``obj`` is one of accelerate's loaders iterating; None otherwise."""
    if not made_by(obj, ("accelerate",)):
        return None
    names = class_names(obj)
    if "DataLoaderDispatcher" in names:
        n = _processes(obj)
        return n, n, (DISPATCHER.format(n="batch" if n == 1 else f"{n} batches (one per process)"),)
    if "DataLoaderShard" in names:
        return 1, 1, (SHARD,)
    return None


def _processes(obj: Any) -> int:
    state = getattr(obj, "state", None)
    n = getattr(state, "num_processes", 1)
    return n if isinstance(n, int) and n > 0 else 1
