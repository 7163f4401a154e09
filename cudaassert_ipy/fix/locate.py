"""Find the code that created or last configured a culprit, in the cells this kernel ran (oldest first).

Follows what a reader would: the newest assignment to ``model.head`` or to ``model``; through
``.to(device)``; into ``nn.Sequential`` by position; into the ``__init__`` of a class defined in a
cell (``self.head = nn.Linear(...)``); from a parameter back to the call that passed it
(``CarNet(num_classes)``, ``make_trainer(num_labels=3)``), and from a name to the literal it was
given in that cell (``num_classes = 195``). Only what the tree says: nothing is evaluated.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from cudaassert_ipy.fix.model import CellSource
from cudaassert_ipy.fix.source import Edit, Parsed, dotted, parse, walk

__all__ = ["Frame", "History", "Shift", "Site", "keyword_edit"]

#: an operand that holds the labels (``labels``, ``row["label"]``, ``self.targets[i]``, ``y``)
_LABELISH = re.compile(r"(?i)label|target|(?<![\w.])(y|ys|yb|cls)(?!\w)")
#: methods that hand back the same module: followed through (``Net().to(device)``)
_SAME_OBJECT = {"to", "cuda", "cpu", "train", "eval", "float", "half", "double", "bfloat16", "requires_grad_"}


@dataclass(frozen=True)
class Frame:
    """A function the value is inside of, and the call that ran it (to follow a parameter back)."""

    function: Any  # libcst.FunctionDef
    call: tuple[Parsed, Any] | None  # (cell, libcst.Call) that called it (a class call for __init__)
    is_init: bool = False


@dataclass(frozen=True)
class Site:
    """A call found in a cell (``nn.Linear(32, num_classes)``), and the functions it sits in."""

    parsed: Parsed
    call: Any  # libcst.Call
    frames: tuple[Frame, ...] = ()  # innermost last

    @property
    def text(self) -> str:
        return self.parsed.code(self.call)


@dataclass(frozen=True)
class Shift:
    """``labels + 1`` (or ``- 1``, ``labels += 1``) in a DataLoader's collate_fn or a Dataset's ``__getitem__``:
    code that moves every label by one, and the edit that takes the shift out."""

    parsed: Parsed
    delta: int  # +1 or -1
    where: str  # "`collate` (the DataLoader's collate_fn)", "`Pets.__getitem__`"
    collate: bool  # in a collate_fn (a scan of the dataset sees the labels before it), not in ``__getitem__``
    code: str  # the shifting expression or statement, as written
    edit: Edit


def _name_of_call(call: Any) -> str | None:
    import libcst as cst

    func = call.func
    if isinstance(func, cst.Name):
        return str(func.value)
    if isinstance(func, cst.Attribute):
        return str(func.attr.value)
    return None


class History:
    """The cells, parsed lazily: only those that mention what is looked for, and of those only the statements that
    matter for it (fix/source.py, ``pruned``): 200 cells stay cheap. One cell may so have several trees: compare
    cells by ``Parsed.order``, not by identity."""

    def __init__(self, cells: Sequence[CellSource]) -> None:
        self.cells = list(cells)
        self._parsed: dict[tuple[int, str | None], Parsed | None] = {}

    def parsed(self, word: str | None = None) -> Iterator[Parsed]:
        """Newest first; with ``word``, only cells whose text contains it."""
        for order in range(len(self.cells) - 1, -1, -1):
            cell = self.cells[order]
            if word is not None and word not in cell.source:
                continue
            if (order, word) not in self._parsed:
                self._parsed[(order, word)] = parse(cell, order, word)
            p = self._parsed[(order, word)]
            if p is not None:
                yield p

    # -- statements --------------------------------------------------------------------------------------
    def assignments(self, target: str, top_level: bool = True) -> Iterator[tuple[Parsed, Any, Any]]:
        """(cell, statement, value) of each ``target = value``, newest first (last in a cell first)."""
        import libcst as cst

        root = target.split(".")[0]
        for p in self.parsed(root):
            found = []
            nodes = _top_statements(p.module) if top_level else walk(p.module)
            for stmt in nodes:
                for small in _small_statements(stmt):
                    if isinstance(small, cst.Assign):
                        if any(dotted(t.target) == target for t in small.targets):
                            found.append((p, stmt, small.value))
                    elif (
                        isinstance(small, cst.AnnAssign) and small.value is not None and dotted(small.target) == target
                    ):
                        found.append((p, stmt, small.value))
            yield from reversed(found)

    def class_def(self, name: str) -> tuple[Parsed, Any] | None:
        import libcst as cst

        for p in self.parsed(f"class {name}"):
            for node in walk(p.module):
                if isinstance(node, cst.ClassDef) and node.name.value == name:
                    return p, node
        return None

    def function_def(self, name: str) -> tuple[Parsed, Any] | None:
        import libcst as cst

        for p in self.parsed(f"def {name}"):
            for node in p.module.body:
                if isinstance(node, cst.FunctionDef) and node.name.value == name:
                    return p, node
        return None

    def calls_of(self, name: str) -> Iterator[tuple[Parsed, Any]]:
        """Every call of ``name(...)`` (or ``x.name(...)``) at a cell's top level, newest first."""
        import libcst as cst

        for p in self.parsed(name):
            found = [
                (p, n)
                for stmt in p.module.body
                for n in walk(stmt)
                if isinstance(n, cst.Call)
                and _name_of_call(n) == name
                and not isinstance(stmt, (cst.FunctionDef, cst.ClassDef))
            ]
            yield from reversed(found)

    # -- following a module's name to the call that built it -----------------------------------------------
    def module_site(self, name: str) -> Site | None:
        """The call that built the module the user knows as ``name`` (``model.head``, ``model.2``)."""
        parts = name.split(".")
        best: tuple[tuple[int, int], Parsed, Any, list[str]] | None = None
        for k in range(len(parts), 0, -1):
            for p, stmt, value in self.assignments(".".join(parts[:k])):
                key = (p.order, p.line_of(stmt))
                if best is None or key > best[0]:
                    best = (key, p, value, parts[k:])
                break  # the newest for this target
        if best is None:
            return None
        _, p, value, rest = best
        return self._follow(p, value, rest, ())

    def _follow(self, p: Parsed, expr: Any, rest: list[str], frames: tuple[Frame, ...]) -> Site | None:
        import libcst as cst

        while (
            isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _SAME_OBJECT
        ):
            expr = expr.func.value
        if not isinstance(expr, cst.Call):
            return None
        if not rest:
            return Site(p, expr, frames)
        callee = _name_of_call(expr)
        if callee == "Sequential" and rest[0].isdigit():
            positional = [a for a in expr.args if a.keyword is None and a.star == ""]
            i = int(rest[0])
            return self._follow(p, positional[i].value, rest[1:], frames) if i < len(positional) else None
        found = self.class_def(callee) if callee else None
        if found is None:
            return None
        cp, cls = found
        init = next((n for n in walk(cls) if isinstance(n, cst.FunctionDef) and n.name.value == "__init__"), None)
        if init is None:
            return None
        value = None
        for node in walk(init):
            if isinstance(node, cst.Assign) and any(dotted(t.target) == f"self.{rest[0]}" for t in node.targets):
                value = node.value  # the last one wins
        if value is None:
            return None
        return self._follow(cp, value, rest[1:], (*frames, Frame(init, (p, expr), is_init=True)))

    def keyword_site(self, setting: str) -> Site | None:
        """The newest call that passes ``setting=`` (``num_labels=3``, ``num_classes=5``), with its function."""
        import libcst as cst

        for p in self.parsed(setting):
            best = None
            for stmt in p.module.body:
                func = stmt if isinstance(stmt, cst.FunctionDef) else None
                for node in walk(stmt):
                    if isinstance(node, cst.Call) and any(
                        a.keyword is not None and a.keyword.value == setting for a in node.args
                    ):
                        if isinstance(stmt, cst.ClassDef):
                            continue
                        best = (node, func)
            if best is not None:
                node, func = best
                frames = (Frame(func, None),) if func is not None else ()
                return Site(p, node, frames)
        return None

    # -- code that shifts the labels by one --------------------------------------------------------------------
    def label_shifts(self) -> list[Shift]:
        """Every ``± 1`` applied to labels in a function passed as ``collate_fn=`` (or a lambda) and in a class's
        ``__getitem__``, newest first."""
        import libcst as cst

        found: list[tuple[tuple[int, int], Shift]] = []
        for p in self.parsed("collate_fn"):
            for n in walk(p.module):
                if not (isinstance(n, cst.Arg) and n.keyword is not None and n.keyword.value == "collate_fn"):
                    continue
                if isinstance(n.value, cst.Lambda):
                    found += _shifts(p, n.value, "the collate_fn lambda", True)
                elif isinstance(n.value, cst.Name):
                    fdef = self.function_def(str(n.value.value))
                    if fdef is not None:
                        found += _shifts(fdef[0], fdef[1], f"`{n.value.value}` (the DataLoader's collate_fn)", True)
        for p in self.parsed("__getitem__"):
            for n in walk(p.module):
                if isinstance(n, cst.ClassDef):
                    for m in n.body.body:
                        if isinstance(m, cst.FunctionDef) and m.name.value == "__getitem__":
                            found += _shifts(p, m, f"`{n.name.value}.__getitem__`", False)
        unique: dict[tuple[int, int, int], Shift] = {}
        for _, s in sorted(found, key=lambda t: t[0], reverse=True):
            unique.setdefault((s.parsed.order, s.edit.start, s.edit.end), s)
        return list(unique.values())

    # -- from an argument to the literal to edit --------------------------------------------------------------
    def value_edit(self, p: Parsed, expr: Any, new: str, frames: tuple[Frame, ...]) -> Edit | None:
        """Set the value ``expr`` stands for to ``new``: at the literal, else at the parameter's caller, else the
        expression itself."""
        import libcst as cst

        if isinstance(expr, cst.Integer):
            start, end = p.span(expr)
            return Edit(p, start, end, new)
        param = None
        if isinstance(expr, cst.Name):
            param = str(expr.value)
        elif (
            isinstance(expr, cst.Attribute)
            and dotted(expr) is not None
            and str(dotted(expr)).startswith("self.hparams.")
        ):
            param = str(dotted(expr)).split(".", 2)[2]
        if param is not None and frames:
            frame = frames[-1]
            arg = self._argument_for(frame, param)
            if arg is not None:
                cp, value = arg
                return self.value_edit(cp, value, new, frames[:-1])
            defaulted = self._defaulted_call(frame, param)
            if defaulted is not None:  # `LitClassifier()` with `num_classes=3` as the default: pass it at the call
                cp, call = defaulted
                return keyword_edit(cp, call, f"{param}={new}")
        if isinstance(expr, cst.Name) and not frames:
            literal = _unique_literal(p, str(expr.value))
            if literal is not None:
                start, end = p.span(literal)
                return Edit(p, start, end, new)
        if isinstance(expr, (cst.Name, cst.Attribute)) and frames:
            return None  # a name we cannot follow inside a function: do not guess
        start, end = p.span(expr)
        return Edit(p, start, end, new)

    def _defaulted_call(self, frame: Frame, param: str) -> tuple[Parsed, Any] | None:
        """The newest call of ``frame``'s function that leaves ``param`` to its default (None when it passes it)."""
        names = [x.name.value for x in frame.function.params.params]
        offset = 1 if frame.is_init and names and names[0] == "self" else 0
        if param not in names[offset:] or frame.function.params.params[names.index(param)].default is None:
            return None
        calls = [frame.call] if frame.call is not None else list(self.calls_of(frame.function.name.value))[:1]
        for cp, call in calls:
            positional = [a for a in call.args if a.keyword is None and a.star == ""]
            if any(a.star for a in call.args) or any(
                a.keyword is not None and a.keyword.value == param for a in call.args
            ):
                return None
            if len(positional) <= names.index(param) - offset:
                return cp, call
        return None

    def _argument_for(self, frame: Frame, param: str) -> tuple[Parsed, Any] | None:
        """The caller's expression bound to ``param`` of ``frame``'s function (its newest call)."""
        import libcst as cst

        names = [x.name.value for x in frame.function.params.params]
        if frame.is_init and names and names[0] == "self":
            names = names[1:]
        if param not in names:
            return None
        calls = [frame.call] if frame.call is not None else list(self.calls_of(frame.function.name.value))[:1]
        for cp, call in calls:
            positional = [a for a in call.args if a.keyword is None and a.star == ""]
            for a in call.args:
                if a.keyword is not None and a.keyword.value == param:
                    return cp, a.value
            i = names.index(param)
            if i < len(positional):
                return cp, positional[i].value
            default = frame.function.params.params[i + (1 if frame.is_init else 0)].default
            if default is not None and isinstance(default, cst.Integer):
                return None  # the default is used: the call site gets the keyword (see derive)
        return None


