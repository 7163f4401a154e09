"""Shim so that ``%load_ext cudaassert`` works; the code lives in :mod:`cudaassert_ipy`."""

from cudaassert_ipy import load_ipython_extension, unload_ipython_extension

__all__ = ["load_ipython_extension", "unload_ipython_extension"]
