"""``%%cuda_debug``'s guard: after each torch call, a device sync (``sync``) and/or a stop at the first NaN/inf.

A ``TorchFunctionMode`` like the validators' (:mod:`.mode`), pushed for one cell by the shell's magic
(``shell/debug_cell.py``), which keeps only the magic: parsing its line, compiling and running the cell. The mode
knows nothing of IPython: where the cell's line is, it asks the ``locate`` callable it is given.

``sync`` makes an asynchronous CUDA failure surface at the Python line that launched it, without restarting the
kernel with ``CUDA_LAUNCH_BLOCKING=1``: torch's own error gets a note naming the call. ``nan`` raises
:class:`~cudaassert_ipy.checks.errors.NonFiniteError` at the first call whose floating-point output holds NaN or inf
that this call made (not memory nobody wrote yet, not a view of memory that already held it).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from cudaassert_ipy.base.passthrough import drop_own_frame
from cudaassert_ipy.checks.common import caller_name, readable
from cudaassert_ipy.checks.errors import NonFiniteError

__all__ = ["GENERIC_NAN_HINT", "SYNC_NOTE", "CellLine", "DebugMode", "call_name", "nan_hint"]

#: (filename, line number, line text, label such as ``cell In[3]``) of the user's line; (None, None, "", ...) if unknown
CellLine = tuple[str | None, int | None, str, str]

SYNC_NOTE = (
    "%%cuda_debug --sync: this error surfaced in the synchronisation right after {op}{where}, so that "
    "call (or a kernel it launched) failed."
)
_NAN_HINTS = (
    (("log",), "log of a value <= 0: clamp the input first (x.clamp_min(eps)) or use log1p/log_softmax"),
    (("div", "truediv", "reciprocal", "rsqrt"), "division by zero: add an epsilon to the denominator"),
    (("sqrt", "pow"), "sqrt/pow of a negative value or of 0 with a negative exponent: clamp the input"),
    (
        ("exp", "softmax", "sigmoid", "cosh", "sinh"),
        "overflow: compute in float32 (not float16), or use log-sum-exp forms such as log_softmax / logsumexp",
    ),
)
GENERIC_NAN_HINT = (
    "check this call's inputs (min/max, torch.isfinite); if it happens during training, lower the learning "
    "rate, clip gradients (torch.nn.utils.clip_grad_norm_) or train in float32/bfloat16 instead of float16"
)
# Calls that hand back memory nobody has written yet: whatever bytes it holds (NaN included) are not a result.
_UNINITIALISED = frozenset(
    {
        "empty",
        "empty_like",
        "empty_strided",
        "empty_permuted",
        "new_empty",
        "new_empty_strided",
        "resize_",
        "resize_as_",
    }
)


def nan_hint(op: str) -> str:
    """The likely fix for NaN/inf out of ``op`` (``torch.log``, ``Tensor.div_`` ...)."""
    short = op.rsplit(".", 1)[-1].strip("_").lower()
    for names, hint in _NAN_HINTS:
        if any(name in short for name in names):
            return hint + "; otherwise " + GENERIC_NAN_HINT
    return GENERIC_NAN_HINT


def call_name(func: Any) -> str:
    """``torch.log``, ``Tensor.div_``, ``F.linear`` ..."""
    name = getattr(func, "__name__", None) or repr(func)
    qualname = getattr(func, "__qualname__", "") or ""
    module = getattr(func, "__module__", None) or ""
    if qualname.startswith(("TensorBase.", "Tensor.")):
        return f"Tensor.{name}"
    if module.startswith("torch.nn.functional") or module == "torch._C._nn":
        return f"F.{name}"
    if module.startswith("torch") or qualname.startswith("_VariableFunctionsClass."):
        return f"torch.{name}"
    return str(name)


def _writes_in_place(name: str, kwargs: Any) -> bool:
    """``add_``, ``__iadd__``, ``out=``: the result is an input's memory written by this call."""
    if kwargs and kwargs.get("out") is not None:
        return True
    if name.startswith("__i") and name.endswith("__"):
        return True
    return name.endswith("_") and not name.endswith("__")


