"""timm: ``PrefetchLoader`` moves batch k+1 to the device on a side stream before it yields batch k."""

from __future__ import annotations

from typing import Any

from cudaassert_ipy.frameworks.base import class_names, made_by

__all__ = ["ahead"]

PREFETCH = "timm's PrefetchLoader fetches the next batch before it yields one"


def ahead(obj: Any) -> tuple[int, int, tuple[str, ...]] | None:
    if made_by(obj, ("timm",)) and "PrefetchLoader" in class_names(obj):
        return 1, 1, (PREFETCH,)
    return None
