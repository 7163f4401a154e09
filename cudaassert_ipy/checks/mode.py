"""The validators' ``TorchFunctionMode`` and the table from user-facing call to checker.

Why a function mode: measured on CPU torch 2.13 it adds +9-15% to a training step and names
calls the way users write them (``cross_entropy``, ``Tensor.__getitem__``); a
``TorchDispatchMode`` costs +37-61% and silently turns ``torch.compile`` off.

What it sees: every top-level torch API call, including those made inside
``nn.Module.forward`` (``F.embedding``, ``F.cross_entropy``...). It does not see calls nested
inside another torch function or issued from C++, nor backward ops.

When it checks nothing (and so never gets in the way):

* while ``torch.compile`` / ``torch.export`` trace (``torch.compiler.is_compiling()``), while
  ``torch.jit.trace`` records, and inside the autograd engine (backward re-uses the forward's
  indices, which autograd's version counter already protects);
* for fake, meta, sparse, quantized, tensor-subclass and functorch-wrapped (``vmap``,
  ``torch.func.grad``) tensors, for empty tensors, and during CUDA graph capture;
* during ``optimizer.step()`` and ``optimizer.zero_grad()``: the mode leaves the stack for them
  (no risky op there, and most of a small training step's calls are there); a closure passed to
  ``step`` is checked all the same (Lightning runs ``training_step`` in one, LBFGS re-evaluates the loss).

On CPU, the functional calls whose CPU kernel checks the very range the checker checks, raises
before writing anything and leaves its inputs alone (``cross_entropy``, ``embedding`` without
``max_norm``, ``x[idx]``, ``gather``, ``index_select``, ``one_hot``, ``multinomial`` ...) run
first, and the checker runs only if the kernel raised, to replace its error with the full
diagnosis: the same error as checking first, at no cost on valid input (a CPU failure kills no
context). In-place calls, and those CPU does not check (``ctc_loss``, ``embedding_bag``,
``repeat_interleave``, ``embedding`` with ``max_norm``), are checked first on every device.
``ValidatorMode.trust_cpu_kernels = False`` checks everything first (the tests use it to run
the CUDA path on CPU).

Thread-locality: torch keeps the mode stack per thread. ``enable_validators()`` affects the
calling thread only; calls made in other threads (a ``DataLoader`` worker thread, a
``ThreadPoolExecutor``) are not checked unless that thread enables validators too.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import torch
from torch import overrides as _overrides
from torch.overrides import TorchFunctionMode

from cudaassert_ipy.base.passthrough import drop_own_frame
from cudaassert_ipy.checks import embedding as emb
from cudaassert_ipy.checks import indexing as idx
from cudaassert_ipy.checks import losses as losses
from cudaassert_ipy.checks import misc as misc
from cudaassert_ipy.checks import sampling as sampling
from cudaassert_ipy.checks import scatter as scatter
from cudaassert_ipy.checks.common import Checker, arg
from cudaassert_ipy.checks.errors import ValidationError
from cudaassert_ipy.checks.sample_naming import SAMPLE_NAMING

__all__ = [
    "BYPASS",
    "CHECKED_CALLS",
    "OptimizerBypass",
    "ValidatorMode",
    "disable",
    "enable",
    "enabled",
    "push",
    "resume_suspended",
]

_EMPTY: Mapping[str, Any] = {}

# Tensor methods (and their torch.* twins where they exist) -> checker
_METHODS: Sequence[tuple[str, Checker]] = (
    ("__getitem__", idx.check_getitem),
    ("__setitem__", idx.check_getitem),
    ("index_put_", idx.check_index_put),
    ("index_put", idx.check_index_put),
    ("index_select", idx.check_index_select),
    ("take", idx.check_take_put),
    ("put_", idx.check_take_put),
    ("put", idx.check_take_put),
    ("index_add_", idx.check_index_add),
    ("index_add", idx.check_index_add),
    ("index_copy_", idx.check_index_copy),
    ("index_copy", idx.check_index_copy),
    ("index_fill_", idx.check_index_fill),
    ("index_fill", idx.check_index_fill),
    ("gather", scatter.check_gather_scatter),
    ("scatter", scatter.check_gather_scatter),
    ("scatter_", scatter.check_gather_scatter),
    ("scatter_add", scatter.check_gather_scatter),
    ("scatter_add_", scatter.check_gather_scatter),
    ("scatter_reduce", scatter.check_gather_scatter),
    ("scatter_reduce_", scatter.check_gather_scatter),
    ("multinomial", sampling.check_multinomial),
    ("bernoulli", sampling.check_bernoulli),
    ("bernoulli_", sampling.check_bernoulli_),
    ("repeat_interleave", misc.check_repeat_interleave),
)


# When a call's CPU kernel is its own exact validator (see the module docstring): a predicate on
# (args, kwargs). Established by the "raises exactly when CPU does" property tests of each op.
CpuSelfChecked = Callable[[Sequence[Any], Mapping[str, Any]], bool] | None


def _always(args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool:
    return True


def _embedding_without_max_norm(args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool:
    return arg(args, kwargs, 3, "max_norm") is None  # max_norm renormalises weight rows in place first


#: functional calls CPU checks exactly (in-place ones may have written part of the result when they raise)
_CPU_SELF_CHECKED_METHODS = frozenset(
    {
        "__getitem__",
        "index_put",
        "index_select",
        "take",
        "put",
        "index_add",
        "index_copy",
        "index_fill",
        "gather",
        "scatter",
        "scatter_add",
        "scatter_reduce",
        "multinomial",
        "bernoulli",
    }
)


def _build_table() -> dict[Callable[..., Any], tuple[Checker, str, CpuSelfChecked]]:
    F = torch.nn.functional
    table: dict[Callable[..., Any], tuple[Checker, str, CpuSelfChecked]] = {
        F.cross_entropy: (losses.check_cross_entropy, "cross_entropy", _always),
        F.nll_loss: (losses.check_cross_entropy, "nll_loss", _always),
        F.binary_cross_entropy: (losses.check_binary_cross_entropy, "binary_cross_entropy", _always),
        F.ctc_loss: (losses.check_ctc_loss, "ctc_loss", None),
        F.embedding: (emb.check_embedding, "embedding", _embedding_without_max_norm),
        F.embedding_bag: (emb.check_embedding_bag, "embedding_bag", None),
        F.one_hot: (misc.check_one_hot, "one_hot", _always),
    }
    for name, checker in _METHODS:
        self_checked = _always if name in _CPU_SELF_CHECKED_METHODS else None
        for owner, prefix in ((torch._C.TensorBase, "Tensor."), (torch.Tensor, "Tensor."), (torch, "torch.")):
            fn = getattr(owner, name, None)
            if fn is not None and fn not in table:
                table[fn] = (checker, prefix + name, self_checked)
    return table


_TABLE = _build_table()
#: The user-facing names of every checked call (for docs and tests).
CHECKED_CALLS = tuple(sorted({entry[1] for entry in _TABLE.values()}))
#: Those whose CPU kernel checks them (for some arguments: see ``_build_table``).
CPU_SELF_CHECKED_CALLS = tuple(sorted({entry[1] for entry in _TABLE.values() if entry[2] is not None}))

# torch's mode stack (private and untyped in torch: typed once here, the boundary)
_push_mode: Callable[[TorchFunctionMode], None] = _overrides._push_mode
_pop_mode: Callable[[], TorchFunctionMode] = _overrides._pop_mode
_get_current_function_mode_stack: Callable[[], list[TorchFunctionMode]] = _overrides._get_current_function_mode_stack
_is_compiling = torch.compiler.is_compiling
_tracing_state = torch._C._get_tracing_state
_graph_task_id = torch._C._current_graph_task_id
_stack_depth = torch._C._len_torch_function_stack
_stack_at = torch._C._get_function_stack_at


def _checks_paused() -> bool:
    """True while tracing/compiling or inside the autograd engine: leave the call alone."""
    return _is_compiling() or _tracing_state() is not None or _graph_task_id() != -1


def _all_on_cpu(args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool:
    """Every tensor argument (also inside an index tuple) lives on the CPU: the CPU kernel runs."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            if not value.is_cpu:
                return False
        elif isinstance(value, (tuple, list)) and any(isinstance(v, torch.Tensor) and not v.is_cpu for v in value):
            return False
    return True


