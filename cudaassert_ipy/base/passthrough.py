"""Keep our wrapper frames out of the tracebacks of errors that only pass through them.

A patched callable (the DataLoader bookmark's ``__next__``, the validators' ``__torch_function__``,
the import hook's ``exec_module``) sits between the user's code and the code that raised. Users read
every frame of a traceback, and one of ours under a collate ``TypeError`` says the extension is to
blame. On Python >= 3.11 a bare ``raise`` re-raises with the exception's own ``__traceback__`` and
adds no entry for the frame it runs in, so a wrapper drops its own entry and re-raises bare::

    try:
        return original(*args)
    except BaseException as error:
        drop_own_frame(error)
        raise

and the traceback is the one the user would see without the wrapper. Python 3.10 re-raises with the
traceback saved when the handler was entered; there the wrapper also sets ``__tracebackhide__ =
True``, which IPython's tracebacks honour; the runner and ``auto`` honour it too for our own frames
(:func:`hide_own_frames`, before the traceback is printed), so only plain code that formats a traceback
itself, in-process on 3.10, still shows the frame. Standard library only.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

__all__ = ["drop_own_frame", "hide_own_frames"]

#: the package's folder (cudaassert_ipy/, above base/): only our own frames are hidden (a user's
#: ``__tracebackhide__`` is theirs to honour)
_PACKAGE = str(Path(__file__).resolve().parent.parent)


def drop_own_frame(error: BaseException) -> None:
    """Drop the caller's own entry from the head of ``error``'s traceback; the caller then re-raises bare.

    Call it only for errors that pass through (raised by the wrapped callable, a C function included:
    its error's traceback may start and end in the caller), never for an error the wrapper raises itself.
    """
    tb = error.__traceback__
    if tb is not None and tb.tb_frame is sys._getframe(1):
        error.__traceback__ = tb.tb_next


def hide_own_frames(error: BaseException) -> None:
    """Drop our wrappers' entries (frames of this package that set ``__tracebackhide__``) from the tracebacks of
    ``error`` and of every exception chained to it, as IPython would hide them.

    For the runner and ``auto`` before an uncaught error is printed: on Python >= 3.11 there is nothing to drop
    (``drop_own_frame`` did it), on 3.10 the wrapper's bare ``raise`` put its entry back.
    """
    seen: set[int] = set()
    todo: list[BaseException | None] = [error]
    while todo:
        exc = todo.pop()
        if exc is None or id(exc) in seen:
            continue
        seen.add(id(exc))
        exc.__traceback__ = _without_own(exc.__traceback__)
        todo += [exc.__cause__, exc.__context__]


def _without_own(tb: types.TracebackType | None) -> types.TracebackType | None:
    kept: list[types.TracebackType] = []
    while tb is not None:
        if not _hidden(tb.tb_frame):
            kept.append(tb)
        tb = tb.tb_next
    for entry, after in zip(kept, [*kept[1:], None]):
        entry.tb_next = after
    return kept[0] if kept else None


def _hidden(frame: types.FrameType) -> bool:
    if not frame.f_code.co_filename.startswith(_PACKAGE):
        return False
    try:
        return frame.f_locals.get("__tracebackhide__") is True
    except Exception:  # a frame whose locals cannot be read stays
        return False
