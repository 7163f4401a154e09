"""cudaassert's startup hook for a runner's child processes (coverage.py's way into subprocesses).

The runner puts this directory first on the children's PYTHONPATH and sets CUDAASSERT_RUN; Python
imports this module at start-up. It watches the child like ``import cudaassert_ipy.auto`` would,
then runs the sitecustomize that this one hides, if any. It must never raise or print.
"""

import os
import sys


def _watch() -> None:
    if not os.environ.get("CUDAASSERT_RUN"):
        return
    try:
        from cudaassert_ipy.run.hook import install

        install()
    except Exception:  # another interpreter without the package, or a broken install: run unwatched
        pass


def _chain() -> None:
    """Import the next ``sitecustomize`` on sys.path, the one this file shadows."""
    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    try:
        import importlib.machinery
        import importlib.util

        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
        if spec is None or spec.loader is None:
            return
        module = importlib.util.module_from_spec(spec)
        sys.modules["sitecustomize"] = module
        spec.loader.exec_module(module)
    except Exception:  # Python's own startup ignores a failing sitecustomize too (with a warning)
        pass


_watch()
_chain()
