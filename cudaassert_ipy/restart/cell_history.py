"""What ran in this kernel, so that a restart can replay the setup cells the user would re-run by hand.

Every executed cell is recorded (source, cell id where the frontend sends one, execution count,
ok / failed, duration). The default replay is the cells that succeeded before the failing cell, in
the order they ran (the notebook's state is the product of that order, not of the cells' positions),
minus the extension's own magics and cells that only display something. A first line
``# cudaassert: setup`` forces a cell in, ``# cudaassert: skip`` keeps it out, and
``%cudaassert setup 2,3,5`` (or the panel's checkboxes) pins an explicit choice.
"""

from __future__ import annotations

import ast
import functools
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from cudaassert_ipy.base.wording import error_line

if TYPE_CHECKING:  # loaded on a restart only: %load_ext stays light
    from cudaassert_ipy.restart.plan import PlanCell
    from cudaassert_ipy.view.actions import ReplayChoice

__all__ = [
    "CellHistory",
    "CellRecord",
    "KeptOutcome",
    "RecordableOutcome",
    "is_display_only",
    "parse_cell_numbers",
    "replayable_source",
]

MAX_RECORDS = 2000
# patterns as text, compiled by ``re`` (and kept in its cache) when a plan first reads them, not at ``%load_ext``
_MARK = r"(?i)^\s*#\s*cudaassert\s*:\s*(setup|skip|keep)\b"
FORCE_IN = ("setup", "keep")  # first-line marks that put a cell in the plan (keep: restored, not replayed)
# lines that are the extension's own business: never replayed (a replayed `%cudaassert restart` would loop)
_OWN_LINE = r"^\s*%{1,2}(?:(?:load_ext|reload_ext|unload_ext)\s+cudaassert(?:_ipy)?\b|cudaassert\b|cuda_debug\b)"
_DISPLAY_FUNCS = {
    "print",
    "display",
    "repr",
    "str",
    "len",
    "type",
    "dir",
    "help",
    "vars",
    "id",
    "sorted",
    "list",
    "tuple",
    "set",
    "dict",
    "min",
    "max",
    "sum",
    "any",
    "all",
    "isinstance",
    "hasattr",
    "getattr",
    "round",
    "abs",
    "format",
    "pprint",
    "Markdown",
    "HTML",
    "Image",
}
_DISPLAY_METHODS = {
    "head",
    "tail",
    "describe",
    "info",
    "summary",
    "sample",
    "size",
    "numel",
    "dim",
    "keys",
    "values",
    "items",
    "nunique",
    "value_counts",
    "unique",
    "isna",
    "isnull",
    "count",
    "mean",
    "std",
    "min",
    "max",
    "sum",
    "shape",
    "dtypes",
    "memory_usage",
    "is_available",
    "device_count",
    "get_device_name",
    "memory_summary",
    "memory_allocated",
    "format",
    "item",
    "tolist",
    "numpy",
    "cpu",
    "to_string",
    "__repr__",
    "extra_repr",
    "parameters",
    "named_parameters",
    "state_dict",
    "get_device_properties",
}
_DISPLAY_MAGICS = {
    "who",
    "whos",
    "who_ls",
    "pwd",
    "ls",
    "pinfo",
    "pinfo2",
    "psource",
    "pdoc",
    "pdef",
    "history",
    "hist",
    "timeit",
    "lsmagic",
    "magic",
    "page",
    "pprint",
}
_READ_ONLY_COMMANDS = {
    "nvidia-smi",
    "ls",
    "pwd",
    "df",
    "du",
    "free",
    "cat",
    "head",
    "tail",
    "which",
    "echo",
    "nproc",
    "uname",
    "ps",
    "whoami",
    "date",
    "printenv",
    "lscpu",
    "nvcc",
    "wc",
}


def _mark(source: str) -> str | None:
    first = source.lstrip("\n").split("\n", 1)[0]
    m = re.match(_MARK, first)
    return m.group(1).lower() if m else None


def replayable_source(source: str) -> str:
    """The cell without the extension's own magic lines (loading it again, or restarting, must not replay)."""
    lines = source.splitlines(keepends=True)
    if lines and re.match(r"^\s*%%cuda_debug\b", lines[0]):
        return ""
    return "".join(line for line in lines if not re.match(_OWN_LINE, line))


def _is_pure(node: ast.AST) -> bool:
    if isinstance(node, (ast.Name, ast.Constant)):
        return True
    if isinstance(node, ast.Attribute):
        return _is_pure(node.value)
    if isinstance(node, ast.Subscript):
        return _is_pure(node.value) and _is_pure(node.slice)
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_is_pure(e) for e in node.elts)
    if isinstance(node, ast.JoinedStr):
        return all(_is_pure(v.value) if isinstance(v, ast.FormattedValue) else True for v in node.values)
    if isinstance(node, (ast.BinOp, ast.Compare, ast.UnaryOp, ast.BoolOp)):
        return all(_is_pure(n) for n in ast.iter_child_nodes(node) if isinstance(n, ast.expr))
    if isinstance(node, ast.Slice):
        return all(_is_pure(n) for n in (node.lower, node.upper, node.step) if n is not None)
    if isinstance(node, ast.Call):
        return _is_display_call(node)
    return False


