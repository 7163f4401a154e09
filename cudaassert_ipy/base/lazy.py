"""A package's names that come from one of its modules on first access (PEP 562's module ``__getattr__``).

So that loading the package (``%load_ext`` loads ``checks`` and, through data/loaders, may reach ``frameworks``)
does not load that module: its names are imported when first asked for, and ``dir()`` still lists them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    package: str, module: str, names: Iterable[str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``: ``names`` read from ``module`` when first asked for."""
    wanted = frozenset(names)

    def __getattr__(name: str) -> Any:
        if name in wanted:
            return getattr(importlib.import_module(module), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*namespace, *wanted})

    return __getattr__, __dir__