def keyword_edit(p: Parsed, call: Any, text: str) -> Edit:
    """``f(a)`` -> ``f(a, text)``; ``f()`` -> ``f(text)``."""
    if call.args:
        _, end = p.span(call.args[-1].value)
        return Edit(p, end, end, ", " + text)
    start, end = p.span(call)
    close = p.cell.source.rindex(")", start, end)
    return Edit(p, close, close, text)


def _is_one(node: Any) -> bool:
    import libcst as cst

    return isinstance(node, cst.Integer) and node.value == "1"


def _shifts(p: Parsed, func: Any, where: str, collate: bool) -> list[tuple[tuple[int, int], Shift]]:
    """The label shifts inside ``func`` (a FunctionDef or a Lambda), each with the edit that removes it."""
    import libcst as cst

    out = []
    source = p.cell.source
    for n in walk(func):
        if isinstance(n, cst.BinaryOperation) and isinstance(n.operator, (cst.Add, cst.Subtract)):
            delta = 1 if isinstance(n.operator, cst.Add) else -1
            if _is_one(n.right) and _LABELISH.search(p.code(n.left)):
                cut = (p.span(n.left)[1], p.span(n.right)[1])  # `labels + 1` -> `labels`, parentheses kept
            elif delta == 1 and _is_one(n.left) and _LABELISH.search(p.code(n.right)):
                cut = (p.span(n.left)[0], p.span(n.right)[0])  # `1 + labels` -> `labels`
            else:
                continue
            out.append(
                ((p.order, p.line_of(n)), Shift(p, delta, where, collate, p.code(n), Edit(p, cut[0], cut[1], "")))
            )
        elif isinstance(n, cst.IndentedBlock) and len(n.body) > 1:  # a line removed leaves the block a statement
            for line in n.body:
                aug = line.body[0] if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 else None
                if not (
                    isinstance(aug, cst.AugAssign)
                    and isinstance(aug.operator, (cst.AddAssign, cst.SubtractAssign))
                    and _is_one(aug.value)
                    and _LABELISH.search(p.code(aug.target))
                ):
                    continue
                start, end = p.span(aug)
                line_start = source.rfind("\n", 0, start) + 1
                line_end = source.find("\n", end)
                line_end = len(source) if line_end < 0 else line_end + 1
                delta = 1 if isinstance(aug.operator, cst.AddAssign) else -1
                out.append(
                    (
                        (p.order, p.line_of(aug)),
                        Shift(p, delta, where, collate, source[start:end], Edit(p, line_start, line_end, "")),
                    )
                )
    return out


def _top_statements(module: Any) -> Iterator[Any]:
    """A cell's statements, and those inside top-level ``with``/``if``/``for``/``try`` blocks."""
    import libcst as cst

    for stmt in module.body:
        yield stmt
        if isinstance(stmt, (cst.With, cst.If, cst.For, cst.Try)):
            for inner in walk(stmt.body):
                if isinstance(inner, (cst.SimpleStatementLine,)):
                    yield inner


def _small_statements(stmt: Any) -> list[Any]:
    import libcst as cst

    return list(stmt.body) if isinstance(stmt, cst.SimpleStatementLine) else []


def _unique_literal(p: Parsed, name: str) -> Any | None:
    """The integer literal of the one top-level ``name = <int>`` in this cell, if there is exactly one."""
    import libcst as cst

    found = []
    for stmt in p.module.body:
        for small in _small_statements(stmt):
            if isinstance(small, cst.Assign) and any(dotted(t.target) == name for t in small.targets):
                found.append(small.value)
    return found[0] if len(found) == 1 and isinstance(found[0], cst.Integer) else None
