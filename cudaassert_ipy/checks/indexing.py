"""Checks for indexing: ``x[idx]``, ``x[idx] = v``, ``index_put_``, ``index_select``, ``take`` /
``put_`` and ``index_add_`` / ``index_copy_`` / ``index_fill_``.

Negative indices are valid exactly where PyTorch accepts them: advanced indexing
(``x[idx]``, ``x[idx] = v``, ``index_put_``), ``index_fill_`` and ``take`` / ``put_``
(``[-size, size)``); nowhere else (``[0, size)``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from cudaassert_ipy.checks.common import (
    INDEX_DTYPES,
    LONG_ONLY,
    arg,
    bad_details,
    caller_name,
    plain,
    read,
    readable,
)
from cudaassert_ipy.checks.errors import (
    MAX_EXAMPLES,
    Example,
    ValidationError,
    ValidationIndexError,
    ValidationIndexRuntimeError,
    range_text,
)
from cudaassert_ipy.diagnose import hints

_MASK_DTYPES = (torch.bool, torch.uint8)
#: Key items that never hold an index to check (Python ints are bounds-checked by torch itself).
_PLAIN_KEY_TYPES = frozenset({int, slice, bool, type(None), type(Ellipsis)})
#: Above this length PyTorch never treats a list key as a tuple of indices (NumPy's legacy rule).
_LEGACY_TUPLE_MAX = 32


class _HostIndex:
    """A Python list used as an index: checked on the host, no device work."""

    def __init__(self, values: list[tuple[tuple[int, ...], int]]) -> None:
        self.values = values


IndexObj = Tensor | _HostIndex


# ---------------------------------------------------------------- parsing a key
def _flatten(seq: Any, prefix: tuple[int, ...] = ()) -> list[tuple[tuple[int, ...], Any]] | None:
    out: list[tuple[tuple[int, ...], Any]] = []
    for i, item in enumerate(seq):
        pos = (*prefix, i)
        if isinstance(item, (list, tuple)):
            inner = _flatten(item, pos)
            if inner is None:
                return None
            out.extend(inner)
        elif isinstance(item, (bool, int)):
            out.append((pos, item))
        else:
            return None  # tensors, floats, numpy scalars inside a list: leave it to torch
    return out


def _depth(seq: Any) -> int:
    depth = 0
    while isinstance(seq, (list, tuple)):
        depth += 1
        if not seq:
            break
        seq = seq[0]
    return depth


def _key_items(key: Any) -> tuple[Any, ...]:
    if isinstance(key, tuple):
        return key
    if isinstance(key, list) and len(key) < _LEGACY_TUPLE_MAX:
        for item in key:
            if isinstance(item, (Tensor, list, tuple, slice)) or item is None or item is Ellipsis:
                return tuple(key)  # legacy: x[[[0, 1], [1, 2]]] means x[[0, 1], [1, 2]]
    return (key,)


def _classify(item: Any) -> tuple[str, int, Any] | None:
    """(kind, dims consumed, payload) or None when the key is unusual enough to leave to torch."""
    if item is None or isinstance(item, bool):
        return ("none", 0, None)
    if item is Ellipsis:
        return ("ellipsis", 0, None)
    if isinstance(item, Tensor):
        if not plain(item):
            return None
        if item.dtype in _MASK_DTYPES:
            return ("mask", item.dim(), None)
        if item.dtype in INDEX_DTYPES:
            return ("index", 1, item)
        return None
    if isinstance(item, (int, slice)) or type(item).__name__ == "SymInt":
        return ("dim", 1, None)  # a Python int is bounds-checked on the host by torch itself
    if hasattr(item, "__array__") and hasattr(item, "dtype") and not isinstance(item, (list, tuple)):
        kind = getattr(item.dtype, "kind", "")  # a NumPy array: torch turns it into an index tensor
        if kind == "b":
            return ("mask", getattr(item, "ndim", 1), None)
        if kind in ("i", "u"):
            return ("index", 1, torch.as_tensor(item))
        return None
    if isinstance(item, (list, tuple)):
        flat = _flatten(item)
        if flat is None:
            return None
        values = [v for _, v in flat]
        if values and all(isinstance(v, bool) for v in values):
            return ("mask", _depth(item), None)
        if any(isinstance(v, bool) for v in values):
            return None
        return ("index", 1, _HostIndex(flat))
    return None


def parse_getitem_key(self_dim: int, key: Any) -> list[tuple[int, IndexObj]] | None:
    """[(dimension, index)] for the integer indices in ``key``; None to leave the call alone."""
    parsed = []
    for item in _key_items(key):
        info = _classify(item)
        if info is None:
            return None
        parsed.append(info)
    if sum(1 for kind, _, _ in parsed if kind == "ellipsis") > 1:
        return None
    consumed = sum(n for _, n, _ in parsed)
    if consumed > self_dim:
        return None  # "too many indices": torch's own IndexError
    dim = 0
    out: list[tuple[int, IndexObj]] = []
    for kind, n, payload in parsed:
        if kind == "ellipsis":
            dim += self_dim - consumed
        elif kind == "index":
            out.append((dim, payload))
        dim += n
    return out


def parse_index_put_indices(self_dim: int, indices: Any) -> list[tuple[int, IndexObj]] | None:
    if not isinstance(indices, (list, tuple)):
        return None
    out: list[tuple[int, IndexObj]] = []
    dim = 0
    for t in indices:
        if not isinstance(t, Tensor) or not plain(t):
            return None
        if t.dtype in _MASK_DTYPES:
            dim += t.dim()
        elif t.dtype in INDEX_DTYPES:
            out.append((dim, t))
            dim += 1
        else:
            return None
    return out if dim <= self_dim else None


# ---------------------------------------------------------------- checking parsed indices
def _index_hint(where: str, size: int, lo_ok: int, distinct: Sequence[int]) -> str:
    clauses = []
    too_big = [v for v in distinct if v >= size]
    if too_big:
        clauses.append(hints.INDEX_TOO_BIG.format(where=where, top=max(too_big), last=size - 1))
    if any(v < lo_ok for v in distinct):
        clauses.append(hints.INDEX_NO_NEGATIVES if lo_ok == 0 else hints.INDEX_NEGATIVE_FLOOR.format(lowest=lo_ok))
    return "; ".join(clauses)


def _host_bad(entry: _HostIndex, lo: int, hi: int) -> tuple[int, list[Example], list[int]]:
    bad = [(pos, v) for pos, v in entry.values if not lo <= v < hi]
    examples: list[Example] = [*bad[:MAX_EXAMPLES]]  # failure path: the copy costs nothing
    return len(bad), examples, sorted({v for _, v in bad})


def check_indices(
    op: str,
    self_shape: Sequence[int],
    entries: Sequence[tuple[int, IndexObj]],
    *,
    negative_ok: bool,
    names: Sequence[str],
    cause_id: str,
    exc: type[ValidationError] = ValidationIndexError,
    size_label: str = "dimension {dim} has size {size}",
) -> ValidationError | None:
    """Check each (dim, index) against ``self_shape[dim]``, with one read for all tensor indices.

    ``names[i]`` names entry ``i`` in the message ("index", "indices[1]", "index for dimension 2").
    """
    tensors = [t for _, t in entries if isinstance(t, Tensor) and readable(t)]
    bound_of = {}
    if tensors:
        parts: list[Tensor] = []
        for t in tensors:
            parts.extend(torch.aminmax(t))
        values = read(torch.stack([p.to(torch.int64) for p in parts]))
        bound_of = {id(t): (values[2 * i], values[2 * i + 1]) for i, t in enumerate(tensors)}
    for (dim, index), name in zip(entries, names):
        size = int(self_shape[dim])
        lo = -size if negative_ok else 0
        if isinstance(index, _HostIndex):
            n_bad, examples, distinct = _host_bad(index, lo, size)
            if not n_bad:
                continue
        else:
            if id(index) not in bound_of:
                continue
            mn, mx = bound_of[id(index)]
            if lo <= mn and mx < size:
                continue
            n_bad, examples, distinct = bad_details(index, (index < lo) | (index >= size))
        where = size_label.format(dim=dim, size=size)
        return exc.out_of_range(
            caller_name(op),
            name,
            f"{range_text(lo, size)} ({where})",
            n_bad,
            examples,
            cause_id=cause_id,
            hint=_index_hint(where, size, lo, distinct),
            example_label=name.split(" ")[0],
        )
    return None


# ---------------------------------------------------------------- checkers
_ADV = "advanced_indexing_out_of_range_v2"


def check_getitem(op: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> ValidationError | None:
    """``x[key]`` and ``x[key] = v``: integer indices in ``[-size, size)`` of their dimension."""
    if len(args) < 2:
        return None
    self, key = args[0], args[1]
    if type(key) is tuple:
        if all(type(item) in _PLAIN_KEY_TYPES for item in key):
            return None  # x[:, 0], x[..., :3]: the common case, nothing to check
    elif type(key) in _PLAIN_KEY_TYPES:
        return None  # x[0], x[1:], x[None]
    if not plain(self) or self.numel() == 0:
        return None
    entries = parse_getitem_key(self.dim(), key)
    if not entries:
        return None
    names = ["index"] if len(entries) == 1 else [f"index for dimension {d}" for d, _ in entries]
    return check_indices(op, self.shape, entries, negative_ok=True, names=names, cause_id=_ADV)


def check_index_put(op: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> ValidationError | None:
    """``index_put_(indices, values)``: like ``x[indices] = values``."""
    self = arg(args, kwargs, 0, "input")
    indices = arg(args, kwargs, 1, "indices")
    if not plain(self) or self.numel() == 0:
        return None
    entries = parse_index_put_indices(self.dim(), indices)
    if not entries:
        return None
    position = {id(t): i for i, t in enumerate(indices)}
    names = [f"indices[{position[id(t)]}]" for _, t in entries]
    return check_indices(op, self.shape, entries, negative_ok=True, names=names, cause_id=_ADV)


def _dim_index_check(
    op: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    *,
    dtypes: frozenset[torch.dtype],
    negative_ok: bool,
    cause_id: str,
    exc: type[ValidationError] = ValidationIndexError,
) -> ValidationError | None:
    self = arg(args, kwargs, 0, "input")
    dim = arg(args, kwargs, 1, "dim")
    index = arg(args, kwargs, 2, "index")
    if not (plain(self) and readable(index)) or index.dtype not in dtypes or not isinstance(dim, int):
        return None
    if self.dim() == 0 or not -self.dim() <= dim < self.dim():
        return None
    dim %= self.dim()
    return check_indices(
        op, self.shape, [(dim, index)], negative_ok=negative_ok, names=["index"], cause_id=cause_id, exc=exc
    )


def check_index_select(op: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> ValidationError | None:
    """``index_select``: ``[0, size)``, no negatives. CPU raises IndexError or RuntimeError: both."""
    return _dim_index_check(
        op,
        args,
        kwargs,
        dtypes=INDEX_DTYPES,
        negative_ok=False,
        cause_id="index_select_out_of_range",
        exc=ValidationIndexRuntimeError,
    )


def check_index_add(op: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> ValidationError | None:
    """``index_add_``: ``[0, size)``, no negatives. CPU raises IndexError or RuntimeError: both."""
    return _dim_index_check(
        op,
        args,
        kwargs,
        dtypes=INDEX_DTYPES,
        negative_ok=False,
        cause_id="index_add_out_of_range",
        exc=ValidationIndexRuntimeError,
    )


def check_index_copy(op: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> ValidationError | None:
    """``index_copy_``: int64 only, ``[0, size)``."""
    return _dim_index_check(op, args, kwargs, dtypes=LONG_ONLY, negative_ok=False, cause_id="index_copy_out_of_range")


def check_index_fill(op: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> ValidationError | None:
    """``index_fill_``: int64 only, ``[-size, size)``."""
    return _dim_index_check(op, args, kwargs, dtypes=LONG_ONLY, negative_ok=True, cause_id="index_fill_out_of_range")


def check_take_put(op: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> ValidationError | None:
    """``take`` / ``put_``: flat indices in ``[-numel, numel)``, int64 only."""
    self = arg(args, kwargs, 0, "input")
    index = arg(args, kwargs, 1, "index")
    if not (plain(self) and readable(index)) or index.dtype not in LONG_ONLY:
        return None
    return check_indices(
        op,
        (self.numel(),),
        [(0, index)],
        negative_ok=True,
        names=["index"],
        cause_id="take_put_out_of_range",
        size_label="the tensor has {size} elements",
    )
