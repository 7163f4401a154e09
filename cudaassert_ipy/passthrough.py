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
True``, which IPython's tracebacks honour (plain Python still prints the frame). Standard library only.
"""

from __future__ import annotations

import sys

__all__ = ["drop_own_frame"]


def drop_own_frame(error: BaseException) -> None:
    """Drop the caller's own entry from the head of ``error``'s traceback; the caller then re-raises bare.

    Call it only for errors that pass through (raised by the wrapped callable, a C function included:
    its error's traceback may start and end in the caller), never for an error the wrapper raises itself.
    """
    tb = error.__traceback__
    if tb is not None and tb.tb_frame is sys._getframe(1):
        error.__traceback__ = tb.tb_next
