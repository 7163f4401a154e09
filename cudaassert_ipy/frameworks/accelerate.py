"""Hugging Face accelerate: no handler of its own around user code; one cleanup step that can follow a failure.

``find_executable_batch_size`` (also the Trainer's ``auto_find_batch_size``) re-raises anything but OOM, and
empties the device cache on entry: re-running it in a dead context raises there first, a follow-on.
The model under its wrappers is :func:`cudaassert_ipy.frameworks.generic.unwrap_model` (what
``accelerator.unwrap_model`` returns). Its DataLoaders (``DataLoaderShard``, ``DataLoaderDispatcher``) are
the bookmark's business (``data/``).
"""

from __future__ import annotations

import types
from typing import Optional, Sequence

from cudaassert_ipy.frameworks.base import Adapter, Step, frame_module, in_packages

__all__ = ["ADAPTER"]

PACKAGES = ("accelerate",)


def _step(frames: Sequence[types.FrameType]) -> Optional[Step]:
    for frame in reversed(frames):
        if in_packages(frame_module(frame), PACKAGES) and frame.f_code.co_name == "clear_device_cache":
            return Step("accelerate's clear_device_cache (find_executable_batch_size empties the cache on entry)")
    return None


ADAPTER = Adapter(name="accelerate", packages=PACKAGES, step=_step)
