"""Cells read with LibCST (a syntax tree that keeps the user's formatting and comments), and edits spliced back.

IPython lines (``%magic``, ``!cmd``) are masked as comments of the same length before parsing, so
every position stays the original's, and an edit is spliced into the original text: nothing but the
edited expression changes. LibCST is imported here only, when a patch is proposed.
"""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass
from typing import Any, Iterator, Optional

from cudaassert_ipy.fix.model import CellSource

__all__ = ["Edit", "Parsed", "apply_edits", "dotted", "parse", "unified_diff"]

_PYTHON_CELL_MAGICS = ("cuda_debug", "time", "timeit", "capture")
_IPY_LINE = re.compile(r"^(\s*)([%!])")


def _masked(source: str) -> Optional[str]:
    """The cell with IPython-only lines turned into comments of the same length; None when it is not Python."""
    lines = source.splitlines(keepends=True)
    if lines and lines[0].lstrip().startswith("%%"):
        name = lines[0].lstrip()[2:].split(None, 1)[0] if lines[0].strip() != "%%" else ""
        if name not in _PYTHON_CELL_MAGICS:
            return None
    return "".join(_IPY_LINE.sub(lambda m: m.group(1) + "#", line, count=1) for line in lines)


@dataclass(frozen=True)
class Parsed:
    """One cell's tree and the position of each node in the cell's own text."""

    cell: CellSource
    order: int  # position in the history, oldest first
    module: Any  # libcst.Module
    positions: Any  # Mapping[CSTNode, CodeRange]

    def span(self, node: Any) -> tuple[int, int]:
        """(start, end) offsets of ``node`` in the cell's text."""
        r = self.positions[node]
        return _offset(self.cell.source, r.start.line, r.start.column), _offset(self.cell.source, r.end.line,
                                                                                 r.end.column)

    def line_of(self, node: Any) -> int:
        return int(self.positions[node].start.line)

    def code(self, node: Any) -> str:
        start, end = self.span(node)
        return self.cell.source[start:end]


def _offset(text: str, line: int, column: int) -> int:
    lines = text.splitlines(keepends=True)
    return sum(len(x) for x in lines[: line - 1]) + column


@functools.lru_cache(maxsize=1024)
def _tree(masked: str) -> tuple[Any, Any] | None:
    """The tree and positions of one cell's (masked) text; a pure function of the text, so cached."""
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    try:
        module = cst.parse_module(masked)
    except Exception:  # not Python (a shell cell, a syntax error): no patch from this cell
        return None
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    return module, wrapper.resolve(PositionProvider)


def parse(cell: CellSource, order: int) -> Parsed | None:
    masked = _masked(cell.source)
    tree = _tree(masked) if masked is not None else None
    return Parsed(cell, order, tree[0], tree[1]) if tree is not None else None


def dotted(node: Any) -> str | None:
    """``model.head`` for the expression ``model.head``; None for anything but names and attributes."""
    import libcst as cst

    if isinstance(node, cst.Name):
        return str(node.value)
    if isinstance(node, cst.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr.value}" if base is not None else None
    return None


def walk(node: Any) -> Iterator[Any]:
    """Every node under ``node``, itself first, in source order."""
    yield node
    for child in node.children:
        yield from walk(child)


@dataclass(frozen=True)
class Edit:
    """Replace [start, end) of one cell's text by ``text`` (an insertion when start == end)."""

    parsed: Parsed
    start: int
    end: int
    text: str


def apply_edits(edits: list[Edit]) -> str:
    """The cell's new text: edits of one cell, spliced from the end so earlier offsets stay right."""
    source = edits[0].parsed.cell.source
    for e in sorted(edits, key=lambda e: e.start, reverse=True):
        source = source[: e.start] + e.text + source[e.end:]
    return source


def unified_diff(old: str, new: str, name: str) -> str:
    """Lines compared without their ends: a cell's last line has no newline, and would run into the next one."""
    lines = difflib.unified_diff(old.splitlines(), new.splitlines(), fromfile=f"a/{name}", tofile=f"b/{name}", n=2,
                                 lineterm="")
    return "".join(line + "\n" for line in lines)
