"""The layers stay apart (ORDER: capture < frameworks < diagnose < checks < data < fix < view < restart < run < logs
< shell), each imports exactly the layers its table row names, and only the shell knows IPython.

Why: the script runner (run/) and the log explainer (logs/) reuse capture, diagnose and the text
report bare, outside any notebook; `import cudaassert_ipy` must stay cheap (no torch, no widgets).
The graph test reads every module with `ast`, imports inside functions and `if TYPE_CHECKING:`
blocks included (a type-only import still ties a layer to the shell's classes), and the code the
package writes for another process to run (the resume stub's source) as an entry point of its own.
Under every layer sits base/ (BASE); above them, directly in the package, only the entry points (ENTRY_POINTS).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "cudaassert_ipy"

#: layer -> the layers it imports, exactly: no edge nobody uses (test_the_table_allows_no_edge_nobody_uses). A new
#: edge is a decision: add it here and to the table in docs/architecture.md. Besides these, a layer imports itself
#: and BASE.
MAY_IMPORT: dict[str, set[str]] = {
    "capture": set(),
    # framework adapters: standard library only, so that diagnose, checks and data can all ask them
    "frameworks": set(),
    "diagnose": {"capture", "frameworks"},
    "checks": {"diagnose", "frameworks"},
    # data/loaders: made_by, class_names, frame_self; data/ring: the job folder's names (capture/job_folder.py)
    "data": {"capture", "diagnose", "checks", "frameworks"},
    "fix": {"diagnose", "checks"},  # the culprit and the words; preflight's reader for the data's evidence
    "view": {"diagnose", "fix"},  # a ProposedFix (fix/model.py) rendered as the panel's and the report's fix section
    "restart": {"diagnose", "data", "view"},
    "run": {"capture", "diagnose", "checks", "data", "fix", "view"},  # the patch against the script file
    "logs": {"capture", "diagnose", "view"},
    "shell": {"capture", "diagnose", "checks", "data", "fix", "view", "restart", "logs"},
}
#: bottom to top: every allowed edge points left (down), so the layers stay a stack however the table grows.
#: run/ and logs/ are frontends beside shell/: the shell may reuse them (`%cudaassert explain` reads a log), never
#: the reverse, and they stay free of IPython (see the bare-import test below).
ORDER = ["capture", "frameworks", "diagnose", "checks", "data", "fix", "view", "restart", "run", "logs", "shell"]
#: below every layer, imported by any: cudaassert_ipy/base/ (wording, atomic_file, passthrough, lazy), standard
#: library only and importing nothing else of ours. A helper that only some layers use lives in the lowest of them
#: instead; it is here because run/ may not import restart/ (atomic_file), because in checks/ passthrough would load
#: diagnose/hints into every child process of the runner (run/hook imports it at start), and because checks/ and
#: frameworks/ share lazy
BASE = {"base"}
#: entry points above every layer, imported by no layer: the package itself (the public API) and each module
#: directly in it (ENTRY_POINTS); layers and BASE are the subpackages
TOP = "<top>"
#: the only modules directly in cudaassert_ipy/: the rest lives in a layer (``%load_ext cudaassert`` is the
#: top-level cudaassert.py beside the package, which only calls these)
ENTRY_POINTS = ["__init__.py", "__main__.py", "auto.py"]
#: code the package writes out for another process to run (a file in the next kernel's startup directory): not
#: imported by the module that holds it, so each is an entry point of its own, named ``module::NAME``, and read
#: like a module. Listed here so that a new one is a decision, not an edge nobody sees.
EMBEDDED = {"cudaassert_ipy.restart.startup_stub::STUB_SOURCE"}
#: modules a bare script imports; none of them may bring IPython or ipywidgets along
BARE = ["capture", "frameworks", "diagnose", "view/report.py", "run", "logs"]
WIDGET_WORLD = ["IPython", "ipywidgets"]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> str:
    """``cudaassert_ipy.view.panel`` -> ``view``; ``cudaassert_ipy``, ``cudaassert_ipy.auto``, embedded code -> TOP."""
    if "::" in module:
        return TOP
    parts = module.split(".")
    if len(parts) > 2 or (len(parts) == 2 and (PACKAGE / parts[1]).is_dir()):
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
                found.append(
                    (
                        node.lineno,
                        f"{origin}.{alias.name}" if sub.with_suffix(".py").exists() or sub.is_dir() else origin,
                    )
                )
    return sorted({(line, m) for line, m in found if m == "cudaassert_ipy" or m.startswith("cudaassert_ipy.")})


def imports_of(path: Path) -> list[tuple[int, str]]:
    module = module_name(path)
    return imports_in(
        path.read_text(encoding="utf-8"), module if path.name == "__init__.py" else module.rpartition(".")[0]
    )


def embedded_of(path: Path) -> list[tuple[str, int, str]]:
    """(``module::NAME``, line, imported module) for each module-level string that is Python importing our code."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if not (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
            and isinstance(node.targets[0], ast.Name)
        ):
            continue
        try:
            imported = imports_in(node.value.value, package)
        except SyntaxError:  # prose, a template: not code
            continue
        found += [(f"{module}::{node.targets[0].id}", line, target) for line, target in imported]
    return found