class ValidatorMode(TorchFunctionMode):
    """Checks the inputs of the calls that would hit a device-side assert, before they launch.

    Raises a :class:`~cudaassert_ipy.checks.errors.ValidationError` subclass (also an
    ``IndexError`` / ``RuntimeError`` like CPU PyTorch) instead. Never modifies inputs.
    """

    #: let an exact CPU kernel check first and explain only its failures (module docstring)
    trust_cpu_kernels = True

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
    ) -> Any:
        __tracebackhide__ = True  # torch's own errors show no frame of ours (see passthrough)
        kwargs = kwargs or _EMPTY
        entry = _TABLE.get(func)
        try:
            if entry is None or _checks_paused():
                return func(*args, **kwargs)
            checker, name, self_checked = entry
            if (
                self_checked is None
                or not self.trust_cpu_kernels
                or not _all_on_cpu(args, kwargs)
                or not self_checked(args, kwargs)
            ):
                error = checker(name, args, kwargs)
                if error is not None:
                    raise _name_samples(error, args, kwargs)
                return func(*args, **kwargs)
            try:
                return func(*args, **kwargs)
            except Exception:
                error = checker(name, args, kwargs)
                if error is None:
                    raise  # not a bad value: torch's own error, unchanged
            raise _name_samples(error, args, kwargs) from None
        except ValidationError:
            raise  # our own stop: the report explains it
        except BaseException as passing:
            drop_own_frame(passing)
            raise


