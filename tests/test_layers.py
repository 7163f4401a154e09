"""The layers stay apart: capture < diagnose < view < restart < shell, and only the shell knows IPython.

Why: the script runner (run/) and the log explainer (logs/) reuse capture, diagnose and the text
report bare, outside any notebook; `import cudaassert_ipy` must stay cheap (no torch, no widgets).
The graph test reads every module with `ast`, imports inside functions and `if TYPE_CHECKING:`
blocks included (a type-only import still ties a layer to the shell's classes).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "cudaassert_ipy"

#: layer -> the layers it may import (besides itself and the BASE modules every layer uses)
MAY_IMPORT: dict[str, set[str]] = {
    "capture": set(),
    # framework adapters: standard library only, so that diagnose, checks and data can all ask them
    "frameworks": set(),
    "diagnose": {"capture", "frameworks"},
    "checks": {"capture", "frameworks", "diagnose"},
    "data": {"capture", "frameworks", "diagnose", "checks"},
    "view": {"capture", "frameworks", "diagnose"},
    "restart": {"capture", "frameworks", "diagnose", "checks", "data", "view"},
    "run": {"capture", "frameworks", "diagnose", "checks", "data", "view", "restart", "logs"},
    "logs": {"capture", "frameworks", "diagnose", "checks", "data", "view", "restart", "run"},
    "shell": {"capture", "frameworks", "diagnose", "checks", "data", "view", "restart", "run", "logs"},
}
# run/ and logs/ are frontends beside shell/: the shell may reuse them (`%cudaassert explain` reads a log), never
# the reverse, and they stay free of IPython (see the bare-import test below).
#: standard-library-only modules every layer may use: the shared words, and keeping wrapper frames out of tracebacks
BASE = ("wording", "passthrough")
#: entry points above every layer, imported by no layer: the package itself (the public API) and each module
#: directly in it but ``wording`` (``__main__``, ``auto``, ...); layers are the subpackages
TOP = "<top>"
#: modules a bare script imports; none of them may bring IPython or ipywidgets along
BARE = ["capture", "frameworks", "diagnose", "view/report.py", "run", "logs"]
WIDGET_WORLD = ["IPython", "ipywidgets"]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> str:
    """``cudaassert_ipy.view.panel`` -> ``view``; ``cudaassert_ipy``, ``cudaassert_ipy.auto`` -> TOP."""
    parts = module.split(".")
    if len(parts) > 2 or (len(parts) == 2 and (parts[1] in BASE or (PACKAGE / parts[1]).is_dir())):
        return parts[1]
    return TOP


def imports_in(source: str, package: str) -> list[tuple[int, str]]:
    """(line, imported cudaassert_ipy module) for every import statement anywhere in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            origin = ".".join([*base, node.module] if node.module else base)
            for alias in node.names:  # `from cudaassert_ipy import view` imports the view package
                sub = PACKAGE.parent / f"{origin}.{alias.name}".replace(".", "/")
                found.append((node.lineno, f"{origin}.{alias.name}" if sub.with_suffix(".py").exists()
                              or sub.is_dir() else origin))
    return sorted({(line, m) for line, m in found if m == "cudaassert_ipy" or m.startswith("cudaassert_ipy.")})


def imports_of(path: Path) -> list[tuple[int, str]]:
    module = module_name(path)
    return imports_in(path.read_text(encoding="utf-8"), module if path.name == "__init__.py" else
                      module.rpartition(".")[0])


def graph() -> list[tuple[str, int, str]]:
    return [(module_name(p), line, target) for p in sorted(PACKAGE.rglob("*.py")) for line, target in imports_of(p)]


def violations(edges: list[tuple[str, int, str]]) -> list[str]:
    out = []
    for source, line, target in edges:
        have, want = layer_of(source), layer_of(target)
        if have == TOP or want == have or want in BASE:
            continue
        if have not in MAY_IMPORT and have not in BASE:
            out.append(f"{source}: package {have!r} has no place in MAY_IMPORT")
        elif want not in MAY_IMPORT.get(have, set()):
            out.append(f"{source}:{line} imports {target} ({have} may not import {want})")
    return out


