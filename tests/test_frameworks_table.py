"""Adding a framework is one module plus one table row (frameworks/table.py), and nothing else names it.

A half-registered framework fails here: a module under frameworks/ without a row, a row without a module (or
without ``ADAPTER``), a row whose packages or hooks are not its adapter's, a hook nobody reads, or a framework's
name in the generic code that composes fixes (diagnose/hints.py) or walks the data path (data/). Runs without
the frameworks (no framework is imported: the table and the adapters read only names).
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.frameworks import ADAPTERS, Adapter, table
from cudaassert_ipy.frameworks.table import HOOKS, ROWS, Row

PACKAGE = Path(__file__).resolve().parent.parent / "cudaassert_ipy"
FRAMEWORKS = PACKAGE / "frameworks"
#: the modules of frameworks/ that are no framework: the shape, the runner of the hooks, the table
NOT_FRAMEWORKS = {"__init__", "base", "registry", "table"}
#: where each kind of hook is read: the registry and base run the diagnosis hooks, hints reads the words (through
#: the registry), data/loaders the loader hooks
CONSUMERS = [FRAMEWORKS / "registry.py", FRAMEWORKS / "base.py", PACKAGE / "data" / "loaders" / "__init__.py"]
#: code that must name no framework: the one place fixes are worded, and the data path
GENERIC = [PACKAGE / "diagnose" / "hints.py", *sorted((PACKAGE / "data").rglob("*.py"))]
#: packages that are no framework: always imported (the launchers, the engines) or torch itself (generic)
NOT_FRAMEWORK_PACKAGES = {"torch", "subprocess", "builtins"}


def defined_hooks(adapter: Adapter) -> set[str]:
    return {hook for hook in HOOKS if getattr(adapter, hook)}


def problems(rows: Iterable[Row], modules: Iterable[str], load: Callable[[str], Adapter]) -> list[str]:
    """Everything half-registered, one line each: what this file holds the real table and modules to."""
    rows, found = list(rows), set(modules)
    out = [f"frameworks/{m}.py has no row in frameworks/table.py" for m in sorted(found - {r.module for r in rows})]
    for row in rows:
        if row.module not in found:
            out.append(f"the row {row.module!r} has no module frameworks/{row.module}.py")
            continue
        try:
            adapter = load(row.module)
        except Exception as error:
            out.append(f"frameworks/{row.module}.py: {type(error).__name__}: {error}")
            continue
        if adapter.name != row.module:
            out.append(f"frameworks/{row.module}.py: ADAPTER.name is {adapter.name!r}")
        if adapter.packages != row.packages:
            out.append(f"{row.module}: the row's packages {row.packages} are not ADAPTER.packages {adapter.packages}")
        if defined_hooks(adapter) != set(row.hooks):
            defined = sorted(defined_hooks(adapter))
            out.append(f"{row.module}: the row names {sorted(row.hooks)}, ADAPTER defines {defined}")
    return out


def module_files() -> set[str]:
    return {p.stem for p in FRAMEWORKS.glob("*.py")} - NOT_FRAMEWORKS


def test_every_framework_module_has_its_row_and_every_row_its_module_with_the_same_hooks():
    assert problems(ROWS, module_files(), table.load) == []
    assert [a.name for a in ADAPTERS] == [r.module for r in ROWS], "the registry runs the table, in its order"


def test_a_half_registered_framework_is_caught():
    real = {r.module: r for r in ROWS}
    timm = real["timm"]
    rows = [*ROWS, Row("ghost", ("ghost",), frozenset({"found"}))]
    assert problems(rows, module_files(), table.load) == ["the row 'ghost' has no module frameworks/ghost.py"]
    assert problems(ROWS, {*module_files(), "newfw"}, table.load) == [
        "frameworks/newfw.py has no row in frameworks/table.py"
    ]
    no_ahead = [Row("timm", timm.packages, timm.hooks - {"ahead"}) if r is timm else r for r in ROWS]
    assert problems(no_ahead, module_files(), table.load) == [
        "timm: the row names ['found', 'head', 'head_words'], ADAPTER defines ['ahead', 'found', 'head', 'head_words']"
    ]
    assert problems([Row("base", (), frozenset())], {"base"}, table.load) == [
        "frameworks/base.py: TypeError: cudaassert_ipy.frameworks.base defines no ADAPTER = Adapter(...)"
    ]
    with pytest.raises(ValueError, match="unknown hooks"):
        table._row("newfw", ("newfw",), "found", "on_batch")


def test_every_hook_a_row_may_name_is_an_adapter_field_read_by_the_generic_code():
    assert set(Adapter.__dataclass_fields__) - {"name", "packages"} == HOOKS
    read = {
        node.attr
        for path in CONSUMERS
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute)
    }
    assert HOOKS - read == set(), "a hook kind that no generic code reads is never wired"


def test_the_words_of_every_framework_reach_hints_and_no_two_frameworks_share_a_key():
    for kind, merged in (("head_words", hints.HEAD_WORDS), ("advice_words", hints.FRAMEWORK_ADVICE)):
        keys = [key for a in ADAPTERS for key in getattr(a, kind)]
        assert len(keys) == len(set(keys)), kind
        assert sorted(merged) == sorted(keys)
        assert all(merged[key] == getattr(a, kind)[key] for a in ADAPTERS for key in getattr(a, kind))
    assert all(a.head_words for a in ADAPTERS if a.head is not None), "a class head with no words to say it in"


def _named_in(source: str, label: str, names: set[str]) -> list[str]:
    """The framework names in ``source``'s code (identifiers, imports, strings), docstrings and comments aside."""
    tree = ast.parse(source)
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    out = []
    for node in ast.walk(tree):
        words: list[str] = []
        if isinstance(node, ast.Name):
            words = [node.id]
        elif isinstance(node, ast.Attribute):
            words = [node.attr]
        elif isinstance(node, ast.alias):
            words = [node.name, node.asname or ""]
        elif isinstance(node, ast.ImportFrom):
            words = [node.module or ""]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            words = [node.name]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            words = [node.value]
        out += [
            f"{label}:{getattr(node, 'lineno', '?')}: {w[:60]!r}"
            for w in words
            if names & set(re.findall(r"[a-z0-9]+", w.lower()))
        ]
    return out