def _name_samples(error: ValidationError, args: Sequence[Any], kwargs: Mapping[str, Any]) -> ValidationError:
    """Failure path: name the dataset samples when a checked tensor has the shape of a recorded batch field.

    Only shapes are read here; the extension's lookup (``SAMPLE_NAMING``) compares the reported values
    with the recorded CPU batch, so an unrelated tensor of the same shape names nothing.
    """
    lookup = SAMPLE_NAMING.current()
    if lookup is None or not error.examples or not error.examples[0][0]:
        return error
    rank = len(error.examples[0][0])
    named = kwargs.get(error.argument)
    candidates = [named] if isinstance(named, torch.Tensor) else []
    for value in (*args, *kwargs.values()):
        candidates += [
            v for v in (value if isinstance(value, (tuple, list)) else (value,)) if isinstance(v, torch.Tensor)
        ]
    try:
        for t in candidates:
            if t.dim() == rank:
                names = lookup(tuple(t.shape), error.examples)
                if names is not None:
                    error.name_samples(names)
                    break
    except Exception:  # a failing lookup must not replace the validator's error: its message stands as is
        return error
    return error


# ---------------------------------------------------------------- optimizer steps run unchecked
def _checked_closure(args: Any, kwargs: Any, mode: TorchFunctionMode) -> tuple[Any, Any] | None:
    """A closure given to ``step`` holds the forward and backward (Lightning's automatic optimization runs
    ``training_step`` in it, LBFGS re-evaluates the loss): it runs with the mode back on the stack."""
    if callable(kwargs.get("closure")):
        return args, {**kwargs, "closure": _with_mode(kwargs["closure"], mode)}
    if len(args) > 1 and callable(args[1]):  # args[0] is the optimizer itself
        return (args[0], _with_mode(args[1], mode), *args[2:]), kwargs
    return None


def _with_mode(closure: Callable[[], Any], mode: TorchFunctionMode) -> Callable[[], Any]:
    def checked() -> Any:
        __tracebackhide__ = True
        _push_mode(mode)
        try:
            return closure()
        except BaseException as passing:  # the user's error: no frame of ours in its traceback
            drop_own_frame(passing)
            raise
        finally:
            _pop_mode()

    return checked


class OptimizerBypass:
    """Takes the validators off the stack for ``optimizer.step()`` and ``zero_grad()``; process-wide by nature.

    An optimizer step is most of the calls a small training step makes (Adam on the 3-layer MLP: 110 of
    134 intercepted calls; zero_grad another 8) and holds no op that can hit an index assert, so the mode
    steps off the stack for its duration. torch offers only global step hooks, and ``zero_grad`` has none
    (``Optimizer.zero_grad`` is wrapped at class level), so this state cannot live on one extension or one
    mode: it is owned here, by the one instance :data:`BYPASS`. It holds

    * the hook handles and the ``zero_grad`` wrapper: installed with the first live :class:`ValidatorMode`
      in the process, removed with the last (``installed`` says which);
    * the live modes (weakly: a mode nobody disables still goes away with its last reference);
    * per thread, the mode a running step took off the stack (``suspended()``). If a step raises, its
      post-hook never runs; the mode is put back by the next step's post-hook, by any enable/disable/enabled
      call in this thread, or by :meth:`resume`, which the IPython extension calls after each cell.

    A closure given to ``step()`` (Lightning's automatic optimization runs ``training_step`` in one) gets the
    mode back for its call: it holds the forward, where the risky ops are.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: weakref.WeakSet[ValidatorMode] = weakref.WeakSet()
        self._handles: list[_Removable] = []  # the step hooks' handles and the zero_grad patch
        self._threads = threading.local()

    @property
    def installed(self) -> bool:
        """Whether the global step hooks and the ``zero_grad`` wrapper are in place."""
        return bool(self._handles)

    def suspended(self) -> TorchFunctionMode | None:
        """The mode a step took off this thread's stack and has not put back yet."""
        return getattr(self._threads, "suspended", None)

    def track(self, mode: ValidatorMode) -> None:
        with self._lock:
            self._live.add(mode)
            if not self._handles:
                from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

                self._handles.append(register_optimizer_step_pre_hook(self._before_step))
                self._handles.append(register_optimizer_step_post_hook(self._after_step))
                self._handles.append(_ZeroGradPatch())

    def untrack(self, mode: TorchFunctionMode) -> None:
        with self._lock:
            if isinstance(mode, ValidatorMode):  # only those are tracked
                self._live.discard(mode)
            if not self._live:
                while self._handles:
                    self._handles.pop().remove()

    def resume(self) -> bool:
        """Put back a mode an optimizer step took off this thread's stack (True if there was one)."""
        mode = getattr(self._threads, "suspended", None)  # (not self.suspended(): this runs every step and cell)
        if mode is None:
            return False
        self._threads.suspended = None
        _push_mode(mode)
        return True

    def _before_step(self, optimizer: Any, args: Any, kwargs: Any) -> tuple[Any, Any] | None:
        if _is_compiling() or getattr(self._threads, "suspended", None) is not None:
            return None
        depth = _stack_depth()
        if depth and isinstance(_stack_at(depth - 1), ValidatorMode):
            mode = self._threads.suspended = _pop_mode()
            return _checked_closure(args, kwargs, mode)
        return None

    def _after_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if not _is_compiling():
            self.resume()