def graph() -> list[tuple[str, int, str]]:
    files = sorted(PACKAGE.rglob("*.py"))
    return [(module_name(p), line, target) for p in files for line, target in imports_of(p)] + [
        edge for p in files for edge in embedded_of(p)
    ]


def runtime_source(source: str) -> str:
    """``source`` without its ``if TYPE_CHECKING:`` blocks: the imports that run (a type-only import loads nothing)."""

    class Strip(ast.NodeTransformer):
        def visit_If(self, node: ast.If) -> ast.AST | list[ast.stmt]:
            test = node.test
            if getattr(test, "id", getattr(test, "attr", None)) == "TYPE_CHECKING":
                return node.orelse or ast.copy_location(ast.Pass(), node)
            return self.generic_visit(node)

    return ast.unparse(Strip().visit(ast.parse(source)))


def runtime_graph() -> dict[str, set[str]]:
    """module -> the package's modules it imports when it runs (at import time or inside a function)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        out[module] = {
            t for _, t in imports_in(runtime_source(path.read_text(encoding="utf-8")), package) if t != module
        }
    return out


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: each strongly connected set of two or more modules (Tarjan's algorithm), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


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
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240, cwd=PACKAGE.parent)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_import_graph_is_read_from_every_module_including_imports_inside_functions():
    edges = {(s, t) for s, _, t in graph()}
    assert ("cudaassert_ipy.view.panel", "cudaassert_ipy.view.report") in edges
    assert ("cudaassert_ipy.view.replay_view", "cudaassert_ipy.view.panel") in edges  # inside progress_for()
    assert {layer_of(s) for s, _ in edges} >= {"capture", "diagnose", "view", "restart", "shell", "checks"}


def test_type_only_and_relative_imports_count_as_imports():
    source = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from cudaassert_ipy.shell.extension import "
        "Extension\n\ndef f():\n    from ..shell import magics\n    from . import report\n"
    )
    assert imports_in(source, "cudaassert_ipy.view") == [
        (3, "cudaassert_ipy.shell.extension"),
        (6, "cudaassert_ipy.shell.magics"),
        (7, "cudaassert_ipy.view.report"),
    ]


def test_code_written_for_another_process_is_read_as_an_entry_point_of_its_own():
    edges = {(s, t) for s, _, t in graph()}
    assert {s for s, _ in edges if "::" in s} == EMBEDDED
    stub = "cudaassert_ipy.restart.startup_stub::STUB_SOURCE"  # the resume stub, run by the restarted kernel
    assert {t for s, t in edges if s == stub} == {"cudaassert_ipy.shell.resume", "cudaassert_ipy.restart.plan_files"}
    assert layer_of(stub) == TOP


def test_the_top_level_holds_only_the_entry_points_beside_the_layers_and_base():
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == ENTRY_POINTS, (
        "a module beside the layers: move it into the lowest layer that uses it (base/ if every layer may)"
    )
    packages = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
    assert packages == sorted([*ORDER, *BASE])
    assert {layer_of(f"cudaassert_ipy.{name[:-3]}") for name in ENTRY_POINTS if name != "__init__.py"} == {TOP}


def test_the_table_allows_no_edge_nobody_uses():
    used = {(layer_of(s), layer_of(t)) for s, _, t in graph()}
    unused = sorted((have, want) for have, wants in MAY_IMPORT.items() for want in wants if (have, want) not in used)
    assert unused == [], "MAY_IMPORT allows edges no module takes; drop them (and from docs/architecture.md)"


def test_the_table_only_points_down_the_layer_order():
    assert sorted(ORDER) == sorted(MAY_IMPORT)
    upward = sorted(
        (have, want) for have, wants in MAY_IMPORT.items() for want in wants if ORDER.index(want) >= ORDER.index(have)
    )
    assert upward == []


def test_no_module_below_the_shell_imports_the_shell():
    wrong = [
        f"{s}:{line} imports {t}"
        for s, line, t in graph()
        if layer_of(s) not in {"shell", TOP} and layer_of(t) == "shell"
    ]
    assert wrong == [], "only shell/ wires the layers together:\n" + "\n".join(wrong)


def test_each_layer_imports_only_the_layers_below_it():
    wrong = violations(graph())
    assert wrong == [], "an import the layer table does not allow:\n" + "\n".join(wrong)


def test_no_modules_import_each_other_at_run_time():
    circles = cycles(runtime_graph())
    assert circles == [], "modules that import each other (a function-level import counts):\n" + "\n".join(
        " <-> ".join(c) for c in circles
    )


def test_the_cycle_check_sees_imports_inside_functions_and_skips_type_only_ones():
    source = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from cudaassert_ipy.run.guard import Guard\n"
        "def f():\n    from cudaassert_ipy.run import rerun\n"
    )
    assert [m for _, m in imports_in(runtime_source(source), "cudaassert_ipy.run")] == ["cudaassert_ipy.run.rerun"]
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e2"}, "e2": {"e"}}
    assert cycles(edges) == [["a", "b", "c"], ["e", "e2"]]
    assert "cudaassert_ipy.run.session" in runtime_graph()["cudaassert_ipy.run.rerun"]


def test_the_layer_rules_catch_a_view_importing_restart_an_entry_point_or_a_package_without_a_place():
    edges = [
        ("cudaassert_ipy.view.panel", 3, "cudaassert_ipy.restart.request"),
        ("cudaassert_ipy.restart.replay", 4, "cudaassert_ipy.view.replay_view"),
        ("cudaassert_ipy.capture.fd_tap", 5, "cudaassert_ipy"),
        ("cudaassert_ipy.plugins.x", 6, "cudaassert_ipy.view.report"),
        ("cudaassert_ipy.auto", 7, "cudaassert_ipy.shell.extension"),
        ("cudaassert_ipy.view.panel", 8, "cudaassert_ipy.__main__"),
    ]
    assert violations(edges) == [
        "cudaassert_ipy.view.panel:3 imports cudaassert_ipy.restart.request (view may not import restart)",
        "cudaassert_ipy.capture.fd_tap:5 imports cudaassert_ipy (capture may not import <top>)",
        "cudaassert_ipy.plugins.x: package 'plugins' has no place in MAY_IMPORT",
        "cudaassert_ipy.view.panel:8 imports cudaassert_ipy.__main__ (view may not import <top>)",
    ]


def test_capture_diagnose_the_text_report_run_and_logs_import_neither_ipython_nor_ipywidgets():
    files = []
    for place in BARE:
        path = PACKAGE / place
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    names = [module_name(p) for p in files]
    assert "cudaassert_ipy.diagnose.causes.rules" in names and "cudaassert_ipy.view.report" in names
    loaded = fresh_python(
        f"import importlib, json, sys\nfor name in {names!r}:\n    importlib.import_module(name)\n"
        f"print(json.dumps({{m: m in sys.modules for m in {WIDGET_WORLD!r}}}))"
    )
    assert loaded == {m: False for m in WIDGET_WORLD}


def test_importing_the_package_imports_neither_torch_nor_ipywidgets_nor_ipython():
    names = ["torch", *WIDGET_WORLD]
    loaded = fresh_python(
        f"import json, sys\nimport cudaassert_ipy\nprint(json.dumps({{m: m in sys.modules for m in {names!r}}}))"
    )
    assert loaded == {m: False for m in names}
