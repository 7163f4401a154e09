"""The one place that remembers which Extension is loaded in which shell.

Everything else the extension knows (the resumed plan, the replay's report, the cell history)
lives on its Extension object, so unloading drops it all at once. The table is keyed by the
shell's id and holds one entry per loaded shell; unload removes the entry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cudaassert_ipy.shell.extension import Extension

__all__ = ["active", "add", "count", "remove"]

_LOADED: dict[int, Extension] = {}  # process-wide by nature: listed in docs/architecture.md with the others


def active(shell: Any) -> Extension | None:
    """The Extension loaded in ``shell``, or None."""
    return _LOADED.get(id(shell)) if shell is not None else None


def add(shell: Any, ext: Extension) -> None:
    _LOADED[id(shell)] = ext


def remove(shell: Any) -> Extension | None:
    return _LOADED.pop(id(shell), None)


def count() -> int:
    """How many shells have the extension loaded (tests: a reload leaves exactly one)."""
    return len(_LOADED)
