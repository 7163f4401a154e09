"""``cudaassert_ipy.proposed_fix()``: the public face of the proposed patch.

Why its own module: it reads the loaded extension of the running shell (``shell.extension.current``), while
``shell/fix.py`` is called by the extension and the magics; keeping this lookup apart keeps the three free of an
import circle.
"""

from __future__ import annotations

from cudaassert_ipy.fix.model import ProposedFix
from cudaassert_ipy.shell.extension import current
from cudaassert_ipy.shell.fix import proposed

__all__ = ["proposed_fix"]


def proposed_fix() -> ProposedFix:
    """The proposed fix of the last failure in this kernel, as a frozen value (``cudaassert_ipy.proposed_fix()``):
    the patched cell's number and id, old and new source, unified diff, safety class, alternatives and why."""
    ext = current()
    if ext is None:
        raise RuntimeError("cudaassert is not loaded in this kernel: run `%load_ext cudaassert` first.")
    return proposed(ext)