def _is_display_call(call: ast.Call) -> bool:
    args = [*call.args, *(k.value for k in call.keywords)]
    func = call.func
    if isinstance(func, ast.Name) and func.id in _DISPLAY_FUNCS:
        return all(_is_pure(a) for a in args)
    if isinstance(func, ast.Attribute) and func.attr in _DISPLAY_METHODS:
        return _is_pure(func.value) and all(_is_pure(a) for a in args)
    if (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Call)
        and isinstance(func.value.func, ast.Name)
        and func.value.func.id == "get_ipython"
        and call.args
        and isinstance(call.args[0], ast.Constant)
        and isinstance(call.args[0].value, str)
    ):
        first = call.args[0].value
        if func.attr == "run_line_magic":
            rest = call.args[1].value if len(call.args) > 1 and isinstance(call.args[1], ast.Constant) else ""
            return first in _DISPLAY_MAGICS or (first in ("env", "config") and "=" not in str(rest))
        if func.attr == "system":
            words = first.split()
            return bool(words) and words[0] in _READ_ONLY_COMMANDS and ">" not in first
    return False


@functools.lru_cache(maxsize=4096)
def is_display_only(source: str) -> bool:
    """True when every statement only shows something (``df.head()``, ``print(x)``, ``!nvidia-smi``, ``%whos``).

    Empty and comment-only cells count too: replaying them changes nothing. Anything the
    heuristic does not recognise counts as setup, so a doubtful cell is replayed rather than lost.
    """
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        new_manager: Callable[[], TransformerManager] = TransformerManager  # __init__ unannotated in IPython
        tree = ast.parse(new_manager().transform_cell(source))
    except (SyntaxError, ValueError, ImportError):
        return False
    return all(isinstance(stmt, ast.Expr) and _is_pure(stmt.value) for stmt in tree.body)


def parse_cell_numbers(text: str) -> list[int]:
    """``"2,3,5"`` or ``"2-5,8"`` → ``[2, 3, 5]`` / ``[2, 3, 4, 5, 8]``; ValueError names the bad part."""
    numbers: list[int] = []
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        lo, dash, hi = part.partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()):
            raise ValueError(part)
        numbers.extend(range(int(lo), int(hi) + 1) if dash else [int(lo)])
    if not numbers:
        raise ValueError(text)
    return numbers


class RecordableOutcome(Protocol):
    """What ``CellHistory.record`` reads of one cell's outcome (the shell's ``CellRunOutcome``, a ``KeptOutcome``)."""

    @property
    def source(self) -> str: ...
    @property
    def execution_count(self) -> int | None: ...
    @property
    def cell_id(self) -> str | None: ...
    @property
    def error(self) -> BaseException | None: ...
    @property
    def duration(self) -> float: ...


class KeptOutcome(NamedTuple):
    """A replayed cell whose values were restored instead: recorded as run, so a later restart keeps it again."""

    source: str
    execution_count: int | None
    cell_id: str | None
    error: BaseException | None
    duration: float


@dataclass
class CellRecord:
    """One cell this kernel ran (or replayed), as a restart plans it and the panel lists it.

    (Written out: without a docstring ``@dataclass`` words one from ``inspect.signature``, at ``%load_ext``.)
    """

    index: int  # position in this kernel's history (unique, increasing)
    number: int | None  # the prompt number In [n]; for a replayed cell, the number it had before the restart
    source: str
    cell_id: str | None
    ok: bool
    duration: float
    error: str | None = None  # "IndexError: Target 195 is out of bounds."
    replayed: bool = False
    original: str | None = None  # the source as it ran, when a patch was applied since (``source`` is patched)

    @property
    def mark(self) -> str | None:
        return _mark(self.source)

    @property
    def first_line(self) -> str:
        """The first line of code (comments only when the cell has nothing else), as the panel lists it."""
        lines = [ln.strip() for ln in self.source.splitlines() if ln.strip() and not re.match(_MARK, ln)]
        code = [ln for ln in lines if not ln.startswith("#")]
        return ((code or lines)[0] if lines else "(empty)")[:80]

    @property
    def own_magic(self) -> bool:
        return not replayable_source(self.source).strip() and bool(self.source.strip())

    @property
    def display_only(self) -> bool:
        return is_display_only(self.source)

    def as_plan_cell(self) -> PlanCell:
        from cudaassert_ipy.restart.plan import PlanCell

        return PlanCell(
            self.number, self.cell_id, replayable_source(self.source), round(self.duration, 4), self.first_line
        )


