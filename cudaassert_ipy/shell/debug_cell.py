"""What ``%%cuda_debug`` does: run one cell with validators on, and optionally a device sync
after each torch call (``--sync``) and a NaN/inf guard (``--nan``).

``--sync`` makes an asynchronous CUDA failure surface at the Python line that launched it,
without restarting the kernel with ``CUDA_LAUNCH_BLOCKING=1``. ``--nan`` stops at the first
torch call whose output holds NaN or inf and names the call and the cell line.

The cell runs in the user's namespace, with its own line numbers (line 1 is the
``%%cuda_debug`` line, as on screen), and the last expression is displayed as usual.
Everything is restored after the cell, even on error or ``KeyboardInterrupt``.

This module imports neither torch nor the validators until the magic runs.
"""

from __future__ import annotations

import ast
import linecache
import sys
from functools import cache
from typing import Any, Callable, List, Optional, Tuple

from IPython.core import magic_arguments
from IPython.core.error import UsageError

from cudaassert_ipy.passthrough import drop_own_frame
from cudaassert_ipy.wording import is_cell_filename

__all__ = ["DEBUG_MAGIC_DOC", "debug_magic_arguments", "parse_debug_args", "run_debug_cell"]

USAGE = "%%cuda_debug [--sync] [--nan]"
SYNC_HELP = (
    "after every torch call whose result is on a CUDA device, call torch.cuda.synchronize(), so an "
    "asynchronous kernel failure is raised at the line that launched it (no restart with "
    "CUDA_LAUNCH_BLOCKING=1 needed); slow, for debugging only"
)
NAN_HELP = (
    "stop at the first torch call whose floating-point output holds NaN or inf, and name the call "
    "and the cell line (one small check and sync per call)"
)
SYNC_NOTE = (
    "%%cuda_debug --sync: this error surfaced in the synchronisation right after {op}{where}, so that "
    "call (or a kernel it launched) failed."
)
USAGE_ERROR = "%%cuda_debug: {problem}. Usage: " + USAGE + " (see %%cuda_debug? for what each option does)."
NEEDS_TORCH = "%%cuda_debug needs PyTorch: pip install torch"
TOP_LEVEL_AWAIT = "%%cuda_debug cannot run a cell with top-level await; move the awaits into a function."


def debug_magic_arguments(func: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate the ``cuda_debug`` magic with its options (so ``%%cuda_debug?`` documents them)."""
    func = magic_arguments.argument("--nan", action="store_true", help=NAN_HELP)(func)
    func = magic_arguments.argument("--sync", action="store_true", help=SYNC_HELP)(func)
    return magic_arguments.magic_arguments()(func)


@debug_magic_arguments
def cuda_debug(line: str, cell: str = "") -> None:
    """Run this cell with cudaassert validators on (bad indices, labels and probabilities raise a
    clear error before the kernel launches, so the GPU stays usable); everything is restored
    after the cell."""


#: The full help text of ``%%cuda_debug`` (usage, description, options).
DEBUG_MAGIC_DOC: str = cuda_debug.__doc__ or ""


def parse_debug_args(line: str) -> Any:
    """Parse the ``%%cuda_debug`` line: an object with ``.sync`` and ``.nan`` (bools).

    Bad input raises ``UsageError`` with the usage line.
    """
    try:
        return magic_arguments.parse_argstring(cuda_debug, line)
    except UsageError as e:
        raise UsageError(USAGE_ERROR.format(problem=str(e).rstrip("."))) from None


# ---------------------------------------------------------------- finding the user's line
def _filename_map(shell: Any) -> dict:
    return getattr(getattr(shell, "compile", None), "_filename_map", None) or {}


def is_shell_cell(filename: str, shell: Any = None) -> bool:
    """Whether ``filename`` names an IPython cell, including names this shell's compiler registered."""
    return is_cell_filename(filename, _filename_map(shell) if shell is not None else ())


def find_cell_frame(shell: Any, frame: Any = None) -> Tuple[Optional[str], Optional[int], str, str]:
    """(filename, line number, line text, label such as ``cell In[3]``) of the innermost cell frame."""
    frame = frame if frame is not None else sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if is_shell_cell(filename, shell):
            lineno = frame.f_lineno
            number = _filename_map(shell).get(filename)
            if number is None and filename.startswith("<ipython-input-"):
                number = filename.split("-")[2]  # IPython 7: <ipython-input-N-hash>
            label = f"cell In[{number}]" if number is not None else "the cell"
            return filename, lineno, linecache.getline(filename, lineno).rstrip("\n"), label
        frame = frame.f_back
    return None, None, "", "the cell"


# ---------------------------------------------------------------- the per-call mode
_NAN_HINTS = (
    (("log",), "log of a value <= 0: clamp the input first (x.clamp_min(eps)) or use log1p/log_softmax"),
    (("div", "truediv", "reciprocal", "rsqrt"), "division by zero: add an epsilon to the denominator"),
    (("sqrt", "pow"), "sqrt/pow of a negative value or of 0 with a negative exponent: clamp the input"),
    (("exp", "softmax", "sigmoid", "cosh", "sinh"), "overflow: compute in float32 (not float16), or use "
     "log-sum-exp forms such as log_softmax / logsumexp"),
)
_GENERIC_NAN_HINT = (
    "check this call's inputs (min/max, torch.isfinite); if it happens during training, lower the learning "
    "rate, clip gradients (torch.nn.utils.clip_grad_norm_) or train in float32/bfloat16 instead of float16"
)


def _nan_hint(op: str) -> str:
    short = op.rsplit(".", 1)[-1].strip("_").lower()
    for names, hint in _NAN_HINTS:
        if any(name in short for name in names):
            return hint + "; otherwise " + _GENERIC_NAN_HINT
    return _GENERIC_NAN_HINT


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
    return name


# Calls that hand back memory nobody has written yet: whatever bytes it holds (NaN included) are not a result.
_UNINITIALISED = frozenset({
    "empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided", "resize_",
    "resize_as_",
})


def _writes_in_place(name: str, kwargs: Any) -> bool:
    """``add_``, ``__iadd__``, ``out=``: the result is an input's memory written by this call."""
    if kwargs and kwargs.get("out") is not None:
        return True
    if name.startswith("__i") and name.endswith("__"):
        return True
    return name.endswith("_") and not name.endswith("__")


def _aliases_an_input(t: Any, args: Any, kwargs: Any) -> bool:
    """A view (``x[0]``, ``.view``, ``Parameter(x)``) shares an input's memory: it cannot have made the NaN."""
    import torch

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


def _tensors(out: Any) -> List[Any]:
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for t in out if isinstance(t, torch.Tensor)]
    return []


