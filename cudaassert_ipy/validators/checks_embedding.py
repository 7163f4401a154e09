"""Checks for ``embedding`` / ``nn.Embedding`` (also with ``max_norm``) and ``embedding_bag``."""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Sequence

import torch

from cudaassert_ipy.validators.checks_common import (
    INDEX_DTYPES,
    arg,
    bad_details,
    caller_name,
    plain,
    range_text,
    read,
    read_minmax,
    readable,
)
from cudaassert_ipy.validators.errors import (
    ValidationError,
    ValidationIndexError,
    ValidationRuntimeError,
)


def _embedding_hint(num_embeddings: int, distinct: List[int]) -> str:
    hints = []
    too_big = [v for v in distinct if v >= num_embeddings]
    if too_big:
        top = max(too_big)
        hints.append(
            f"the embedding has num_embeddings={num_embeddings} (ids 0..{num_embeddings - 1}) but the ids "
            f"reach {top}: if the ids come from a tokenizer with added tokens, resize the embedding "
            "(model.resize_token_embeddings(len(tokenizer))) or build it with "
            f"num_embeddings={top + 1}; if they are positions, truncate sequences to the model's maximum length"
        )
    if -100 in distinct:
        hints.append(
            "-100 is the 'ignore' value for labels, not an input id: pad input_ids with the "
            "tokenizer's pad_token_id instead"
        )
    if any(v < 0 and v != -100 for v in distinct):
        hints.append(
            "embedding ids cannot be negative (a negative padding_idx is normalised on the module, "
            "the ids themselves are not): pad with a real id such as padding_idx"
        )
    return "; ".join(hints)


def check_embedding(op: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Optional[ValidationError]:
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
    return ValidationIndexError(
        op=caller_name(op),
        argument="input",
        valid=f"{range_text(0, num)} (num_embeddings={num})",
        n_bad=n_bad,
        examples=examples,
        cause_id="index_select_out_of_range",
        hint=_embedding_hint(num, distinct),
    )


def check_embedding_bag(op: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Optional[ValidationError]:
    """``embedding_bag``: ids in ``[0, num_embeddings)``; offsets start at 0, never decrease, stay <= len(input)."""
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
    if offsets is None:
        lo, hi = read_minmax(ids)
        offsets_ok = True
    else:
        as_long = torch.int64
        mn, mx = torch.aminmax(ids)
        off_mn, off_mx = torch.aminmax(offsets)
        min_step = (offsets[1:] - offsets[:-1]).amin() if offsets.numel() > 1 else offsets.new_zeros(())
        parts = (mn, mx, off_mn, off_mx, offsets[0], min_step)
        lo, hi, off_lo, off_hi, first, step = read(torch.stack([p.to(as_long) for p in parts]))
        offsets_ok = first == 0 and step >= 0 and off_lo >= 0 and off_hi <= n_ids
    if lo >= 0 and hi < num and offsets_ok:
        return None
    name = caller_name(op)
    if not (lo >= 0 and hi < num):
        n_bad, examples, distinct = bad_details(ids, (ids < 0) | (ids >= num))
        return ValidationRuntimeError(
            op=name,
            argument="input",
            valid=f"{range_text(0, num)} (num_embeddings={num})",
            n_bad=n_bad,
            examples=examples,
            cause_id="embedding_bag_index_out_of_range",
            hint=_embedding_hint(num, distinct),
        )
    assert offsets is not None
    prev = torch.cat([offsets.new_zeros(1), offsets[:-1]])
    bad = (offsets < prev) | (offsets > n_ids) | (offsets < 0)
    bad[0] = offsets[0] != 0
    n_bad, examples, _ = bad_details(offsets, bad)
    valid = f"offsets[0] == 0, never decreasing, at most len(input)={n_ids}"
    return ValidationRuntimeError(
        op=name,
        argument="offsets",
        valid=valid,
        n_bad=n_bad,
        examples=examples,
        cause_id="embedding_bag_offsets_not_increasing",
        hint=(
            "offsets are the start position of each bag in the flat input: build them with "
            "torch.cumsum of the bag lengths, starting at 0 "
            "(offsets = torch.cat([lengths.new_zeros(1), lengths.cumsum(0)[:-1]]))"
        ),
    )
