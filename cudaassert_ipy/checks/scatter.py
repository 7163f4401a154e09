"""Checks for ``gather`` and the scatter family (``scatter``, ``scatter_add``, ``scatter_reduce``,
in place or not): indices in ``[0, size(dim))``, no negatives."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from cudaassert_ipy.checks.common import INDEX_DTYPES, arg, plain, readable
from cudaassert_ipy.checks.errors import ValidationError, ValidationRuntimeError
from cudaassert_ipy.checks.indexing import check_indices

_CAUSE = "scatter_gather_index_out_of_range_v2"


def check_gather_scatter(op: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Optional[ValidationError]:
    """``gather(input, dim, index)`` / ``scatter*(self, dim, index, ...)``: ``[0, self.size(dim))``."""
    self = arg(args, kwargs, 0, "input")
    dim = arg(args, kwargs, 1, "dim")
    index = arg(args, kwargs, 2, "index")
    if not (plain(self) and readable(index)) or index.dtype not in INDEX_DTYPES or not isinstance(dim, int):
        return None
    if self.dim() == 0 or not -self.dim() <= dim < self.dim():
        return None
    dim %= self.dim()
    what = "input" if "gather" in op else "self"
    return check_indices(
        op,
        self.shape,
        [(dim, index)],
        negative_ok=False,
        names=["index"],
        cause_id=_CAUSE,
        exc=ValidationRuntimeError,
        size_label=f"dimension {{dim}} of {what} has size {{size}}",
    )
