"""One step instead of hours: a DataLoader over exactly the samples of the batch that failed.

Same dataset, collate_fn and batch size as the user's loader, no shuffling, no workers: one
training step over it, with validators on, names the bad value on the GPU in seconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cudaassert_ipy.data.samples import SampleCheck

__all__ = ["NOT_A_LOADER", "NO_FAILING_BATCH", "failing_loader", "plan_entry"]

NO_FAILING_BATCH = (
    "No failing batch is known for {loader}: failing_batch() needs a failure whose bad values the "
    "DataLoader bookmark found in a recorded batch of this loader (see the report's Bad samples)."
)
NOT_A_LOADER = "failing_batch() takes the torch DataLoader the training loop iterated, not a {type_name}."


def failing_loader(loader: Any, indices: Sequence[int]) -> Any:
    """A DataLoader over ``indices`` of ``loader.dataset``, batched and collated as ``loader`` does."""
    from torch.utils.data import DataLoader

    if getattr(loader, "batch_sampler", None) is None:  # batch_size=None: the loader yields samples one by one
        return DataLoader(loader.dataset, batch_size=None, sampler=list(indices), collate_fn=loader.collate_fn)
    # one batch of exactly these samples, also when a custom batch_sampler made batches of other sizes
    return DataLoader(loader.dataset, batch_sampler=[list(indices)], collate_fn=loader.collate_fn)


def matches(check: SampleCheck | None, loader: Any) -> bool:
    """Whether the check's failing batch came from this loader (same sampler, or at least the same dataset)."""
    rec = check.failing if check is not None else None
    if rec is None or rec.indices is None:
        return False
    sampler = getattr(loader, "_index_sampler", None)
    return rec.sampler is sampler or (rec.dataset is not None and rec.dataset is getattr(loader, "dataset", None))


def plan_entry(check: SampleCheck | None) -> tuple[str, tuple[int, ...]] | None:
    """(loader name, dataset indices) for the resume plan, when the failing batch is known and named."""
    rec = check.failing if check is not None else None
    if rec is None or rec.indices is None or not rec.loader:
        return None
    if not all(isinstance(i, int) for i in rec.indices):
        return None
    return rec.loader, tuple(int(i) for i in rec.indices)
