"""Name the dataset samples behind a validator's bad values, from the bookmark's latest batch.

Why here: checks/ must not know the bookmark or the notebook's names, so the extension installs
this lookup into :data:`cudaassert_ipy.checks.sample_naming.SAMPLE_NAMING` on load and removes it on
unload. A validator stops a call before it launches, so the batch it checks is the latest one
yielded; its moved copy (``targets.to("cuda")``) has the shape of the recorded CPU field, and
the values the checker reported must sit at those positions of that CPU field too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cudaassert_ipy.checks.sample_naming import SAMPLE_NAMING
from cudaassert_ipy.data.bookmark import Bookmark

if TYPE_CHECKING:
    from cudaassert_ipy.checks.errors import Example, SampleNames
    from cudaassert_ipy.checks.sample_naming import SampleLookup

__all__ = ["WHERE", "install", "lookup_for"]

WHERE = "batch {batch:,} of epoch {epoch} from {loader}"


def lookup_for(bookmark: Bookmark, user_ns: Callable[[], Mapping[str, Any]]) -> SampleLookup:
    """The lookup for ``SAMPLE_NAMING``; it never raises (the validator's message stands without it)."""

    def lookup(shape: tuple[int, ...], examples: Sequence[Example]) -> SampleNames | None:
        try:
            return _names(bookmark, user_ns(), shape, examples)
        except Exception:  # an odd batch or dataset: the validator's own message is complete without this line
            return None

    return lookup


def _names(
    bookmark: Bookmark, user_ns: Mapping[str, Any], shape: tuple[int, ...], examples: Sequence[Example]
) -> SampleNames | None:
    from cudaassert_ipy.data.post_mortem import loader_names
    from cudaassert_ipy.data.samples import _sample_name, fields

    loaders, datasets = loader_names(user_ns)
    records = bookmark.records(loaders)
    if not records or records[0].batch_object is None or records[0].indices is None:
        return None
    rec = records[0]
    indices = rec.indices
    assert indices is not None
    if not shape or len(indices) != shape[0]:
        return None
    for _path, t, _keys in fields(rec.batch_object):
        if tuple(t.shape) != shape or not t.is_cpu:
            continue
        if all(_same(t[pos].item(), value) for pos, value in examples):
            loader = f"`{rec.loader}`" if rec.loader else "an unnamed DataLoader"
            names = tuple(f"`{_sample_name(rec.dataset, indices[pos[0]], datasets, loader)}`" for pos, _ in examples)
            return names, WHERE.format(batch=rec.batch, epoch=rec.epoch, loader=loader)
    return None


def _same(recorded: Any, reported: Any) -> bool:
    if isinstance(recorded, float) and isinstance(reported, float) and math.isnan(recorded):
        return math.isnan(reported)
    return bool(recorded == reported)


def install(bookmark: Bookmark, user_ns: Callable[[], Mapping[str, Any]]) -> Callable[[], None]:
    """Point the validators at this bookmark; returns the undo for unload."""
    return SAMPLE_NAMING.install(lookup_for(bookmark, user_ns))
