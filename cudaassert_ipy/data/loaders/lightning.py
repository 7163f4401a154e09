"""Lightning: for a loader of unknown length, the training loop's ``_PrefetchDataFetcher`` fetches
``prefetch_batches`` (default 1) batches ahead to know when the epoch ends; for a sized loader it fetches none."""

from __future__ import annotations

from typing import Any

from cudaassert_ipy.frameworks.base import class_names, made_by

__all__ = ["ahead"]

PREFETCH = "Lightning's data fetcher fetches {n} ahead for a loader of unknown length"


def ahead(obj: Any) -> tuple[int, int, tuple[str, ...]] | None:
    """(low, high, why) when ``obj`` is Lightning's prefetching data fetcher over an unsized loader; else None."""
    if not made_by(obj, ("lightning", "pytorch_lightning")) or "_PrefetchDataFetcher" not in class_names(obj):
        return None
    if getattr(obj, "length", None) is not None:
        return None  # sized: Lightning skips the prefetch
    n = getattr(obj, "prefetch_batches", 1)
    if not isinstance(n, int) or n <= 0:
        return None
    return n, n, (PREFETCH.format(n="the next batch" if n == 1 else f"{n} batches"),)
