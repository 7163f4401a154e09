"""Run a script or ``-m module`` as plain ``python`` would: same ``sys.argv``, ``__main__``, ``sys.path[0]``.

runpy does the work (``run_path`` / ``run_module(alter_sys=True)``). What ``python`` would say about a
missing file or module is said in the same words, with the same exit code. An exception from the
script comes back with the runner's own frames cut off, so its traceback reads as Python's.
"""

from __future__ import annotations

import builtins
import importlib.machinery
import importlib.util
import os
import runpy
import sys
import types
from typing import NamedTuple

__all__ = ["NO_FILE", "NO_MODULE", "Target", "strip_runner_frames"]

NO_FILE = "{prog}: can't open file {path!r}: [Errno {errno}] {strerror}"  # python's own wording
NO_MODULE = "{prog}: No module named {name}"
_RUNNER_DIRS = (os.path.dirname(os.path.abspath(__file__)) + os.sep,)
_RUNPY = (os.path.abspath(runpy.__file__), "<frozen runpy>")  # 3.11+ names frozen modules' frames so
#: Launchers the runner may run as its target (``python -m cudaassert_ipy -m torch.distributed.run ... train.py``):
#: the user's code is the script they start in each rank, not the launcher's own file.
LAUNCHER_MODULES = frozenset(
    (
        "torch.distributed.run",
        "torch.distributed.launch",
        "accelerate.commands.launch",
        "accelerate.commands.accelerate_cli",
        "deepspeed.launcher.runner",
    )
)
LAUNCHER_SCRIPTS = frozenset(("torchrun", "accelerate", "deepspeed"))


class Target(NamedTuple):
    """A script path or a module name, with the arguments that follow it."""

    path: str | None
    module: str | None
    args: tuple[str, ...]

    @property
    def label(self) -> str:
        """How the user wrote it: ``train.py --lr 3`` or ``-m pkg.train --lr 3``."""
        head = f"-m {self.module}" if self.module else str(self.path)
        return " ".join([head, *self.args])

    def origin(self) -> str | None:
        """The file that will run (for ``-m``, the module's file)."""
        if self.path is not None:
            return os.path.abspath(self.path)
        spec = _find_spec(self.module or "")
        return spec.origin if spec is not None and spec.origin not in (None, "built-in", "frozen") else None

    def user_origin(self) -> str | None:
        """The file the user wrote: for a launcher target, the script it starts in each rank (``train.py``, or
        ``-m pkg.train``'s file); else :meth:`origin`."""
        launcher = self.module in LAUNCHER_MODULES or (
            self.path is not None and os.path.basename(self.path) in LAUNCHER_SCRIPTS
        )
        if not launcher:
            return self.origin()
        for i, arg in enumerate(self.args):
            if arg.endswith(".py") and not arg.startswith("-"):
                return os.path.abspath(arg)
            if arg in ("-m", "--module") and i + 1 < len(self.args):
                try:
                    return Target(None, self.args[i + 1], ()).origin()
                except (ImportError, ValueError):  # the launcher will say what is missing
                    return None
        return self.origin()

    def problem(self, prog: str) -> tuple[str, int] | None:
        """What ``python`` says, and its exit code, when there is nothing to run; None when there is."""
        if self.path is not None:
            try:
                with open(self.path, "rb"):
                    pass
            except OSError as e:
                path = os.path.abspath(self.path)
                return NO_FILE.format(prog=prog, path=path, errno=e.errno, strerror=e.strerror), 2
            return None
        name = self.module or ""
        sys.path[0] = os.getcwd()  # as ``python -m`` has it (the console script starts with its bin directory)
        try:
            spec = _find_spec(name)
        except (ImportError, ValueError) as e:  # a parent package that is missing or fails to import
            return f"{prog}: {type(e).__name__}: {e}" if not isinstance(e, ModuleNotFoundError) else NO_MODULE.format(
                prog=prog, name=getattr(e, "name", None) or name
            ), 1
        if spec is None:
            return NO_MODULE.format(prog=prog, name=name), 1
        return None

    def run(self) -> None:
        """Execute it as ``__main__``; exceptions propagate."""
        if self.path is not None:
            sys.argv[:] = [self.path, *self.args]
            sys.path[0] = os.path.dirname(os.path.realpath(self.path))
            if os.path.isfile(self.path):
                _exec_as_main(os.path.abspath(self.path))  # python's __file__ is absolute, argv[0] as typed
            else:  # a directory or zip file with a __main__.py
                runpy.run_path(self.path, run_name="__main__")
        else:
            sys.argv[:] = ["-m", *self.args]  # run_module puts the module's file in argv[0]
            sys.path[0] = os.getcwd()
            runpy.run_module(self.module or "", run_name="__main__", alter_sys=True)


def _exec_as_main(path: str) -> None:
    """What ``python path`` does: a fresh ``__main__`` module that stays ``__main__`` (pickling, atexit)."""
    main = types.ModuleType("__main__")
    main.__dict__.update(
        __file__=path,
        __cached__=None,
        __builtins__=builtins,
        __spec__=None,
        __loader__=importlib.machinery.SourceFileLoader("__main__", path),
    )
    with open(path, "rb") as f:
        source = f.read()
    code = compile(source, path, "exec", dont_inherit=True)
    sys.modules["__main__"] = main
    exec(code, main.__dict__)


def _find_spec(name: str) -> importlib.machinery.ModuleSpec | None:
    spec = importlib.util.find_spec(name)
    if spec is not None and spec.submodule_search_locations is not None:  # a package: python runs its __main__
        return importlib.util.find_spec(name + ".__main__")
    return spec


def strip_runner_frames(tb: types.TracebackType | None) -> types.TracebackType | None:
    """Drop the leading frames that belong to the runner or runpy: the script's own frames remain."""
    while tb is not None:
        raw = tb.tb_frame.f_code.co_filename
        name = raw if raw.startswith("<") else os.path.abspath(raw)
        if not (name in _RUNPY or name.startswith(_RUNNER_DIRS)):
            break
        tb = tb.tb_next
    return tb
