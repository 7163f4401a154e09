"""Validators: stop the bad input before the kernel runs (the public functions live at ``cudaassert_ipy.*``).

A device-side assert kills the process's GPU context; a Python exception raised before the
kernel launches does not. With validators on, the calls that assert on the GPU
(``cross_entropy``, ``embedding``, ``x[idx]``, ``gather``, ``one_hot``, ``multinomial`` ...)
have their inputs checked first, and a bad input raises a :class:`ValidationError` that names
the call, the argument, the valid range, the bad values and the likely fix.

Usage::

    import cudaassert_ipy
    with cudaassert_ipy.validators():     # this block only
        train_one_epoch()

    cudaassert_ipy.enable_validators()    # from now on, in this thread
    cudaassert_ipy.disable_validators()

Cost: on CUDA one small reduction and one device-to-host read per checked call. On CPU an
exact CPU kernel checks first and only its failures are explained (see ``mode``), so a CPU
training step pays only for the interception (MLP step +4-10%).

Thread-local: torch keeps its mode stack per thread, so enabling affects the calling thread
only (IPython runs cells in the main thread). Compiled regions (``torch.compile``) are not
checked; Inductor's own bounds asserts still apply there. ``optimizer.step()`` and
``zero_grad()`` run unchecked (they hold no risky op and are most of a small step's calls).

Importing this package does not import torch; the first enable does.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from cudaassert_ipy.base.lazy import lazy_names

if TYPE_CHECKING:
    from cudaassert_ipy.checks.errors import (
        NonFiniteError,
        ValidationError,
        ValidationIndexError,
        ValidationIndexRuntimeError,
        ValidationRuntimeError,
    )

__all__ = [
    "ENV_VAR",
    "NonFiniteError",
    "ValidationError",
    "ValidationIndexError",
    "ValidationIndexRuntimeError",
    "ValidationRuntimeError",
    "disable_validators",
    "enable_validators",
    "env_requests_validators",
    "resume_suspended",
    "validators",
    "validators_enabled",
]

#: the exceptions, imported from ``errors`` on first access: ``%load_ext`` loads this package (the sample-naming
#: slot lives in it) but raises none of them
_ERRORS = frozenset(
    {
        "NonFiniteError",
        "ValidationError",
        "ValidationIndexError",
        "ValidationIndexRuntimeError",
        "ValidationRuntimeError",
    }
)

__getattr__, __dir__ = lazy_names(__name__, "cudaassert_ipy.checks.errors", _ERRORS, globals())


#: ``CUDAASSERT_VALIDATORS=1`` turns validators on when the extension loads.
ENV_VAR = "CUDAASSERT_VALIDATORS"
_TRUE = frozenset({"1", "true", "yes", "on"})
_MODE_MODULE = "cudaassert_ipy.checks.mode"


def env_requests_validators(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``CUDAASSERT_VALIDATORS`` asks for validators (``1``/``true``/``yes``/``on``)."""
    env = os.environ if environ is None else environ
    return env.get(ENV_VAR, "").strip().lower() in _TRUE


def enable_validators() -> None:
    """Turn validators on for the calling thread (idempotent).

    A torch without the private mode-stack APIs they need leaves them off: one line on stderr, once per process,
    and ``%cudaassert status`` says why (:mod:`cudaassert_ipy.checks.torch_compat`).
    """
    if _unsupported():
        return
    from cudaassert_ipy.checks import mode

    mode.enable()


_said: list[str] = []


def _unsupported() -> bool:
    """True (and one line on stderr, the first time) when this torch lacks what the validators need."""
    from cudaassert_ipy.checks.torch_compat import off_line

    line = off_line("validators")
    if line is not None and not _said:
        _said.append(line)
        print(f"[cudaassert] {line}", file=sys.stderr)
    return line is not None


def disable_validators() -> None:
    """Turn validators off for the calling thread (idempotent; a no-op if never enabled)."""
    mode = sys.modules.get(_MODE_MODULE)
    if mode is not None:
        mode.disable()


def validators_enabled() -> bool:
    """Whether validators are on in the calling thread."""
    mode = sys.modules.get(_MODE_MODULE)
    return bool(mode is not None and mode.enabled())


def resume_suspended() -> None:
    """Put validators back if an ``optimizer.step()`` that raised left them off (cheap; no torch import).

    Validators step aside during optimizer steps; a step that raises skips the hook that puts
    them back. The next step, or any enable/disable/enabled call, does it too; the IPython
    extension is meant to call this after each cell.
    """
    mode = sys.modules.get(_MODE_MODULE)
    if mode is not None:
        mode.resume_suspended()


@contextlib.contextmanager
def validators() -> Iterator[None]:
    """Validators on inside the ``with`` block (calling thread only); restored on exit.

    Nested use, or use while :func:`enable_validators` is in effect, changes nothing.
    """
    if _unsupported():
        yield
        return
    from cudaassert_ipy.checks import mode

    pushed = mode.enable()
    try:
        yield
    finally:
        if pushed is not None:
            mode.disable(pushed)
