"""Forks of this kernel print their bad samples: accelerate's ``notebook_launcher`` ranks, ``mp.spawn`` with fork.

Why: a fork runs this kernel's DataLoader bookmark on its own batches and dies with them (data/child_samples.py).
multiprocessing calls its ``register_after_fork`` callbacks in each child it forks; ours adds a ``Finalize`` there,
which multiprocessing runs as the child leaves (``Process._bootstrap`` → ``util._exit_function``; a fork never
runs ``atexit``). torch's launchers end a failed child with ``sys.exit(1)`` inside their ``except``
(``torch.multiprocessing.spawn._wrap``, under elastic too), so the exit in flight there has the child's error as its
``__context__``. Nothing runs in the kernel itself, nor in a child that exits cleanly; the bookmark's per-batch path
is unchanged. Python 3.13's multiprocessing runs finalizers at exit, after the error is gone: nothing is printed there.
"""

from __future__ import annotations

import os
import sys
import weakref
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from cudaassert_ipy.data.after_import import AfterImport
from cudaassert_ipy.data.bookmark import Bookmark

__all__ = ["watch_forks"]


class _ForkWatch:
    """Registered weakly with multiprocessing (its after-fork registry is a ``WeakValueDictionary``): dropped at
    unload, its entry goes with it."""

    def __init__(self, bookmark: Bookmark, user_ns: Callable[[], Mapping[str, Any]]) -> None:
        self.bookmark, self.user_ns = bookmark, user_ns
        self.active = True

    def in_child(self) -> None:
        if self.active:
            from multiprocessing import util

            util.Finalize(None, self.exiting, exitpriority=50)

    def exiting(self) -> None:
        error = sys.exc_info()[1]
        if not isinstance(error, SystemExit) or not isinstance(error.__context__, Exception):
            return
        try:
            from cudaassert_ipy.data.child_samples import child_lines

            lines = child_lines(self.bookmark, error.__context__, self.user_ns())
            if lines:  # straight to fd 2: the kernel's tap (the kernel's sys.stderr is a ZMQ stream of the parent)
                os.write(2, ("\n".join(lines) + "\n").encode("utf-8", "replace"))
        except Exception:  # the child's exit and its error file must not change
            pass


def watch_forks(bookmark: Bookmark, user_ns: Callable[[], Mapping[str, Any]]) -> Callable[[], None]:
    """Register with multiprocessing once it is imported (torch imports it); the undo for unload."""
    watch = _ForkWatch(bookmark, user_ns)
    ref = weakref.ref(watch)  # the imported module's loader keeps the callback: it must not keep the watch

    def register(util: ModuleType) -> None:
        held = ref()
        if held is not None:  # the registry's key holds the function unbound: nothing holds the watch but undo
            util.register_after_fork(held, _ForkWatch.in_child)

    hook = AfterImport("multiprocessing.util", register)
    hook.install()

    def undo() -> None:
        hook.uninstall()
        watch.active = False  # a fork made from now on does nothing, even while something still holds the watch

    return undo
