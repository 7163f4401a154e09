"""Helpers shared by the ``checks_*`` modules.

Every checker has the signature ``check(op, args, kwargs) -> ValidationError | None``: it
reads the call's arguments, returns ``None`` for a valid (or uncheckable) call and an error
for a bad one. The mode raises it. Checkers never modify their inputs.

Cost rule: on the success path a checker runs a few small reductions on the device, packs
their results into one tensor and reads it with **one** ``tolist()`` (the only device-to-host
sync on CUDA; on CPU there is nothing to wait for). Only on failure does it gather details
(counts, positions, values), where extra syncs do not matter.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from types import FrameType
from typing import Any, TypeGuard, cast

import torch
from torch import Tensor

from cudaassert_ipy.checks.errors import MAX_EXAMPLES, Example, ValidationError

Checker = Callable[[str, Sequence[Any], Mapping[str, Any]], ValidationError | None]

INDEX_DTYPES = frozenset({torch.int64, torch.int32})
LONG_ONLY = frozenset({torch.int64})

_PLAIN_TYPES = (torch.Tensor, torch.nn.Parameter)
_is_functorch_wrapped = torch._C._functorch.is_functorch_wrapped_tensor


def arg(args: Sequence[Any], kwargs: Mapping[str, Any], index: int, name: str, default: Any = None) -> Any:
    """The argument passed positionally at ``index`` or by keyword ``name``."""
    if index < len(args):
        return args[index]
    return kwargs.get(name, default)


def plain(t: object) -> TypeGuard[Tensor]:
    """A plain dense tensor whose shape we can trust (not fake, meta, sparse, vmap-wrapped...)."""
    if type(t) not in _PLAIN_TYPES:
        return False
    tensor = cast(Tensor, t)  # the exact-type test above is one mypy cannot read
    return (
        tensor.layout is torch.strided
        and not tensor.is_meta
        and not tensor.is_quantized
        and not _is_functorch_wrapped(tensor)
    )


def readable(t: object) -> TypeGuard[Tensor]:
    """:func:`plain`, non-empty, and its values can be read now (not during CUDA graph capture)."""
    if not plain(t) or t.numel() == 0:
        return False
    return not (t.is_cuda and torch.cuda.is_current_stream_capturing())


def read(packed: Tensor) -> list[Any]:
    """The one device-to-host read of a checked call."""
    return packed.tolist()


def read_flag(flag: Tensor) -> bool:
    """The one device-to-host read, for a 0-dim bool flag."""
    return bool(flag.tolist())


def aminmax_pair(t: Tensor) -> tuple[Tensor, Tensor]:
    """(min, max) of ``t`` as 0-dim tensors (bool is read as 0/1)."""
    if t.dtype is torch.bool:
        t = t.to(torch.uint8)
    mn, mx = torch.aminmax(t)
    return mn, mx


def read_minmax(*tensors: Tensor) -> list[Any]:
    """Min and max of each tensor, all in one read: ``[min0, max0, min1, max1, ...]``."""
    parts: list[Tensor] = []
    for t in tensors:
        parts.extend(aminmax_pair(t))
    dtype = parts[0].dtype
    if any(p.dtype is not dtype for p in parts):
        for p in parts[1:]:
            dtype = torch.promote_types(dtype, p.dtype)
        parts = [p.to(dtype) for p in parts]
    return read(torch.stack(parts))


def unravel(flat: int, shape: Sequence[int]) -> tuple[int, ...]:
    out = []
    for size in reversed(shape):
        flat, rem = divmod(flat, size)
        out.append(rem)
    return tuple(reversed(out))


def bad_details(t: Tensor, bad: Tensor, k: int = MAX_EXAMPLES) -> tuple[int, list[Example], list[Any]]:
    """(count, first ``k`` (position, value) pairs, up to 10 distinct bad values) for a bad-mask.

    Failure path only: several small syncs are fine here.
    """
    flat_bad = bad.reshape(-1)
    n_bad = int(flat_bad.sum().item())
    where = flat_bad.nonzero().squeeze(1)
    first = where[:k].tolist()
    values = t.reshape(-1)[where[:k]].tolist()
    examples = [(unravel(i, tuple(t.shape)), v) for i, v in zip(first, values)]
    distinct = torch.unique(t.reshape(-1)[where]).tolist()
    if len(distinct) > 10:
        distinct = distinct[:5] + distinct[-5:]
    return n_bad, examples, distinct


# ------------------------------------------------------------------ naming the call
_HERE = os.path.dirname(os.path.abspath(__file__))
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))
_PASS_THROUGH = {
    os.path.join(_TORCH_DIR, "overrides.py"),
    os.path.join(_TORCH_DIR, "nn", "functional.py"),
    os.path.join(_TORCH_DIR, "_tensor.py"),
    os.path.join(_TORCH_DIR, "functional.py"),
}
_NN_MODULES = os.path.join(_TORCH_DIR, "nn", "modules") + os.sep
_DISTRIBUTIONS = os.path.join(_TORCH_DIR, "distributions") + os.sep


def caller_name(default: str, skip_files: Sequence[str] = ()) -> str:
    """Name the call the way the user wrote it (failure path only: walks the stack).

    ``F.embedding`` called from ``nn.Embedding.forward`` becomes ``nn.Embedding``;
    ``torch.multinomial`` called from ``Categorical.sample`` becomes ``Categorical.sample``.
    Frames in this package, in torch's pass-through wrappers and in ``skip_files`` are skipped.
    """
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename)
        if filename.startswith(_HERE) or filename in _PASS_THROUGH or filename in skip_files:
            frame = frame.f_back
            continue
        break
    if frame is None:
        return default
    owner = frame.f_locals.get("self")
    if filename.startswith(_NN_MODULES) and frame.f_code.co_name == "forward" and owner is not None:
        return f"nn.{type(owner).__name__}"
    if filename.startswith(_DISTRIBUTIONS) and owner is not None:
        return f"{type(owner).__name__}.{frame.f_code.co_name}"
    return default
