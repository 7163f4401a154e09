"""What frameworks add to a torch DataLoader iteration: how far ahead they fetch, and where the real indices are.

Why here and not in the bookmark: the bookmark's hot path stays generic (torch's iterator classes); once per
iteration (the first ``__next__`` of a new iterator) :func:`inspect` looks at the frames that asked for the batch
and at the iterator's dataset, and says

- how many batches the frameworks fetch beyond the one being processed (the adapters' ``ahead`` hooks): the
  bookmark keeps that many more batches, and the report names the batch being processed at the error, or the
  candidates when it cannot know which;
- the dataset indices of batch ``k``, where a framework drives torch's iterator over a counter (``batches``).

The post-mortem asks :func:`is_loader` which objects are a framework's own loaders (their records are filed under
them), and the sample lookup asks :func:`float_labels` and :func:`image_of` about a framework's batch fields.

Each framework's knowledge sits in its own module, ``frameworks/<name>.py`` (its ``ADAPTER``'s loader hooks); this
module knows none of them: it asks the table (``frameworks/table.py``) for the adapters whose row names a hook
and whose packages are imported, and only those are loaded. Nothing here is imported at ``%load_ext``:
the bookmark loads this module at the first iteration, and the frameworks package (its dataclasses and the table)
comes with the first hook asked for.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cudaassert_ipy.frameworks.base import Ahead

__all__ = ["DEFAULT_KEEP", "View", "float_labels", "image_of", "inspect", "is_loader"]

DEFAULT_KEEP = 3  # batches kept per iterator when no framework fetches ahead: the failing one and 2 before it
_FRAMES = 24  # frames looked at above the first __next__ of an iteration


@dataclass(frozen=True)
class View:
    """One iteration as its framework sees it (plain values; built once per iteration, never per batch)."""

    ahead: Ahead | None = None
    keep: int = DEFAULT_KEEP
    #: batch number (0-based) -> the dataset indices it holds, where torch's sampler gives none (fastai)
    batch_indices: Callable[[int], Sequence[Any] | None] | None = None
    dataset: Any = None  # the dataset those indices index
    owner: Any = None  # the user's loader object (a fastai DataLoader), to name it


def inspect(it: Any, frame: types.FrameType | None, default_keep: int = DEFAULT_KEEP) -> View:
    """Look once at a new iteration; never raises (the generic records stand without this)."""
    try:
        return _inspect(it, frame, default_keep)
    except Exception:
        return View(keep=default_keep)


def _inspect(it: Any, frame: types.FrameType | None, default_keep: int) -> View:
    from cudaassert_ipy.frameworks.base import Ahead, frame_module, frame_self, in_packages
    from cudaassert_ipy.frameworks.table import adapters_with, packages_with

    hooks = [a.ahead for a in adapters_with("ahead") if a.ahead is not None]
    # only these packages' frames are asked for their ``self`` (the packages of the modules with an ``ahead``
    # hook): reading a frame's locals on Python < 3.13 leaves a snapshot of them on the frame (the user's loop
    # frame would hold its last batch and loss until it runs on)
    packages = packages_with("ahead")
    ahead = Ahead(0, 0, ())
    seen: set[int] = set()
    n = 0
    while hooks and frame is not None and n < _FRAMES:
        obj = frame_self(frame) if in_packages(frame_module(frame), packages) else None
        if obj is not None and id(obj) not in seen:
            seen.add(id(obj))
            for hook in hooks:
                found = hook(obj, frame)
                if found is not None:
                    ahead = ahead + found
        frame, n = frame.f_back, n + 1
    fast = None
    for adapter in adapters_with("batches"):
        fast = adapter.batches(getattr(it, "_dataset", None)) if adapter.batches is not None else None
        if fast is not None:
            break
    keep = max(default_keep, ahead.high + 2)  # the processed batch, what came after it, and 2 before it
    return View(ahead if ahead.high else None, keep, *(fast or (None, None, None)))


def is_loader(obj: Any) -> bool:
    """A framework's own loader (not a torch one): the records of its iterations are filed under it."""
    from cudaassert_ipy.frameworks.table import adapters_with

    return any(a.is_loader(obj) for a in adapters_with("is_loader") if a.is_loader is not None)


def float_labels() -> tuple[str, ...]:
    """The float batch fields the imported frameworks fill with whole-number class labels (``cls``)."""
    from cudaassert_ipy.frameworks.table import adapters_with

    return tuple(name for a in adapters_with("float_labels") for name in a.float_labels)


def image_of(batch: Any, row: int, rows: int) -> tuple[int, str | None] | None:
    """(the image's position in the batch, its file) for row ``row`` of a per-box field with ``rows`` rows, where a
    framework's batch says which image each box belongs to; else None."""
    from cudaassert_ipy.frameworks.table import adapters_with

    for adapter in adapters_with("image_of"):
        found = adapter.image_of(batch, row, rows) if adapter.image_of is not None else None
        if found is not None:
            return found
    return None