def fresh_python(code: str) -> dict[str, bool]:
    """Run ``code`` in a new interpreter; it prints a JSON dict of which modules ended up loaded."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240,
                          cwd=PACKAGE.parent)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_import_graph_is_read_from_every_module_including_imports_inside_functions():
    edges = {(s, t) for s, _, t in graph()}
    assert ("cudaassert_ipy.view.panel", "cudaassert_ipy.view.report") in edges
    assert ("cudaassert_ipy.view.replay_view", "cudaassert_ipy.view.panel") in edges  # inside progress_for()
    assert {layer_of(s) for s, _ in edges} >= {"capture", "diagnose", "view", "restart", "shell", "checks"}


def test_type_only_and_relative_imports_count_as_imports():
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from cudaassert_ipy.shell.extension import "
              "Extension\n\ndef f():\n    from ..shell import magics\n    from . import report\n")
    assert imports_in(source, "cudaassert_ipy.view") == [
        (3, "cudaassert_ipy.shell.extension"), (6, "cudaassert_ipy.shell.magics"), (7, "cudaassert_ipy.view.report")]


def test_no_module_below_the_shell_imports_the_shell():
    wrong = [f"{s}:{line} imports {t}" for s, line, t in graph()
             if layer_of(s) not in {"shell", TOP} and layer_of(t) == "shell"]
    assert wrong == [], "only shell/ wires the layers together:\n" + "\n".join(wrong)


def test_each_layer_imports_only_the_layers_below_it():
    wrong = violations(graph())
    assert wrong == [], "layer order capture < diagnose < view < restart < shell broken:\n" + "\n".join(wrong)


def test_the_layer_rules_catch_a_view_importing_restart_an_entry_point_or_a_package_without_a_place():
    edges = [("cudaassert_ipy.view.panel", 3, "cudaassert_ipy.restart.request"),
             ("cudaassert_ipy.restart.replay", 4, "cudaassert_ipy.view.replay_view"),
             ("cudaassert_ipy.capture.fd_tap", 5, "cudaassert_ipy"),
             ("cudaassert_ipy.plugins.x", 6, "cudaassert_ipy.view.report"),
             ("cudaassert_ipy.auto", 7, "cudaassert_ipy.shell.extension"),
             ("cudaassert_ipy.view.panel", 8, "cudaassert_ipy.__main__")]
    assert violations(edges) == [
        "cudaassert_ipy.view.panel:3 imports cudaassert_ipy.restart.request (view may not import restart)",
        "cudaassert_ipy.capture.fd_tap:5 imports cudaassert_ipy (capture may not import <top>)",
        "cudaassert_ipy.plugins.x: package 'plugins' has no place in MAY_IMPORT",
        "cudaassert_ipy.view.panel:8 imports cudaassert_ipy.__main__ (view may not import <top>)"]


def test_capture_diagnose_the_text_report_run_and_logs_import_neither_ipython_nor_ipywidgets():
    files = []
    for place in BARE:
        path = PACKAGE / place
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    names = [module_name(p) for p in files]
    assert "cudaassert_ipy.diagnose.causes.rules" in names and "cudaassert_ipy.view.report" in names
    loaded = fresh_python(
        f"import importlib, json, sys\nfor name in {names!r}:\n    importlib.import_module(name)\n"
        f"print(json.dumps({{m: m in sys.modules for m in {WIDGET_WORLD!r}}}))")
    assert loaded == {m: False for m in WIDGET_WORLD}


def test_importing_the_package_imports_neither_torch_nor_ipywidgets_nor_ipython():
    names = ["torch", *WIDGET_WORLD]
    loaded = fresh_python(f"import json, sys\nimport cudaassert_ipy\nprint(json.dumps({{m: m in sys.modules "
                          f"for m in {names!r}}}))")
    assert loaded == {m: False for m in names}
