"""The bookmark's public API: last_batches(), bad_samples(), failing_batch(loader).

Why in the shell layer: each reads the loaded extension of the running IPython shell (the
records live on it, never in module globals), and after a cudaassert restart the resume plan.
"""

from __future__ import annotations

from typing import Any

from cudaassert_ipy.data import reproduce
from cudaassert_ipy.data.batch_record import BatchRecord
from cudaassert_ipy.data.samples import BadSample
from cudaassert_ipy.shell.extension import current

__all__ = ["NOT_LOADED", "bad_samples", "failing_batch", "last_batches"]

NOT_LOADED = "The DataLoader bookmark is off: run `%load_ext cudaassert` (with CudaAssert.bookmark = True) first."


def last_batches() -> tuple[BatchRecord, ...]:
    """The recorded batches of every DataLoader, latest first (frozen records; CPU batches by reference)."""
    ext = current()
    if ext is None or ext.bookmark is None:
        return ()
    from cudaassert_ipy.data.post_mortem import loader_names

    loaders, _ = loader_names(ext.shell.user_ns)
    return tuple(ext.bookmark.records(loaders))


def bad_samples() -> tuple[BadSample, ...]:
    """The samples the last failure's check found out of range (latest batch first); () before any."""
    ext = current()
    check = ext.samples if ext is not None else None
    return check.samples if check is not None else ()


def failing_batch(loader: Any) -> Any:
    """A DataLoader over exactly the failing batch's samples of ``loader`` (same dataset, collate_fn, batch size).

    Works in the kernel that saw the failure while its context lives (CPU twins, validator stops) and,
    after Restart & replay, from the resume plan.
    """
    import torch.utils.data

    if not isinstance(loader, torch.utils.data.DataLoader):
        raise TypeError(reproduce.NOT_A_LOADER.format(type_name=type(loader).__name__))
    ext = current()
    if ext is None or ext.bookmark is None:
        raise RuntimeError(NOT_LOADED)
    failing = ext.samples.failing if ext.samples is not None else None
    # matches() implies a failing record with indices; the two checks after it say so to the type checker
    if reproduce.matches(ext.samples, loader) and failing is not None and failing.indices is not None:
        return reproduce.failing_loader(loader, failing.indices)
    plan = ext.resumed.plan if ext.resumed is not None else None
    entry = getattr(plan, "failing_batch", None)
    if entry is not None:
        name, indices = entry
        if ext.shell.user_ns.get(name) is loader:
            return reproduce.failing_loader(loader, indices)
    names = [k for k, v in ext.shell.user_ns.items() if v is loader and not k.startswith("_")]
    raise LookupError(reproduce.NO_FAILING_BATCH.format(loader=f"`{names[0]}`" if names else "this loader"))