@dataclass
class CellHistory:
    """The listener ``CellWatcher`` calls after every cell; plus the user's explicit choice of setup cells."""

    records: deque[CellRecord] = field(default_factory=lambda: deque(maxlen=MAX_RECORDS))  # oldest drop out
    pinned: list[int] | None = None  # `%cudaassert setup 2,3,5`: exactly these, in this order of execution
    kept: set[int] = field(default_factory=set)  # `%cudaassert setup keep 3,4`: restored, not replayed
    _origin: PlanCell | None = None  # the plan cell being replayed right now
    _next: int = 0

    def record(self, outcome: RecordableOutcome) -> None:
        """Runs after every cell: plain attribute work only."""
        error = outcome.error
        origin = self._origin
        if origin is None:
            number, cell_id = outcome.execution_count, outcome.cell_id
            if number is None:
                return  # a nested run_cell of some tool, not a cell the user ran
        else:
            number, cell_id = origin.number, origin.cell_id
        text = None
        if error is not None:
            text = error_line(error)
        self.records.append(
            CellRecord(
                self._next, number, outcome.source, cell_id, error is None, outcome.duration, text, origin is not None
            )
        )
        self._next += 1

    def note_loading_cell(self, shell: Any) -> None:
        """The cell running ``%load_ext cudaassert`` is past its pre_run_cell: take it from the running result.

        Its outcome is not known yet; it is counted as succeeded (it usually holds imports too).
        """
        result = getattr(getattr(shell, "displayhook", None), "exec_result", None)  # the cell running now
        info = getattr(result, "info", None)
        number = getattr(result, "execution_count", None)
        if info is not None and isinstance(number, int) and not self.records:
            self.records.append(
                CellRecord(self._next, number, info.raw_cell or "", getattr(info, "cell_id", None), True, 0.0)
            )
            self._next += 1

    @contextmanager
    def replaying(self, plan_cell: PlanCell) -> Iterator[None]:
        """Record the cells run inside this block under the number and id they had before the restart."""
        self._origin = plan_cell
        try:
            yield
        finally:
            self._origin = None

    # -- choosing ---------------------------------------------------------------------------
    def find(self, number: int | None) -> CellRecord | None:
        """The most recent record shown as In [number] (numbers restart at 1 after a restart)."""
        for rec in reversed(self.records):
            if rec.number == number:
                return rec
        return None

    def failing(self, number: int | None) -> CellRecord | None:
        """The failed record for a diagnosis of cell ``number``; the latest failure when unknown."""
        for rec in reversed(self.records):
            if not rec.ok and (number is None or rec.number == number):
                return rec
        return None

    def default_plan(self, failing: CellRecord | None) -> list[CellRecord]:
        limit = failing.index if failing is not None else self._next
        out = []
        for rec in self.records:
            if rec is failing or rec.number is None:
                continue
            mark = rec.mark
            if mark == "skip":
                continue
            if mark in FORCE_IN or (rec.index < limit and rec.ok and not rec.own_magic and not rec.display_only):
                out.append(rec)
        return out

    def resolve(self, numbers: Iterable[int]) -> list[CellRecord]:
        """Records for explicit numbers, in execution order; KeyError lists the unknown numbers."""
        found: dict[int, CellRecord] = {}
        missing = []
        for n in numbers:
            rec = self.find(n)
            if rec is None:
                missing.append(n)
            else:
                found[rec.index] = rec
        if missing:
            raise KeyError(missing)
        return [found[i] for i in sorted(found)]

    def plan(self, failing: CellRecord | None) -> list[CellRecord]:
        """The pinned choice where the user made one (numbers no longer known are dropped), else the default."""
        if self.pinned is not None:
            return [r for r in (self.find(n) for n in self.pinned) if r is not None and r is not failing]
        return self.default_plan(failing)

    def choices(self, failing: CellRecord | None) -> list[ReplayChoice]:
        from cudaassert_ipy.view.actions import ReplayChoice

        return [ReplayChoice(r.number or 0, r.first_line, r.duration, True) for r in self.plan(failing)]

    def apply_patch(self, number: int | None, old: str, new: str) -> CellRecord:
        """Replace the code of the newest record of cell [number] (a restart replays it patched); LookupError when
        that cell's code is not ``old`` any more (it ran again, edited)."""
        for rec in reversed(self.records):
            if rec.number == number:
                if rec.source != old:
                    break
                rec.original = rec.original if rec.original is not None else rec.source
                rec.source = new
                return rec
        raise LookupError(number)

    def known_numbers(self) -> list[int]:
        return sorted({r.number for r in self.records if r.number is not None})
