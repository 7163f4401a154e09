"""IPython's ``display()`` with a signature: IPython ships it unannotated; imported on first use (it is not light)."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["display"]


def display(*objs: object, raw: bool = False) -> None:
    """Show ``objs`` in the cell's output (``raw``: each is a ready MIME bundle dict)."""
    from IPython.display import display as ipython_display

    untyped: Callable[..., object] = ipython_display  # unannotated in IPython: the boundary
    untyped(*objs, raw=raw)
