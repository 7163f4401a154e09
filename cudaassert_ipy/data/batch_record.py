"""One recorded batch, as the DataLoader bookmark hands it out (``cudaassert_ipy.last_batches()``).

Why its own module: the bookmark is made at ``%load_ext``, but its records are read only after a failure or when
asked: this dataclass is built then, not at load (a frozen dataclass of eleven fields costs ``%load_ext``
about a millisecond).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cudaassert_ipy.frameworks.base import Ahead

__all__ = ["BatchRecord"]


@dataclass(frozen=True)
class BatchRecord:
    """One yielded batch, as :func:`cudaassert_ipy.last_batches` returns it."""

    loader: str | None  # the DataLoader's name in the notebook's namespace, when it has one
    epoch: int  # 0-based: how many earlier iterations of this loader were seen since loading
    batch: int  # 0-based, as enumerate(loader) counts
    indices: tuple[Any, ...] | None  # dataset indices from the sampler; None for an IterableDataset
    batch_object: Any = field(repr=False, compare=False, default=None)  # the yielded object (CPU only) or None
    note: str | None = None  # why the batch (or its indices) was not kept
    order: int = 0  # global yield order across all loaders: higher is later
    dataset: Any = field(repr=False, compare=False, default=None)
    sampler: Any = field(repr=False, compare=False, default=None)
    collate_fn: Any = field(repr=False, compare=False, default=None)
    #: how many batches its framework had yielded after the one being processed (accelerate, Trainer, timm)
    ahead: Ahead | None = field(repr=False, compare=False, default=None)
