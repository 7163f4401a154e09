"""The cause catalogue: every known kernel assertion, what it means, and how to fix it.

Data comes from ``device_asserts.json`` (the reference catalogue, verbatim) plus the plain words
in :mod:`.texts`. Matching is by the assertion's condition text (whitespace-normalised), with the
kernel file's name to tell apart conditions that several kernels share.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Iterable

from cudaassert_ipy.diagnose.causes.texts import EXTRA_TEXTS, GENERIC, TEXTS

__all__ = ["GENERIC_ID", "Cause", "all_causes", "get_cause", "match_assert"]

GENERIC_ID = "unknown_kernel_assert"
_SPACES = re.compile(r"\s+")


def normalise_condition(text: str) -> str:
    """Collapse whitespace runs: real lines carry long space runs inside conditions."""
    return _SPACES.sub(" ", text).strip()


# The same check spelled by each era: THC's ``THCNumerics<T>::ge(val, zero)`` is ATen's ``val >= zero``, and
# ``THCNumerics<scalar_t>::isnan(val)`` / ``at::_isnan(val)`` / ``isnan(val)`` are one test. The template
# parameter's name differs per file (T, AccT, scalar_t, accscalar_t); it never changes the meaning.
_THC_COMPARE = re.compile(r"THCNumerics<\w+>::(ge|gt|le|lt)\(\s*([^,()]+?)\s*,\s*([^,()]+?)\s*\)")
_INFIX = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
_NAN_INF = re.compile(r"(?:THCNumerics<\w+>::|at::|\b)_?(isnan|isinf)\(")


def canonical_condition(text: str) -> str:
    """The era-independent form of a condition, for matching only (what users read keeps its spelling)."""
    text = _THC_COMPARE.sub(lambda m: f"({m.group(2)} {_INFIX[m.group(1)]} {m.group(3)})", normalise_condition(text))
    text = _NAN_INF.sub(r"_\1(", text)
    if text.startswith("(") and text.endswith(")") and text.count("(") == 1:
        text = text[1:-1]  # one comparison alone: its parentheses add nothing
    return text


@dataclass(frozen=True)
class Cause:
    """One catalogued kernel assertion and what to tell the user about it."""

    id: str
    title: str
    explanation: str
    fix: str
    group: str | None = None
    kernel_file: str = ""
    kernel_files: tuple[str, ...] = ()
    kernel_functions: tuple[str, ...] = ()
    conditions: tuple[str, ...] = ()
    condition_regex: str | None = None
    python_apis: tuple[str, ...] = ()
    cpu_equivalent_error: str | None = None
    sample_stderr_line: str | None = None

    @property
    def file_names(self) -> frozenset[str]:
        """Base names of the kernel files (``Loss.cu``), the part every build prints the same."""
        names = set()
        for path in (self.kernel_file, *self.kernel_files):
            first = path.split(" ")[0].replace("\\", "/")
            if first.endswith((".cu", ".cuh", ".h", ".py")):
                names.add(first.rsplit("/", 1)[-1])
        return frozenset(names)

    def matches_condition(self, condition: str) -> bool:
        cond = normalise_condition(condition)
        if cond in self.conditions or canonical_condition(cond) in _canonical(self.conditions):
            return True
        return bool(self.condition_regex and re.fullmatch(self.condition_regex, cond))


@cache
def _canonical(conditions: tuple[str, ...]) -> frozenset[str]:
    return frozenset(canonical_condition(c) for c in conditions)


GENERIC_CAUSE = Cause(GENERIC_ID, *GENERIC)


def _from_entry(entry: dict) -> Cause:
    text = TEXTS[entry["id"]]
    conditions = (entry["condition"], *entry.get("condition_variants", ()))
    return Cause(
        id=entry["id"],
        title=text.title,
        explanation=text.explanation,
        fix=text.fix,
        group=entry.get("group"),
        kernel_file=entry["kernel_file"],
        kernel_files=tuple(entry.get("kernel_file_variants", ())),
        kernel_functions=tuple(entry.get("kernel_functions", ())),
        conditions=tuple(normalise_condition(c) for c in conditions),
        condition_regex=entry.get("condition_regex"),
        python_apis=tuple(entry.get("python_apis", ())),
        cpu_equivalent_error=entry.get("cpu_equivalent_error"),
        sample_stderr_line=entry.get("sample_stderr_line"),
    )


@lru_cache(maxsize=1)
def _catalogue() -> dict[str, Cause]:
    raw = json.loads((Path(__file__).parent / "device_asserts.json").read_text(encoding="utf-8"))
    return {entry["id"]: _from_entry(entry) for entry in raw}


def all_causes() -> tuple[Cause, ...]:
    """Every catalogued cause, in catalogue order."""
    return tuple(_catalogue().values())


def get_cause(cause_id: str) -> Cause:
    """The cause with this id; the generic cause for an unknown id (never raises)."""
    cause = _catalogue().get(cause_id)
    if cause is None and cause_id in EXTRA_TEXTS:
        return Cause(cause_id, *EXTRA_TEXTS[cause_id])
    return cause or GENERIC_CAUSE


def match_assert(condition: str, file: str = "", function: str | None = None) -> Cause | None:
    """The catalogued cause for one kernel assertion (condition, file, function), or None.

    Several kernels share a condition (``t >= 0 && t < n_classes`` is in Loss.cu, NLLLoss2d.cu
    and two THCUNN files), so candidates are ranked by file name, then by function name.
    """
    candidates = [c for c in all_causes() if c.matches_condition(condition)]
    if not candidates:
        return None
    base = file.replace("\\", "/").rsplit("/", 1)[-1]
    return max(candidates, key=lambda c: (base in c.file_names, _function_matches(c, function)))


def _function_matches(cause: Cause, function: str | None) -> bool:
    if not function:
        return False
    return any(function == f or function in f or f in function for f in cause.kernel_functions)


def ids(causes: Iterable[Cause]) -> list[str]:
    return [c.id for c in causes]


def markdown_table() -> str:
    """The README's known-causes table, generated from the catalogue (a test keeps the README current)."""
    rows = ["| kernel assertion | where | what it means | fix |", "|---|---|---|---|"]
    seen: set[tuple[str, str]] = set()
    for c in all_causes():
        key = (c.conditions[0], c.title)
        if key in seen:
            continue
        seen.add(key)
        where = ", ".join(sorted(c.file_names)) or "generated"
        cond = c.conditions[0].replace("|", "\\|").replace("`", "")
        rows.append(f"| `{cond}` | {where} | {c.title} | {c.fix.replace('|', '/')} |")
    return "\n".join(rows)
