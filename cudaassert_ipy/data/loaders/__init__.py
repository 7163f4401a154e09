"""What frameworks add to a torch DataLoader iteration: how far ahead they fetch, and where the real indices are.

Why here and not in the bookmark: the bookmark's hot path stays generic (torch's iterator classes); once per
iteration (the first ``__next__`` of a new iterator) :func:`inspect` looks at the frames that asked for the batch
and at the iterator's dataset, and says

- how many batches the framework fetches beyond the one it is processing (accelerate's ``DataLoaderShard``
  runs one ahead, the Trainer pulls all gradient-accumulation micro-batches of a step before the first
  forward, timm's ``PrefetchLoader`` one ahead, Lightning's fetcher one ahead for a loader of unknown length):
  the bookmark keeps that many more batches, and the report
  names the batch being processed at the error, or the candidates when it cannot know which;
- for fastai, whose loader drives torch's iterator over a counter, the dataset indices of batch ``k``.

Each framework's knowledge sits in a small module beside this one; none imports its framework (classes are
recognised by the modules of their bases, :func:`cudaassert_ipy.frameworks.base.made_by`).
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from cudaassert_ipy.data.loaders import accelerate, fastai, lightning, timm, transformers
from cudaassert_ipy.frameworks.base import frame_module, frame_self, in_packages

__all__ = ["DEFAULT_KEEP", "Ahead", "View", "inspect"]

DEFAULT_KEEP = 3  # batches kept per iterator when no framework fetches ahead: the failing one and 2 before it
_FRAMES = 24  # frames looked at above the first __next__ of an iteration
#: only these packages' frames are asked for their ``self``: reading a frame's locals on Python < 3.13 leaves a
#: snapshot of them on the frame (the user's loop frame would hold its last batch and loss until it runs on)
_PACKAGES = ("accelerate", "lightning", "pytorch_lightning", "timm", "transformers")


@dataclass(frozen=True)
class Ahead:
    """How many batches the loader had yielded after the one being processed at the error: low..high."""

    low: int
    high: int
    why: tuple[str, ...]  # one clause per framework that fetches ahead

    def __add__(self, other: Ahead) -> Ahead:
        return Ahead(self.low + other.low, self.high + other.high, self.why + other.why)


@dataclass(frozen=True)
class View:
    """One iteration as its framework sees it (plain values; built once per iteration, never per batch)."""

    ahead: Ahead | None = None
    keep: int = DEFAULT_KEEP
    #: batch number (0-based) -> the dataset indices it holds, where torch's sampler gives none (fastai)
    batch_indices: Callable[[int], Sequence[Any] | None] | None = None
    dataset: Any = None  # the dataset those indices index
    owner: Any = None  # the user's loader object (a fastai DataLoader), to name it


NOTHING = View()


def inspect(it: Any, frame: types.FrameType | None, default_keep: int = DEFAULT_KEEP) -> View:
    """Look once at a new iteration; never raises (the generic records stand without this)."""
    try:
        return _inspect(it, frame, default_keep)
    except Exception:
        return View(keep=default_keep)


def _inspect(it: Any, frame: types.FrameType | None, default_keep: int) -> View:
    ahead = Ahead(0, 0, ())
    seen: set[int] = set()
    n = 0
    while frame is not None and n < _FRAMES:
        obj = frame_self(frame) if in_packages(frame_module(frame), _PACKAGES) else None
        if obj is not None and id(obj) not in seen:
            seen.add(id(obj))
            for found in (accelerate.ahead(obj), lightning.ahead(obj), timm.ahead(obj),
                          transformers.ahead(obj, frame)):
                if found is not None:
                    ahead = ahead + Ahead(*found)
        frame, n = frame.f_back, n + 1
    fast = fastai.batches(getattr(it, "_dataset", None)) if "fastai" in sys.modules else None
    keep = max(default_keep, ahead.high + 2)  # the processed batch, what came after it, and 2 before it
    return View(ahead if ahead.high else None, keep, *(fast or (None, None, None)))
