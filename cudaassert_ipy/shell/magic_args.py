"""IPython's magic decorators with types: each keeps the magic's signature; parsing gives a Namespace.

IPython ships ``magic_arguments`` unannotated, and types ``line_magic``/``cell_magic`` as returning
either the method or a decorator (they take a name too); this is the one place those calls are made.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, TypeVar, cast

from IPython.core import magic as _magic
from IPython.core import magic_arguments as _magic_arguments

__all__ = ["argument", "cell_magic", "line_magic", "magic_arguments", "parse_argstring"]

_F = TypeVar("_F", bound=Callable[..., Any])
_untyped: Any = _magic_arguments  # IPython's magic_arguments is unannotated: the boundary


def line_magic(func: _F) -> _F:
    """``@line_magic`` on a ``Magics`` method, named after the method."""
    return cast(_F, _magic.line_magic(func))


def cell_magic(func: _F) -> _F:
    """``@cell_magic`` on a ``Magics`` method, named after the method."""
    return cast(_F, _magic.cell_magic(func))


def magic_arguments() -> Callable[[_F], _F]:
    """``@magic_arguments()``: the parser's usage and options become the magic's docstring."""
    return cast("Callable[[_F], _F]", _untyped.magic_arguments())


def argument(*name_or_flags: str, **kwargs: Any) -> Callable[[_F], _F]:
    """``@argument(...)``: one ``ArgumentParser.add_argument`` call (``kwargs`` as argparse takes them)."""
    return cast("Callable[[_F], _F]", _untyped.argument(*name_or_flags, **kwargs))


def parse_argstring(magic_func: Callable[..., object], argstring: str) -> argparse.Namespace:
    """The magic's line parsed by its decorated parser; bad input raises ``UsageError``."""
    return cast(argparse.Namespace, _untyped.parse_argstring(magic_func, argstring))