def test_no_framework_is_named_in_hints_or_the_data_path():
    names = {p for r in ROWS for p in r.packages} - NOT_FRAMEWORK_PACKAGES
    assert {"fastai", "ultralytics", "lightning"} <= names
    assert [
        hit
        for path in GENERIC
        for hit in _named_in(path.read_text(encoding="utf-8"), str(path.relative_to(PACKAGE)), names)
    ] == []


def test_the_scan_sees_a_framework_named_in_code_not_in_a_docstring_or_a_comment():
    source = (
        '"""fastai in a docstring is fine."""\nfrom x import fastai_loaders  # timm in a comment too\n'
        'def f(y):\n    """Lightning here too."""\n    return "timm" in y or y.pytorch_lightning\n'
    )
    assert sorted(_named_in(source, "probe", {"fastai", "timm", "lightning"})) == [
        "probe:2: 'fastai_loaders'",
        "probe:5: 'pytorch_lightning'",
        "probe:5: 'timm'",
    ]


def test_the_table_loads_only_the_modules_of_imported_packages():
    code = (
        "import json, sys\nfrom cudaassert_ipy.frameworks import table\nimport cudaassert_ipy.data.loaders\n"
        "before = sorted(m for m in sys.modules if m.startswith('cudaassert_ipy.frameworks.'))\n"
        "names = [a.name for a in table.adapters_with('ahead', {'timm': None})]\n"
        "after = sorted(m for m in sys.modules if m.startswith('cudaassert_ipy.frameworks.'))\n"
        "print(json.dumps([before, names, after]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    before, names, after = json.loads(done.stdout)
    assert before == ["cudaassert_ipy.frameworks.base", "cudaassert_ipy.frameworks.table"]
    assert names == ["timm"]
    assert after == [
        "cudaassert_ipy.frameworks.base",
        "cudaassert_ipy.frameworks.generic",
        "cudaassert_ipy.frameworks.table",
        "cudaassert_ipy.frameworks.timm",
    ]