def _aliases_an_input(t: torch.Tensor, args: Sequence[Any], kwargs: Any) -> bool:
    """A view (``x[0]``, ``.view``, ``Parameter(x)``) shares an input's memory: it cannot have made the NaN."""
    try:
        ptr = t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # meta / sparse / functional tensors
        return False
    for a in (*args, *(kwargs or {}).values()):
        if isinstance(a, torch.Tensor) and a.layout == torch.strided:
            try:
                if a.untyped_storage().data_ptr() == ptr:
                    return True
            except (RuntimeError, NotImplementedError):
                continue
    return False


def _tensors(out: Any) -> list[Any]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for t in out if isinstance(t, torch.Tensor)]
    return []


def _nowhere() -> CellLine:
    return None, None, "", "the cell"


class DebugMode(TorchFunctionMode):
    """After each torch call: synchronise (``sync``) and/or stop at NaN/inf (``nan``); ``locate`` finds the line."""

    def __init__(self, *, sync: bool, nan: bool, locate: Callable[[], CellLine] = _nowhere) -> None:
        super().__init__()
        self.sync = sync
        self.nan = nan
        self.locate = locate

    def __torch_function__(self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Any = None) -> Any:
        __tracebackhide__ = True
        try:
            out = func(*args, **(kwargs or {}))
        except BaseException as passing:  # torch's own error, unchanged (see passthrough)
            drop_own_frame(passing)
            raise
        if getattr(func, "__name__", "") == "__get__" or torch.compiler.is_compiling():
            return out  # property reads (.grad, .shape): not a computation
        tensors = _tensors(out)
        if not tensors:
            return out
        if self.sync and any(getattr(t, "is_cuda", False) for t in tensors):
            self._synchronize(func, tensors)
        if self.nan:
            error = self._check_finite(func, args, kwargs, tensors)
            if error is not None:
                raise error
        return out

    def _name(self, func: Any) -> str:
        name = call_name(func)
        owner = caller_name("")
        return f"{name} (inside {owner})" if owner and owner != name else name

    def _synchronize(self, func: Any, tensors: list[Any]) -> None:
        device = next(t.device for t in tensors if t.is_cuda)
        try:
            torch.cuda.synchronize(device)
        except RuntimeError as e:
            _, lineno, line, label = self.locate()
            where = f" at {label}, line {lineno}: {line.strip()}" if lineno is not None else ""
            note = SYNC_NOTE.format(op=self._name(func), where=where)
            if hasattr(e, "add_note"):  # Python 3.11+
                e.add_note(note)
            else:
                print(note, file=sys.stderr)
            raise

    def _check_finite(self, func: Any, args: Sequence[Any], kwargs: Any, tensors: list[Any]) -> NonFiniteError | None:
        name = getattr(func, "__name__", "")
        if name in _UNINITIALISED:
            return None
        for t in tensors:
            if not readable(t) or not (t.is_floating_point() or t.is_complex()):
                continue
            if bool(torch.isfinite(t).all()):
                continue
            if not _writes_in_place(name, kwargs) and _aliases_an_input(t, args, kwargs):
                continue  # a view of memory that already held NaN/inf; the next call that computes with it is named
            inputs = [
                a
                for a in (*args, *(kwargs or {}).values())
                if isinstance(a, torch.Tensor) and readable(a) and (a.is_floating_point() or a.is_complex())
            ]
            n_nan, n_inf = int(torch.isnan(t).sum()), int(torch.isinf(t).sum())
            inputs_finite = all(bool(torch.isfinite(a).all()) for a in inputs) if inputs else None
            op = self._name(func)
            return NonFiniteError.from_output(
                op,
                n_nan,
                n_inf,
                tuple(t.shape),
                str(t.dtype).replace("torch.", ""),
                self.locate(),
                inputs_finite,
                nan_hint(op),
            )
        return None
