"""fastai: its ``DataLoader`` runs torch's iterator classes over a ``_FakeLoader`` whose "sampler" is a counter
(``Inf.count``): torch's indices are batch numbers. The dataset indices of an epoch are the list its ``__iter__``
drew (``self.__idxs``, name-mangled ``_DataLoader__idxs``) before it made the iterator; batch k holds
``idxs[k*bs:(k+1)*bs]`` (with workers too: batch k comes from worker k % n and torch yields them in order).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from cudaassert_ipy.frameworks.base import class_names, made_by

__all__ = ["batches", "is_loader"]


def batches(fake: Any) -> tuple[Callable[[int], Sequence[Any] | None], Any, Any] | None:
    """(batch number -> dataset indices, the dataset, the fastai DataLoader) for a fastai iteration; else None."""
    if fake is None or "_FakeLoader" not in class_names(fake) or not made_by(fake, ("fastai",)):
        return None
    dl = getattr(fake, "d", None)
    idxs = getattr(dl, "_DataLoader__idxs", None)  # this epoch's list: the next epoch draws a new one
    bs = getattr(dl, "bs", None) or 1
    if idxs is None or not getattr(dl, "indexed", True) or getattr(dl, "prebatched", False):
        return None

    def of(k: int) -> Sequence[Any] | None:
        chunk = idxs[k * bs:(k + 1) * bs]
        return list(chunk) if len(chunk) else None

    return of, getattr(dl, "dataset", None), dl


def is_loader(obj: Any) -> bool:
    """A fastai ``DataLoader`` (not a torch one): the records of its iterations are filed under it."""
    return made_by(obj, ("fastai",)) and "DataLoader" in class_names(obj) and hasattr(obj, "fake_l")