@cache
def _debug_mode_class() -> type:
    import torch
    from torch.overrides import TorchFunctionMode

    from cudaassert_ipy.checks.common import caller_name, readable
    from cudaassert_ipy.checks.errors import NonFiniteError

    this_file = __file__

    class DebugMode(TorchFunctionMode):
        """After each torch call: synchronise (``sync``) and/or stop at NaN/inf (``nan``)."""

        def __init__(self, shell: Any, sync: bool, nan: bool) -> None:
            super().__init__()
            self.shell = shell
            self.sync = sync
            self.nan = nan

        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
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
            owner = caller_name("", skip_files=(this_file,))
            return f"{name} (inside {owner})" if owner and owner != name else name

        def _synchronize(self, func: Any, tensors: List[Any]) -> None:
            device = next(t.device for t in tensors if t.is_cuda)
            try:
                torch.cuda.synchronize(device)
            except RuntimeError as e:
                _, lineno, line, label = find_cell_frame(self.shell)
                where = f" at {label}, line {lineno}: {line.strip()}" if lineno is not None else ""
                note = SYNC_NOTE.format(op=self._name(func), where=where)
                if hasattr(e, "add_note"):  # Python 3.11+
                    e.add_note(note)
                else:
                    print(note, file=sys.stderr)
                raise

        def _check_finite(self, func: Any, args: Any, kwargs: Any, tensors: List[Any]) -> Optional[Exception]:
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
                n_nan = int(torch.isnan(t).sum())
                n_inf = int(torch.isinf(t).sum())
                inputs = [
                    a for a in (*args, *(kwargs or {}).values())
                    if isinstance(a, torch.Tensor) and readable(a) and (a.is_floating_point() or a.is_complex())
                ]
                inputs_finite = all(bool(torch.isfinite(a).all()) for a in inputs) if inputs else None
                filename, lineno, line, label = find_cell_frame(self.shell)
                op = self._name(func)
                return NonFiniteError(
                    op=op, n_nan=n_nan, n_inf=n_inf, shape=tuple(t.shape), dtype=str(t.dtype).replace("torch.", ""),
                    filename=filename, lineno=lineno, line=line, cell_label=label,
                    inputs_finite=inputs_finite, hint=_nan_hint(op),
                )
            return None

    return DebugMode


# ---------------------------------------------------------------- running the cell
def _compile_cell(shell: Any, cell: str, header: str) -> Tuple[List[Any], str]:
    """Code objects for the cell, numbered as on screen (line 1 is the magic line)."""
    transformed = shell.transform_cell(cell)
    source = header + "\n" + transformed
    filename = shell.compile.cache(source, shell.execution_count)
    flags = getattr(shell.compile, "flags", 0)
    try:
        tree = shell.transform_ast(ast.parse("\n" + transformed, filename=filename))
        body = list(tree.body)
        last = body.pop() if body and isinstance(body[-1], ast.Expr) else None
        codes = []
        if body:
            codes.append(compile(ast.Module(body=body, type_ignores=[]), filename, "exec", flags, True))
        if last is not None:  # displayed like a normal cell's last expression
            codes.append(compile(ast.Interactive(body=[last]), filename, "single", flags, True))
    except SyntaxError as e:
        if "await" in str(e.msg):
            raise UsageError(TOP_LEVEL_AWAIT) from None
        raise
    return codes, filename


def run_debug_cell(shell: Any, cell: str, *, sync: bool = False, nan: bool = False) -> None:
    """Run ``cell`` in ``shell``'s namespace with validators on (and ``sync`` / ``nan`` guards).

    Exceptions from the cell propagate, so IPython shows one traceback (with the cell's own line
    numbers) and the extension's report sees the error. Validators and the guard mode are removed
    again afterwards, even on error or ``KeyboardInterrupt``; validators that were already on stay on.
    """
    __tracebackhide__ = True
    try:
        import torch  # noqa: F401
    except ImportError:
        raise UsageError(NEEDS_TORCH) from None
    from torch.overrides import _push_mode

    from cudaassert_ipy.checks import mode as validator_mode

    header = "%%cuda_debug" + (" --sync" if sync else "") + (" --nan" if nan else "")
    codes, _ = _compile_cell(shell, cell, header)
    pushed = validator_mode.enable()
    guard = _debug_mode_class()(shell, sync, nan) if (sync or nan) else None
    try:
        if guard is not None:
            _push_mode(guard)
        for code in codes:
            exec(code, shell.user_global_ns, shell.user_ns)
    except BaseException as passing:  # the cell's own error, shown as the cell raised it (see passthrough)
        drop_own_frame(passing)
        raise
    finally:
        if guard is not None:
            validator_mode.disable(guard)
        if pushed is not None:
            validator_mode.disable(pushed)
