"""The cause catalogue: every known kernel assertion, what it means, and how to fix it.

Data comes from ``device_asserts.json`` (the project's catalogue: every assertion site the current PyTorch
release compiles in, the texts older releases and common third-party kernels print, how each was found;
see docs/causes.md) plus the plain words in :mod:`.texts`. Matching is by the assertion's condition text
(whitespace-normalised, in an era- and port-independent form), looked up in an index built once; the
kernel file's name and the function tell apart the kernels that share a condition.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from cudaassert_ipy.diagnose.causes.texts import (
    EXTRA_TEXTS,
    FAMILY_TITLES,
    GENERIC,
    NOT_IN_CATALOGUE,
    NOT_IN_CATALOGUE_BARE,
    TEXTS,
)

__all__ = [
    "GENERIC_ID",
    "Cause",
    "all_causes",
    "canonical_condition",
    "catalogue_table",
    "get_cause",
    "match_assert",
    "match_file",
    "normalise_condition",
    "summary_table",
    "unknown_site_sentence",
]

GENERIC_ID = "unknown_kernel_assert"
_SPACES = re.compile(r"\s+")
_SOURCE_SUFFIXES = (".cu", ".cuh", ".h", ".hpp", ".hip", ".cpp", ".cc", ".py")
# A condition this short with no message string in it (``false``, ``index >= 0``, ``b < B``) says nothing on
# its own: any kernel, a user's own included, may print it. It names a catalogued cause only from its own file.
_GENERIC_LENGTH = 16
# Ports whose kernels keep CUDA's condition texts in files named otherwise (Intel XPU's SYCL kernels).
_PORT_PARTS = ("/xpu/", "/sycl/")
_NO_LOCATION = ("", "unknown")


def normalise_condition(text: str) -> str:
    """Collapse whitespace runs: real lines carry long space runs inside conditions."""
    return _SPACES.sub(" ", text).strip()


# The same check spelled by each era and port: THC's ``THCNumerics<T>::ge(val, zero)`` is ATen's ``val >= zero``;
# ``THCNumerics<scalar_t>::isnan(val)`` / ``at::_isnan(val)`` / ``isnan(val)`` are one test; Intel XPU's SYCL ports
# keep CUDA's texts with a trailing ``_`` on member names (``n_classes_``, ``sizes_[i]``). The template
# parameter's name differs per file (T, AccT, scalar_t, accscalar_t); it never changes the meaning.
_THC_COMPARE = re.compile(r"THCNumerics<\w+>::(ge|gt|le|lt)\(\s*([^,()]+?)\s*,\s*([^,()]+?)\s*\)")
_INFIX = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
_NAN_INF = re.compile(r"(?:THCNumerics<\w+>::|at::|\b)_?(isnan|isinf)\(")
_MEMBER_UNDERSCORE = re.compile(r"(?<=[A-Za-z0-9])_(?!\w)")  # the last ``_`` of ``n_classes_``, ``sizes_[i]``


@lru_cache(maxsize=1024)
def canonical_condition(text: str) -> str:
    """The era- and port-independent form of a condition, for matching only (what users read keeps its spelling)."""
    text = normalise_condition(text)
    if "THCNumerics" in text:
        text = _THC_COMPARE.sub(lambda m: f"({m.group(2)} {_INFIX[m.group(1)]} {m.group(3)})", text)
    if "isnan" in text or "isinf" in text:
        text = _NAN_INF.sub(r"_\1(", text)
    text = _MEMBER_UNDERSCORE.sub("", text)
    if text.startswith("(") and text.endswith(")") and text.count("(") == 1:
        text = text[1:-1]  # one comparison alone: its parentheses add nothing
    return text


def _stem(path: str) -> str:
    """``Loss`` for ``.../cuda/Loss.cu``, ``.../hip/Loss.hip`` and ``Loss.cpp``: what every build and port shares."""
    base = path.replace("\\", "/").rsplit("/", 1)[-1]
    return base.rsplit(".", 1)[0] if "." in base else base


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
    family: str = "other_ops"
    reach: str = "user"  # user, compile, moe, distributed, third_party, internal
    releases: str = ""  # which releases print this text ("2.14.1 (Loss.cu:200, :244); also ...")
    file_regex: str | None = None  # for a catch-all pattern: the kernel files it may be read from

    @cached_property
    def file_names(self) -> frozenset[str]:
        """Base names of the kernel files (``Loss.cu``), the part every build prints the same."""
        names = set()
        for path in (self.kernel_file, *self.kernel_files):
            first = path.split(" ")[0].replace("\\", "/")
            if first.endswith(_SOURCE_SUFFIXES):
                names.add(first.rsplit("/", 1)[-1])
        return frozenset(names)

    @cached_property
    def file_stems(self) -> frozenset[str]:
        return frozenset(_stem(n) for n in self.file_names)

    @property
    def internal(self) -> bool:
        """A check that never fails on valid input: its cause says so and invents no data cause."""
        return self.reach == "internal"

    def matches_condition(self, condition: str) -> bool:
        cond = normalise_condition(condition)
        if cond in self.conditions or canonical_condition(cond) in _canonical(self.conditions):
            return True
        return bool(self.condition_regex and re.fullmatch(self.condition_regex, cond))


@lru_cache(maxsize=512)
def _canonical(conditions: tuple[str, ...]) -> frozenset[str]:
    return frozenset(canonical_condition(c) for c in conditions)


GENERIC_CAUSE = Cause(GENERIC_ID, *GENERIC)


def _from_entry(entry: Mapping[str, Any]) -> Cause:
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
        family=entry.get("family", "other_ops"),
        reach=entry.get("reach", "user"),
        releases=entry.get("releases", ""),
        file_regex=entry.get("file_regex"),
    )


@dataclass(frozen=True)
class _Index:
    """The catalogue, ready for matching: exact conditions by canonical form, then the patterns in order."""

    causes: dict[str, Cause]
    exact: dict[str, tuple[Cause, ...]]
    patterns: tuple[tuple[re.Pattern[str], re.Pattern[str] | None, Cause], ...]


@lru_cache(maxsize=1)
def _index() -> _Index:
    raw = json.loads((Path(__file__).parent / "device_asserts.json").read_text(encoding="utf-8"))
    causes = {entry["id"]: _from_entry(entry) for entry in raw}
    exact: dict[str, list[Cause]] = {}
    patterns = []
    for cause in causes.values():
        for cond in cause.conditions:
            bucket = exact.setdefault(canonical_condition(cond), [])
            if cause not in bucket:
                bucket.append(cause)
        if cause.condition_regex:
            file_re = re.compile(cause.file_regex) if cause.file_regex else None
            patterns.append((re.compile(cause.condition_regex), file_re, cause))
    patterns.sort(key=lambda p: p[1] is not None)  # catch-alls bound to a kind of file come last
    return _Index(causes, {k: tuple(v) for k, v in exact.items()}, tuple(patterns))


def all_causes() -> tuple[Cause, ...]:
    """Every catalogued cause, in catalogue order."""
    return tuple(_index().causes.values())


def get_cause(cause_id: str) -> Cause:
    """The cause with this id; the generic cause for an unknown id (never raises)."""
    cause = _index().causes.get(cause_id)
    if cause is None and cause_id in EXTRA_TEXTS:
        return Cause(cause_id, *EXTRA_TEXTS[cause_id])
    return cause or GENERIC_CAUSE


def match_assert(condition: str, file: str = "", function: str | None = None) -> Cause | None:
    """The catalogued cause for one kernel assertion (condition, file, function), or None.

    Several kernels share a condition (``t >= 0 && t < n_classes`` is in Loss.cu, NLLLoss2d.cu and two THCUNN
    files; ``false`` in five), so candidates are ranked by file, then by function. A generic condition
    (``false``, ``index >= 0``) read from a file the catalogue does not list is not guessed at.
    """
    index = _index()
    cond = normalise_condition(condition)
    candidates = index.exact.get(canonical_condition(cond))
    if candidates:
        return _pick(candidates, cond, file, function)
    path = file.replace("\\", "/")
    for pattern, file_pattern, cause in index.patterns:
        if pattern.fullmatch(cond) and (file_pattern is None or file_pattern.search(path)):
            return cause
    return None


_FILE_IN_TEXT = re.compile(r"(?:\bat |file=)(\S+?\.(?:cu|cuh|cpp|hip|h))(?::\d+| line=)")


def match_file(text: str) -> Cause | None:
    """The cause an error text points at by naming a kernel's file (``cuda runtime error (59) : device-side assert
    triggered at .../ClassNLLCriterion.cu:110``, ``THCudaCheck FAIL file=...``): when every catalogued cause
    compiled from that file belongs to one family, the first of them; None when the file is a generic place the
    failure only surfaced at (a copy, a comparison) or holds causes of several families."""
    m = _FILE_IN_TEXT.search(text)
    if m is None:
        return None
    stem = _stem(m.group(1))
    found = [c for c in _index().causes.values() if stem in c.file_stems and not c.internal]
    if not found or len({c.family for c in found}) != 1:
        return None
    return found[0]


def _pick(candidates: Sequence[Cause], condition: str, file: str, function: str | None) -> Cause | None:
    stem = _stem(file)
    pool = [c for c in candidates if stem in c.file_stems]
    if not pool:
        path = file.replace("\\", "/").lower()
        port = any(part in path for part in _PORT_PARTS)
        if _generic(condition) and file not in _NO_LOCATION and not port:
            return None
        pool = list(candidates)
    if len(pool) == 1:
        return pool[0]
    return max(pool, key=lambda c: _function_matches(c, function))  # ties: catalogue order


def _generic(condition: str) -> bool:
    return '"' not in condition and len(condition) < _GENERIC_LENGTH


def _function_matches(cause: Cause, function: str | None) -> bool:
    if not function:
        return False
    return any(function == f or function in f or f in function for f in cause.kernel_functions)


def unknown_site_sentence(condition: str, where: str, function: str | None = None) -> str:
    """What a report says of an assertion the catalogue does not know: the kernel's own words, nothing guessed."""
    func = f" Kernel function: `{function}`." if function and function != "unknown" else ""
    if not condition:
        return NOT_IN_CATALOGUE_BARE.format(where=where, func=func)
    return NOT_IN_CATALOGUE.format(condition=condition, where=where, func=func)


