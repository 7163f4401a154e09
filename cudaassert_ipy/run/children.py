"""Reach the script's child processes (DDP relaunches of ``sys.argv``, ``torch.multiprocessing.spawn``).

As coverage.py does: an environment variable plus a start-up hook. The hook is a ``sitecustomize``
in a directory of this package, put first on the children's PYTHONPATH; nothing is written into
site-packages or anywhere else, so nothing is left behind. The hook chains to any sitecustomize it hides.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

from cudaassert_ipy.run.options import CHILD_ENV, RunOptions

__all__ = ["STARTUP_DIR", "child_environ"]

STARTUP_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "startup")


def child_environ(options: RunOptions, environ: MutableMapping[str, str]) -> None:
    """Set CUDAASSERT_RUN and put the hook's directory first on PYTHONPATH (once)."""
    environ[CHILD_ENV] = options.to_env()
    parts = [p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if STARTUP_DIR not in parts:
        environ["PYTHONPATH"] = os.pathsep.join([STARTUP_DIR, *parts])
