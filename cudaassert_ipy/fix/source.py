"""Cells read with LibCST (a syntax tree that keeps the user's formatting and comments), and edits spliced back.

IPython lines (``%magic``, ``!cmd``) are masked as comments of the same length before parsing, so
every position stays the original's, and an edit is spliced into the original text: nothing but the
edited expression changes. LibCST is imported here only, when a patch is proposed.

Why cells are pruned before LibCST reads them: LibCST's parser and its position pass are pure Python
(about 50 ms for a 1 KB cell), while the standard library's ``ast`` reads the same cell in well under a
millisecond. So ``ast`` picks the top-level statements that mention the word looked for (and, in the
same cell, those that assign a name they use: ``num_classes = 195`` for ``CarNet(num_classes)``); the
other statements' lines are blanked, keeping every kept line, and so every position, as it was.
"""

from __future__ import annotations

import ast
import difflib
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from cudaassert_ipy.fix.model import CellSource

__all__ = ["Edit", "Parsed", "apply_edits", "dotted", "parse", "unified_diff"]

_PYTHON_CELL_MAGICS = ("cuda_debug", "time", "timeit", "capture")
_IPY_LINE = re.compile(r"^(\s*)([%!])")


def _masked(source: str) -> str | None:
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
        return _offset(self.cell.source, r.start.line, r.start.column), _offset(
            self.cell.source, r.end.line, r.end.column
        )

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

    try:
        module = cst.parse_module(masked)
    except Exception:  # not Python (a shell cell, a syntax error): no patch from this cell
        return None
    return module, _positions(module)


def _positions(module: Any) -> Any:
    """Each node's CodeRange. The position provider's own pass (one codegen); ``MetadataWrapper.resolve`` adds a
    visit of the whole tree that doubles the cost. The wrapper stays the fallback should LibCST's internals move."""
    from libcst.metadata import MetadataWrapper, PositionProvider

    try:
        provider = PositionProvider()
        provider._gen_impl(module)
        computed = provider._computed
        if computed.get(module) is not None or not module.body:
            return computed
    except (AttributeError, TypeError):
        pass
    return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)


def _assigned(stmt: ast.stmt) -> set[str]:
    targets: list[ast.expr] = []
    if isinstance(stmt, ast.Assign):
        targets = list(stmt.targets)
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        targets = [stmt.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _span(stmt: ast.stmt) -> tuple[int, int]:
    """First and last line of a statement, its decorators included."""
    first = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", ()))])
    return first, stmt.end_lineno or stmt.lineno


@functools.lru_cache(maxsize=4096)
def pruned(masked: str, word: str) -> str:
    """``masked`` with the lines of every top-level statement that neither mentions ``word`` nor assigns a name a
    kept statement uses turned into empty lines (the line count, and each kept line, unchanged)."""
    try:
        tree = ast.parse(masked)
    except (SyntaxError, ValueError):  # LibCST decides (it reads some code ast refuses, and the reverse)
        return masked
    lines = masked.splitlines(keepends=True)
    spans = [(*_span(stmt), stmt) for stmt in tree.body]
    keep = [word in "".join(lines[a - 1 : b]) for a, b, _ in spans]
    used: set[str] = set()
    grew = True
    while grew:  # the names the kept statements use, and the statements that assign them
        grew = False
        used = {n.id for (_, _, st), k in zip(spans, keep) if k for n in ast.walk(st) if isinstance(n, ast.Name)}
        for i, (_, _, st) in enumerate(spans):
            if not keep[i] and _assigned(st) & used:
                keep[i] = grew = True
    kept_lines = {n for (a, b, _), k in zip(spans, keep) if k for n in range(a, b + 1)}
    for (_, _, st), k in zip(spans, keep):  # in a kept class: its __init__ and the methods that mention the word
        if k and isinstance(st, ast.ClassDef):
            for m in st.body:
                a, b = _span(m)
                if (
                    isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and m.name != "__init__"
                    and word not in "".join(lines[a - 1 : b])
                ):
                    kept_lines -= set(range(a, b + 1))
    out = [line if n in kept_lines else ("\n" if line.endswith("\n") else "") for n, line in enumerate(lines, 1)]
    return "".join(out)


def parse(cell: CellSource, order: int, word: str | None = None) -> Parsed | None:
    """The cell's tree; with ``word``, only the statements that matter for it (see :func:`pruned`)."""
    masked = _masked(cell.source)
    if masked is not None and word is not None:
        masked = pruned(masked, word)
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
        source = source[: e.start] + e.text + source[e.end :]
    return source


def unified_diff(old: str, new: str, name: str) -> str:
    """Lines compared without their ends: a cell's last line has no newline, and would run into the next one."""
    lines = difflib.unified_diff(
        old.splitlines(), new.splitlines(), fromfile=f"a/{name}", tofile=f"b/{name}", n=2, lineterm=""
    )
    return "".join(line + "\n" for line in lines)
