"""Watch this whole process through ``sys.excepthook``: ``import cudaassert_ipy.auto`` and child processes.

Python calls ``sys.excepthook`` for an uncaught exception just before it exits. Ours calls the hook it
replaced first (so the traceback is exactly Python's, or the one the user installed), then reports.
The installed Guard hangs on the hook function itself: no module-level state.
"""

from __future__ import annotations

import sys
import types
from typing import Any, Callable

from cudaassert_ipy.passthrough import hide_own_frames
from cudaassert_ipy.run.guard import Guard, MainFiles, exit_now
from cudaassert_ipy.run.options import RunOptions

__all__ = ["install", "installed", "report_last_at_exit", "uninstall"]

_ATTR = "__cudaassert_guard__"


def installed() -> Guard | None:
    return getattr(sys.excepthook, _ATTR, None)


def install(options: RunOptions | None = None) -> Guard:
    """Start a Guard (tap, blocking, validators from CUDAASSERT_RUN or ``options``) and hook exceptions; idempotent."""
    guard = installed()
    if guard is not None:
        return guard
    guard = Guard(options or RunOptions.from_env(), user_files=MainFiles())
    guard.start()
    previous = sys.excepthook

    def excepthook(exc_type: type[BaseException], exc: BaseException, tb: types.TracebackType | None) -> None:
        if exc.__traceback__ is tb:
            hide_own_frames(exc)  # Python 3.10: a wrapper's frame the bare raise put back
            tb = exc.__traceback__
        previous(exc_type, exc, tb)
        if not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit: Python's behaviour only
            return
        outcome = guard.report(exc, tb)
        guard.close(1)
        if outcome.diagnosis is not None and outcome.rank.distributed:
            exit_now(1)

    setattr(excepthook, _ATTR, guard)
    excepthook.__cudaassert_previous__ = previous  # type: ignore[attr-defined]  # kept on the function object
    sys.excepthook = excepthook
    return guard


def uninstall() -> None:
    """Put back the previous excepthook and stop the tap (the runner does this before it takes over)."""
    hook: Any = sys.excepthook
    guard = getattr(hook, _ATTR, None)
    if guard is None:
        return
    previous: Callable[..., Any] = getattr(hook, "__cudaassert_previous__", sys.__excepthook__)
    sys.excepthook = previous
    guard.close()


def report_last_at_exit() -> None:
    """For ``ipython script.py``: IPython shows the script's error and records it in ``sys.last_value``."""
    import atexit

    def report() -> None:
        guard, exc = installed(), getattr(sys, "last_value", None)
        if guard is None or not isinstance(exc, Exception):
            return
        guard.report(exc, exc.__traceback__)
        guard.close(1)

    atexit.register(report)
