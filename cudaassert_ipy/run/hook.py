"""Watch this whole process through ``sys.excepthook``: ``import cudaassert_ipy.auto`` and child processes.

Python calls ``sys.excepthook`` for an uncaught exception just before it exits. Ours calls the hook it
replaced first (so the traceback is exactly Python's, or the one the user installed), then reports.
The installed Guard hangs on the hook function itself: no module-level state.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

from cudaassert_ipy.base.passthrough import hide_own_frames
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
    excepthook.__cudaassert_launched__ = _watch_launched_exit(guard)  # type: ignore[attr-defined]  # its undo
    excepthook.__cudaassert_previous__ = previous  # type: ignore[attr-defined]  # kept on the function object
    sys.excepthook = excepthook
    return guard


def _watch_launched_exit(guard: Guard) -> Callable[[], None]:
    """torch's launchers (``mp.spawn``, ``start_processes``) catch a rank's error and end it with ``sys.exit(1)``
    inside their ``except``: no excepthook runs. multiprocessing calls its after-fork callbacks in each process it
    forks; ours adds a ``Finalize``, run as the process leaves (in a spawned process, which imported us with the
    target's module, it is added at once), where the exit in flight has the rank's error as its ``__context__``."""
    from cudaassert_ipy.data.after_import import AfterImport

    def watch(util: types.ModuleType) -> None:
        _in_child(guard)  # a spawned process (its Process runs no after-fork callbacks) leaves through these too
        util.register_after_fork(guard, _in_child)  # a forked one starts with none: multiprocessing clears them

    hook = AfterImport("multiprocessing.util", watch)
    hook.install()
    return hook.uninstall


def _in_child(guard: Guard) -> None:
    from multiprocessing import util

    def leaving() -> None:
        error = sys.exc_info()[1]
        if isinstance(error, SystemExit) and isinstance(error.__context__, Exception) and installed() is guard:
            guard.launched_exit(error.__context__)

    util.Finalize(None, leaving, exitpriority=50)


def uninstall() -> None:
    """Put back the previous excepthook and stop the tap (the runner does this before it takes over)."""
    hook: Any = sys.excepthook
    guard = getattr(hook, _ATTR, None)
    if guard is None:
        return
    previous: Callable[..., Any] = getattr(hook, "__cudaassert_previous__", sys.__excepthook__)
    sys.excepthook = previous
    getattr(hook, "__cudaassert_launched__", lambda: None)()
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
