"""Which names a cell writes, read from its syntax tree, so that a kept cell can be skipped without changing state.

A cell can be skipped on replay only when restoring its names gives exactly what running it would:
so it must do nothing but bind or change names (a top-level call like ``os.chdir(...)`` or
``!pip install`` would be lost), and no later cell may change those names again (the saved value
is the state at the restart, which already holds that later change: replaying the later cell would
apply it twice). "Changes" is read from the code: rebinding, ``del``, ``+=``, assigning to an
attribute or item (``df["x"] = ...``), and calling an in-place method on the name
(``df.drop(..., inplace=True)``, ``t.add_(1)``, ``xs.append(...)``, ``model.to(...)``). A function
that mutates an argument it is given cannot be seen this way; that is the one thing assumed.

Standard library only, plus IPython's cell transformer (magics and ``!`` lines become calls).
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass

from cudaassert_ipy.base.wording import error_line

__all__ = ["CellNames", "is_keep_marked", "read_cell"]

_KEEP_MARK = re.compile(r"^\s*#\s*cudaassert\s*:\s*keep\b", re.IGNORECASE)
# method names that change their receiver (pandas, numpy, torch, containers, sklearn, datasets, tokenizers)
MUTATORS = frozenset(
    {
        "append",
        "extend",
        "insert",
        "pop",
        "popitem",
        "remove",
        "clear",
        "update",
        "setdefault",
        "add",
        "discard",
        "sort",
        "reverse",
        "shuffle",
        "fill",
        "resize",
        "put",
        "itemset",
        "setflags",
        "fit",
        "partial_fit",
        "fit_transform",
        "set_params",
        "set_format",
        "set_transform",
        "reset_format",
        "add_tokens",
        "add_special_tokens",
        "train_from_iterator",
        "to",
        "cuda",
        "cpu",
        "half",
        "float",
        "double",
        "bfloat16",
        "train",
        "eval",
        "requires_grad_",
        "zero_grad",
        "apply",
        "load_state_dict",
        "register_buffer",
        "register_parameter",
        "add_module",
        "register_forward_hook",
        "register_forward_pre_hook",
        "seed",
        "set_index",
        "reset_index",
        "rename",
        "drop",
        "dropna",
        "fillna",
        "replace",
        "sort_values",
        "sort_index",
        "set_axis",
        "astype",
        "__setitem__",
        "__delitem__",
        "__iadd__",
        "write",
        "close",
    }
)
# top-level calls that only show something: replaying or skipping them changes nothing
DISPLAY_CALLS = frozenset({"print", "display", "pprint", "Markdown", "HTML"})
DISPLAY_METHODS = frozenset({"head", "tail", "describe", "info", "sample", "summary", "show"})


@dataclass(frozen=True)
class CellNames:
    """What a cell's top level binds and changes; ``effect`` is the first statement that does more."""

    binds: frozenset[str]  # names (re)bound or deleted
    changes: frozenset[str]  # names changed in place (attribute/item assignment, in-place calls)
    effect: str | None = None  # e.g. "os.chdir('data')": the cell cannot be skipped
    error: str | None = None  # the source could not be parsed
    # (name, what it imports) for names bound only by ``import``: ("pd", "pandas"), ("F", "torch.nn:functional")
    imports: frozenset[tuple[str, str]] = frozenset()

    @property
    def writes(self) -> frozenset[str]:
        """Every name whose value the cell leaves different: what a kept cell saves."""
        return self.binds | self.changes


def is_keep_marked(source: str) -> bool:
    """A first line ``# cudaassert: keep``."""
    first = source.lstrip("\n").split("\n", 1)[0]
    return bool(_KEEP_MARK.match(first))


def _transform(source: str) -> str:
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:  # plain Python source
        return source
    new_manager: Callable[[], TransformerManager] = TransformerManager  # __init__ unannotated in IPython
    return str(new_manager().transform_cell(source))


