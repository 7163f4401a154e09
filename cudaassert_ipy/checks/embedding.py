"""Checks for ``embedding`` / ``nn.Embedding`` (also with ``max_norm``) and ``embedding_bag``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from cudaassert_ipy.checks.common import (
    INDEX_DTYPES,
    arg,
    bad_details,
    caller_name,
    plain,
    read,
    read_minmax,
    readable,
)
from cudaassert_ipy.checks.errors import ValidationError, ValidationIndexError, ValidationIndexRuntimeError
from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.hints import TokenFacts


def check_embedding(op: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> ValidationError | None:
    """``embedding``: every id in ``[0, num_embeddings)``; negative ids are never valid."""
    ids = arg(args, kwargs, 0, "input")
    weight = arg(args, kwargs, 1, "weight")
    if not (readable(ids) and plain(weight)) or ids.dtype not in INDEX_DTYPES or weight.dim() != 2:
        return None
    num = weight.shape[0]
    padding_idx = arg(args, kwargs, 2, "padding_idx", None)
    if padding_idx is not None and not -num <= int(padding_idx) < num:
        return None  # torch's own AssertionError comes first
    lo, hi = read_minmax(ids)
    if lo >= 0 and hi < num:
        return None
    n_bad, examples, distinct = bad_details(ids, (ids < 0) | (ids >= num))
    facts = TokenFacts(bad=tuple(int(v) for v in distinct), num_embeddings=num)
    return ValidationIndexError.token_ids(caller_name(op), "input", n_bad, examples, facts)


def check_embedding_bag(op: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> ValidationError | None:
    """``embedding_bag``: ids in ``[0, num_embeddings)``; offsets start at 0, never decrease, stay <= len(input).

    With ``include_last_offset=True`` ids after the last offset are never read, so not checked
    (except with ``mode="max"``, where CPU PyTorch checks them anyway).
    Errors are both ``IndexError`` and ``RuntimeError`` (CPU raises either, depending on the case).
    """
    ids = arg(args, kwargs, 0, "input")
    weight = arg(args, kwargs, 1, "weight")
    offsets = arg(args, kwargs, 2, "offsets", None)
    if not (readable(ids) and plain(weight)) or ids.dtype not in INDEX_DTYPES or weight.dim() != 2:
        return None
    if ids.dim() == 2:
        if offsets is not None:
            return None  # torch raises ValueError
    elif ids.dim() == 1:
        if not (readable(offsets) and offsets.dim() == 1 and offsets.dtype in INDEX_DTYPES):
            return None
    else:
        return None
    num = weight.shape[0]
    n_ids = ids.numel()
    checked_ids = ids
    if offsets is None:
        lo, hi = read_minmax(ids)
        offsets_ok = True
    else:
        as_long = torch.int64
        if arg(args, kwargs, 9, "include_last_offset", False) and arg(args, kwargs, 6, "mode", "mean") != "max":
            # the last offset ends the last bag: ids after it are never read (mode="max" still
            # checks them on the CPU, so they stay checked there)
            unused = torch.arange(n_ids, device=ids.device) >= offsets[-1]
            checked_ids = ids.masked_fill(unused, 0)
        mn, mx = torch.aminmax(checked_ids)
        off_mn, off_mx = torch.aminmax(offsets)
        min_step = (offsets[1:] - offsets[:-1]).amin() if offsets.numel() > 1 else offsets.new_zeros(())
        parts = (mn, mx, off_mn, off_mx, offsets[0], min_step)
        lo, hi, off_lo, off_hi, first, step = read(torch.stack([p.to(as_long) for p in parts]))
        offsets_ok = first == 0 and step >= 0 and off_lo >= 0 and off_hi <= n_ids
    if lo >= 0 and hi < num and offsets_ok:
        return None
    name = caller_name(op)
    if not (lo >= 0 and hi < num):
        bad = (ids < 0) | (ids >= num)
        if offsets is not None and checked_ids is not ids:
            bad &= checked_ids == ids
        n_bad, examples, distinct = bad_details(ids, bad)
        facts = TokenFacts(bad=tuple(int(v) for v in distinct), num_embeddings=num)
        return ValidationIndexRuntimeError.token_ids(
            name, "input", n_bad, examples, facts, cause_id="embedding_bag_index_out_of_range"
        )
    # CPU raises RuntimeError, IndexError for a negative offset, and nothing at all for a decreasing
    # last offset with include_last_offset=True, which the CUDA kernel asserts on (end >= begin)
    assert offsets is not None
    prev = torch.cat([offsets.new_zeros(1), offsets[:-1]])
    bad = (offsets < prev) | (offsets > n_ids) | (offsets < 0)
    bad[0] = offsets[0] != 0
    n_bad, examples, _ = bad_details(offsets, bad)
    valid = f"offsets[0] == 0, never decreasing, at most len(input)={n_ids}"
    return ValidationIndexRuntimeError.out_of_range(
        name, "offsets", valid, n_bad, examples, cause_id="embedding_bag_offsets_not_increasing", hint=hints.OFFSETS
    )
