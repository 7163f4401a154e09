"""Module-level mutable state is exactly what docs/architecture.md's "State that outlives a call" lists.

Why: the house keeps state on the ``Extension`` (or the runner's ``Guard``), each process-wide piece with one owner;
CONTRIBUTING.md sends a contributor to that list, so the list must be the code's. Read with ``ast``: a name a
module binds at its top level to an empty container (``{}``, ``[]``, ``set()``, ``deque()``, a weak container, a
``ContextVar``; not one typed read-only, as ``_EMPTY: Mapping[str, Any] = {}``), and a function cached with
``functools.cache`` / ``lru_cache``. An owner object (``BYPASS``, ...) is an instance of one of our classes, which
the AST cannot tell from a frozen value: the other direction holds those, every name the doc lists is bound where
the doc says.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "cudaassert_ipy"
CONTAINERS = {
    "set",
    "dict",
    "list",
    "deque",
    "defaultdict",
    "OrderedDict",
    "Counter",
    "WeakSet",
    "WeakKeyDictionary",
    "WeakValueDictionary",
    "ContextVar",
    "local",
}


#: an annotation mypy holds to reading only: an empty default typed so is a constant
READ_ONLY = ("Mapping", "Sequence", "AbstractSet", "Final")


def state_section() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    start = text.index("## State that outlives a call")
    return text[start : text.index("\n## ", start + 1)]


def _callee(node: ast.expr) -> str | None:
    func = node.func if isinstance(node, ast.Call) else None
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def top_level_state(source: str) -> list[tuple[str, str]]:
    """(name, kind) for each top-level empty container and each cached function of a module's source."""
    found = []
    for node in ast.parse(source).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            value = node.value
            empty = isinstance(value, (ast.Dict, ast.List, ast.Set)) and not (
                getattr(value, "keys", None) or getattr(value, "elts", None)
            )
            read_only = isinstance(node, ast.AnnAssign) and ast.unparse(node.annotation).startswith(READ_ONLY)
            if isinstance(target, ast.Name) and not read_only and (empty or _callee(value) in CONTAINERS):
                found.append((target.id, "container"))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
            "cache" in ast.unparse(d) for d in node.decorator_list
        ):
            found.append((node.name, "cache"))
    return found


def named_in(section: str, relative: Path, name: str) -> bool:
    """The doc names ``name`` of ``relative`` as `a/b.py` `NAME` (the table) or `a/b.NAME` (the caches)."""
    dotted = relative.with_suffix("").as_posix()
    if relative.name == "__init__.py":
        dotted = relative.parent.as_posix()
    return f"`{relative.as_posix()}` `{name}`" in section or f"`{dotted}.{name}`" in section


def test_every_top_level_container_and_cache_in_the_package_is_listed_in_architecture_md() -> None:
    section = state_section()
    unlisted = [
        f"{path.relative_to(PACKAGE).as_posix()}: {name} ({kind})"
        for path in sorted(PACKAGE.rglob("*.py"))
        for name, kind in top_level_state(path.read_text(encoding="utf-8"))
        if not named_in(section, path.relative_to(PACKAGE), name)
    ]
    assert unlisted == [], "list each in docs/architecture.md's 'State that outlives a call', or move it onto its owner"


def test_every_piece_the_doc_lists_is_bound_at_the_top_of_the_module_it_names() -> None:
    section = state_section()
    listed = re.findall(r"^\| `([\w/]+\.py)` `(\w+)`", section, re.M)
    for module, name in re.findall(r"`([a-z_]+(?:/[a-z_]+)*)\.(\w+)`", section):
        for relative in (f"{module}.py", f"{module}/__init__.py"):
            if name != "py" and (PACKAGE / relative).is_file():  # not `tests/test_x.py`, not outside the package
                listed.append((relative, name))
    assert len(listed) >= 5, "the doc's list is no longer read: its form changed"
    missing = []
    for relative, name in listed:
        tree = ast.parse((PACKAGE / relative).read_text(encoding="utf-8"))
        bound = {
            t.id
            for node in tree.body
            if isinstance(node, (ast.Assign, ast.AnnAssign))
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(t, ast.Name)
        }
        bound |= {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
        if name not in bound:
            missing.append(f"{relative}: {name}")
    assert missing == []


def test_an_unlisted_container_or_cache_is_found() -> None:
    source = (
        "import functools\nfrom collections import deque\n_SEEN: dict[str, int] = {}\nRECENT = deque(maxlen=3)\n"
        "TABLE = {'a': 1}\nNONE: Mapping[str, int] = {}\n\n@functools.lru_cache(maxsize=8)\ndef lookup(x): return x\n\n"
        "def local():\n    cache = {}\n    return cache\n"
    )
    assert top_level_state(source) == [("_SEEN", "container"), ("RECENT", "container"), ("lookup", "cache")]
    assert not named_in(state_section(), Path("checks/mode.py"), "_SEEN")
    assert named_in(state_section(), Path("checks/mode.py"), "BYPASS")