def _root(node: ast.AST) -> str | None:
    """``df`` for ``df``, ``df.a``, ``df["x"]``, ``df.a[0].b``."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


class _Walker(ast.NodeVisitor):
    """Visits module-level code; function and class bodies are not entered (their names are local)."""

    def __init__(self) -> None:
        self.binds: set[str] = set()
        self.changes: set[str] = set()
        self.imported: dict[str, set[str]] = {}  # name -> what the cell's imports bind it to
        self.assigned: set[str] = set()  # names also bound some other way

    def _target(self, node: ast.AST) -> None:
        if isinstance(node, ast.Name):
            self.binds.add(node.id)
            self.assigned.add(node.id)
        elif isinstance(node, (ast.Tuple, ast.List)):
            for elt in node.elts:
                self._target(elt)
        elif isinstance(node, ast.Starred):
            self._target(node.value)
        else:
            root = _root(node)
            if root is not None:
                self.changes.add(root)
            self.visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._target(target)
        self.visit(node.value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._target(node.target)
        self.visit(node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._target(node.target)
            self.visit(node.value)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._target(target)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self._target(node.target)
        self.visit(node.iter)
        for stmt in [*node.body, *node.orelse]:
            self.visit(stmt)

    visit_AsyncFor = visit_For

    def visit_withitem(self, node: ast.withitem) -> None:
        self.visit(node.context_expr)
        if node.optional_vars is not None:
            self._target(node.optional_vars)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self._target(node.target)
        self.visit(node.value)

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        for alias in node.names:
            if alias.name != "*":
                name = alias.asname or alias.name.split(".")[0]
                self.binds.add(name)
                if isinstance(node, ast.ImportFrom):
                    what = f"{'.' * node.level}{node.module or ''}:{alias.name}"
                else:
                    what = alias.name if alias.asname else name
                self.imported.setdefault(name, set()).add(what)

    def imports(self) -> frozenset[tuple[str, str]]:
        """Names bound by exactly one import and nothing else: binding them again is idempotent."""
        return frozenset(
            (n, next(iter(w)))
            for n, w in self.imported.items()
            if len(w) == 1 and n not in self.assigned and n not in self.changes
        )

    visit_ImportFrom = visit_Import

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.binds.add(node.name)
            self.assigned.add(node.name)
        for stmt in node.body:
            self.visit(stmt)

    def _definition(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.binds.add(node.name)
        self.assigned.add(node.name)
        for dec in node.decorator_list:
            self.visit(dec)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _definition

    def visit_Lambda(self, node: ast.Lambda) -> None:
        return  # its body runs later, in its own scope

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        inplace = any(
            k.arg == "inplace" and not (isinstance(k.value, ast.Constant) and k.value.value is False)
            for k in node.keywords
        )
        if isinstance(func, ast.Attribute):
            root = _root(func.value)
            if root is not None and (func.attr in MUTATORS or func.attr.endswith("_") or inplace):
                self.changes.add(root)
        self.generic_visit(node)


def _statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """Module-level statements, with the bodies of ``if``/``for``/``while``/``with``/``try`` (not def/class)."""
    out: list[ast.stmt] = []
    for stmt in body:
        out.append(stmt)
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for name in ("body", "orelse", "finalbody"):
                out += _statements(getattr(stmt, name, None) or [])
            for handler in getattr(stmt, "handlers", None) or []:
                out += _statements(handler.body)
    return out


def _effect(stmt: ast.stmt, binds: set[str], changes: set[str], source: str) -> str | None:
    """The statement's text when it is a bare call that acts outside the cell's own names.

    A bare call on one of the cell's names (``vocab.build(...)``) may change it: it joins ``changes``.
    """
    if not isinstance(stmt, ast.Expr):
        return None
    value = stmt.value
    if isinstance(value, (ast.Constant, ast.Name, ast.Attribute, ast.Subscript)):
        return None  # shows a value (the cell's result), changes nothing
    if isinstance(value, ast.Call):
        func = value.func
        if isinstance(func, ast.Name) and func.id in DISPLAY_CALLS:
            return None
        if isinstance(func, ast.Attribute):
            root = _root(func.value)
            if func.attr in DISPLAY_METHODS:
                return None
            if root is not None and root in binds | changes:
                changes.add(root)  # a module among them is refused when the values are saved
                return None
    text = ast.get_source_segment(source, stmt) or ast.dump(stmt)[:60]
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:57] + "..."


@functools.lru_cache(maxsize=1024)
def read_cell(source: str) -> CellNames:
    """The names a cell's top level binds and changes, and whether it does anything else."""
    try:
        code = _transform(source)
        tree = ast.parse(code)
    except (SyntaxError, ValueError) as e:
        return CellNames(frozenset(), frozenset(), None, error_line(e))
    walker = _Walker()
    effect = None
    for stmt in tree.body:
        walker.visit(stmt)
    for stmt in _statements(tree.body):
        effect = effect or _effect(stmt, walker.binds, walker.changes, code)
    return CellNames(frozenset(walker.binds), frozenset(walker.changes), effect, imports=walker.imports())
