"""cudaassert-ipy: explain ``CUDA error: device-side assert triggered`` in Jupyter.

``%load_ext cudaassert`` in a notebook; see the README for the magics. This module stays
light on purpose: importing it imports neither torch nor ipywidgets (the public helpers
below load their modules on first use).
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "bad_samples",
    "check_labels",
    "check_token_ids",
    "disable_validators",
    "enable_validators",
    "failing_batch",
    "last_batches",
    "last_diagnosis",
    "load_ipython_extension",
    "preflight",
    "proposed_fix",
    "unload_ipython_extension",
    "validators",
]

# public name -> module that defines it (imported lazily, on first attribute access)
_LAZY = {
    "validators": "cudaassert_ipy.checks",
    "enable_validators": "cudaassert_ipy.checks",
    "disable_validators": "cudaassert_ipy.checks",
    "check_labels": "cudaassert_ipy.checks.preflight",
    "check_token_ids": "cudaassert_ipy.checks.preflight",
    "preflight": "cudaassert_ipy.checks.preflight",
    "last_diagnosis": "cudaassert_ipy.shell.extension",
    "last_batches": "cudaassert_ipy.shell.batches",
    "bad_samples": "cudaassert_ipy.shell.batches",
    "failing_batch": "cudaassert_ipy.shell.batches",
    "proposed_fix": "cudaassert_ipy.shell.fix_api",
}


def load_ipython_extension(ipython: Any) -> None:
    """Called by ``%load_ext cudaassert`` / ``%load_ext cudaassert_ipy``."""
    from cudaassert_ipy.shell import extension

    extension.load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """Called by ``%unload_ext``; undoes everything ``load`` did."""
    from cudaassert_ipy.shell import extension

    extension.unload(ipython)


def __dir__() -> list[str]:
    """The module's own names and the lazy public ones, without importing them (``dir()`` stays light)."""
    return sorted({*globals(), *_LAZY})


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'cudaassert_ipy' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
