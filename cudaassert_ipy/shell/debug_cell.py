"""The ``%%cuda_debug`` magic: run one cell with validators on, and optionally a device sync
after each torch call (``--sync``) and a NaN/inf guard (``--nan``); the guard itself is
:class:`cudaassert_ipy.checks.debug_mode.DebugMode`, this module keeps the magic.

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
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, cast

from IPython.core.error import UsageError

from cudaassert_ipy.base.passthrough import drop_own_frame
from cudaassert_ipy.base.wording import is_cell_filename
from cudaassert_ipy.shell import magic_args

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
USAGE_ERROR = "%%cuda_debug: {problem}. Usage: " + USAGE + " (see %%cuda_debug? for what each option does)."
NEEDS_TORCH = "%%cuda_debug needs PyTorch: pip install torch"
TOP_LEVEL_AWAIT = "%%cuda_debug cannot run a cell with top-level await; move the awaits into a function."


_F = TypeVar("_F", bound=Callable[..., Any])


class DebugOptions(Protocol):
    """The parsed ``%%cuda_debug`` line."""

    sync: bool
    nan: bool


def debug_magic_arguments(func: _F) -> _F:
    """Decorate the ``cuda_debug`` magic with its options (so ``%%cuda_debug?`` documents them)."""
    func = magic_args.argument("--nan", action="store_true", help=NAN_HELP)(func)
    func = magic_args.argument("--sync", action="store_true", help=SYNC_HELP)(func)
    return magic_args.magic_arguments()(func)


def _debug_magic() -> Callable[..., None]:
    """The ``%%cuda_debug`` signature with its options, built when asked: a parser costs ``%load_ext`` about
    1 ms, and the extension's magic has its own."""

    @debug_magic_arguments
    def cuda_debug(line: str, cell: str = "") -> None:
        """Run this cell with cudaassert validators on (bad indices, labels and probabilities raise a
        clear error before the kernel launches, so the GPU stays usable); everything is restored
        after the cell."""

    return cuda_debug


#: The full help text of ``%%cuda_debug`` (usage, description, options); built on access (module ``__getattr__``).
DEBUG_MAGIC_DOC: str


def __getattr__(name: str) -> Any:
    if name == "DEBUG_MAGIC_DOC":
        return _debug_magic().__doc__ or ""
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def parse_debug_args(line: str) -> DebugOptions:
    """Parse the ``%%cuda_debug`` line: an object with ``.sync`` and ``.nan`` (bools).

    Bad input raises ``UsageError`` with the usage line.
    """
    try:
        return cast(DebugOptions, magic_args.parse_argstring(_debug_magic(), line))  # store_true options: bools
    except UsageError as e:
        raise UsageError(USAGE_ERROR.format(problem=str(e).rstrip("."))) from None


# ---------------------------------------------------------------- finding the user's line
def _filename_map(shell: Any) -> dict[str, int]:
    found: dict[str, int] = getattr(getattr(shell, "compile", None), "_filename_map", None) or {}
    return found


def is_shell_cell(filename: str, shell: Any = None) -> bool:
    """Whether ``filename`` names an IPython cell, including names this shell's compiler registered."""
    return is_cell_filename(filename, _filename_map(shell) if shell is not None else ())


def find_cell_frame(shell: Any, frame: Any = None) -> tuple[str | None, int | None, str, str]:
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


# ---------------------------------------------------------------- running the cell
def _compile_cell(shell: Any, cell: str, header: str) -> tuple[list[Any], str]:
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
    from cudaassert_ipy.checks.torch_compat import off_line

    if (unsupported := off_line("validators")) is not None:
        raise UsageError(f"%%cuda_debug needs the validators; {unsupported}") from None
    from cudaassert_ipy.checks import mode as validator_mode
    from cudaassert_ipy.checks.debug_mode import DebugMode

    header = "%%cuda_debug" + (" --sync" if sync else "") + (" --nan" if nan else "")
    codes, _ = _compile_cell(shell, cell, header)
    pushed = validator_mode.enable()
    guard = DebugMode(sync=sync, nan=nan, locate=lambda: find_cell_frame(shell)) if (sync or nan) else None
    try:
        if guard is not None:
            validator_mode.push(guard)
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