def _unchecked_zero_grad(original: Callable[..., Any]) -> Callable[..., Any]:
    """``Optimizer.zero_grad`` with a ValidatorMode on top of the stack taken off for the call."""

    @functools.wraps(original)
    def zero_grad(self: Any, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        try:
            if _is_compiling():  # first: dynamo then calls the original, which it does not trace
                return original(self, *args, **kwargs)
            depth = _stack_depth()
            if not depth or not isinstance(_stack_at(depth - 1), ValidatorMode):
                return original(self, *args, **kwargs)
            mode = _pop_mode()
            try:
                return original(self, *args, **kwargs)
            finally:
                _push_mode(mode)
        except BaseException as passing:
            drop_own_frame(passing)
            raise

    return zero_grad


class _Removable(Protocol):
    def remove(self) -> None: ...


class _ZeroGradPatch:
    """Undo for the wrapped ``Optimizer.zero_grad``."""

    def __init__(self) -> None:
        self.original = torch.optim.Optimizer.zero_grad
        self.wrapper = _unchecked_zero_grad(self.original)
        torch.optim.Optimizer.zero_grad = self.wrapper  # type: ignore[method-assign]  # the patch itself; remove() undoes

    def remove(self) -> None:
        if torch.optim.Optimizer.zero_grad is self.wrapper:  # someone re-wrapped it: keep theirs (and ours)
            torch.optim.Optimizer.zero_grad = self.original  # type: ignore[method-assign]  # undoing the patch


#: The process's one owner of the optimizer bypass (see :class:`OptimizerBypass` for why it is process-wide).
BYPASS = OptimizerBypass()


#: Put back a mode an optimizer step took off this thread's stack (True if there was one).
resume_suspended: Callable[[], bool] = BYPASS.resume


# ---------------------------------------------------------------- enable / disable
def enabled() -> bool:
    """Whether a :class:`ValidatorMode` is on this thread's torch-function mode stack."""
    resume_suspended()
    return any(isinstance(m, ValidatorMode) for m in _get_current_function_mode_stack())


def enable() -> ValidatorMode | None:
    """Push a :class:`ValidatorMode` for this thread; None when one was already there."""
    if enabled():
        return None
    mode = ValidatorMode()
    _push_mode(mode)
    BYPASS.track(mode)
    return mode


def push(mode: TorchFunctionMode) -> None:
    """Put ``mode`` on top of this thread's stack; :func:`disable` takes it off again from wherever it is."""
    _push_mode(mode)


def disable(target: TorchFunctionMode | None = None) -> bool:
    """Remove ``target`` (default: the topmost :class:`ValidatorMode`) from this thread's stack.

    ``target`` may be any mode object (``%%cuda_debug`` removes its own mode this way).
    Modes pushed above it (the user's own, ``%%cuda_debug``'s) stay, in order. Returns False
    when there was nothing to remove.
    """
    resume_suspended()

    def wanted(mode: object) -> bool:
        return mode is target if target is not None else isinstance(mode, ValidatorMode)

    if not any(wanted(m) for m in _get_current_function_mode_stack()):
        return False
    above = []
    while True:
        mode = _pop_mode()
        if wanted(mode):
            break
        above.append(mode)
    for other in reversed(above):
        _push_mode(other)
    BYPASS.untrack(mode)
    return True