# ----------------------------------------------------------------------------------------------- documentation
def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "")


def _where(c: Cause) -> str:
    if c.file_names:
        return ", ".join(sorted(c.file_names))
    return "generated by torch.compile" if c.reach == "compile" else "no source file printed"


def summary_table() -> str:
    """The README's known-causes table: one row per family, generated from the catalogue (a test keeps it current)."""
    rows = ["| family | texts | what they mean |", "|---|---|---|"]
    for family, heading in FAMILY_TITLES.items():
        members = [c for c in all_causes() if c.family == family]
        if not members:
            continue
        titles: list[str] = []
        for c in members:
            if c.title not in titles:
                titles.append(c.title)
        shown = "; ".join(titles[:4]) + ("; ..." if len(titles) > 4 else "")
        rows.append(f"| {heading} | {len(members)} | {_cell(shown)} |")
    return "\n".join(rows)


def catalogue_table() -> str:
    """docs/causes.md's full table: every catalogued text, by family (a test keeps it current)."""
    out: list[str] = []
    for family, heading in FAMILY_TITLES.items():
        members = [c for c in all_causes() if c.family == family]
        if not members:
            continue
        out += [
            "",
            f"### {heading}",
            "",
            "| kernel assertion | where | what it means | printed by | fix |",
            "|---|---|---|---|---|",
        ]
        for c in members:
            cond = c.conditions[0] if c.conditions[0] else "(empty)"
            out.append(f"| `{_cell(cond)}` | {_where(c)} | {_cell(c.title)} | {_cell(c.releases)} | {_cell(c.fix)} |")
    return "\n".join(out[1:])
