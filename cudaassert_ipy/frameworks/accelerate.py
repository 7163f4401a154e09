"""Hugging Face accelerate: no handler of its own around user code; one cleanup step that can follow a failure.

``find_executable_batch_size`` (also the Trainer's ``auto_find_batch_size``) re-raises anything but OOM, and
empties the device cache on entry: re-running it in a dead context raises there first, a follow-on.
The model under its wrappers is :func:`cudaassert_ipy.frameworks.generic.unwrap_model` (what
``accelerator.unwrap_model`` returns). Its DataLoaders fetch ahead (the bookmark's ``ahead`` hook):
``DataLoaderShard`` yields batch k after fetching batch k+1 ("we iterate one batch ahead to check when we are at
the end"); ``DataLoaderDispatcher`` fetches on rank 0 for every process, and one step ahead.
"""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Any

from cudaassert_ipy.frameworks.base import Adapter, Ahead, Step, class_names, frame_module, in_packages, made_by

__all__ = ["ADAPTER"]

PACKAGES = ("accelerate",)


def _step(frames: Sequence[types.FrameType]) -> Step | None:
    for frame in reversed(frames):
        if in_packages(frame_module(frame), PACKAGES) and frame.f_code.co_name == "clear_device_cache":
            return Step("accelerate's clear_device_cache (find_executable_batch_size empties the cache on entry)")
    return None


# -- the DataLoader bookmark (data/loaders)
SHARD = "accelerate's DataLoaderShard fetches the next batch before it yields one"
DISPATCHER = "accelerate's DataLoaderDispatcher fetches the next step's {n} before it yields one"


def _ahead(obj: Any, frame: types.FrameType) -> Ahead | None:
    """How far ahead ``obj`` fetched, when it is one of accelerate's loaders iterating; None otherwise."""
    if not made_by(obj, ("accelerate",)):
        return None
    names = class_names(obj)
    if "DataLoaderDispatcher" in names:
        n = _processes(obj)
        return Ahead(n, n, (DISPATCHER.format(n="batch" if n == 1 else f"{n} batches (one per process)"),))
    if "DataLoaderShard" in names:
        return Ahead(1, 1, (SHARD,))
    return None


def _processes(obj: Any) -> int:
    state = getattr(obj, "state", None)
    n = getattr(state, "num_processes", 1)
    return n if isinstance(n, int) and n > 0 else 1


ADAPTER = Adapter(name="accelerate", packages=PACKAGES, step=_step, ahead=_ahead)
