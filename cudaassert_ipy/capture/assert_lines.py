"""Parse and fold the lines a CUDA kernel prints when a device-side assertion fails.

One failing kernel prints one line per failing thread, often thousands of them, in several
formats (glibc ``__assert_fail``, Windows ``_wassert``, the ``[CUDA_KERNEL_ASSERT]`` printf form,
old THC template signatures, Triton's ``unknown``, ROCm/HIP; see reference/error_texts.md §1.2
and §7). The user needs one fact per assert site, so we parse each line and fold them by site.
Lines that several processes spliced into each other keep their conditions as orphan fragments,
never as sites. Pure string work: no IPython, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Tuple

from cudaassert_ipy.capture.assert_records import NO_DIM, Record, normalise_file, orphan_fragments, records
from cudaassert_ipy.wording import plural

__all__ = [
    "AssertLine", "AssertSite", "Orphan", "ScanResult", "fold", "normalise_file", "parse_line", "parse_lines",
    "scan", "scan_all", "short_function",
]

Dim3 = Tuple[int, int, int]
_FAILED = "` failed"
_NO_LOCATION = ("unknown", "")


@dataclass(frozen=True)
class AssertLine:
    """One parsed assertion record, as one failing GPU thread printed it.

    ``raw`` is the record itself, without launcher prefixes or text glued in front of it.
    ``block`` and ``thread`` are ``(-1, -1, -1)`` where the format has none (ROCm/HIP).
    """

    path: str
    file: str
    line: int
    function: Optional[str]
    block: Dim3
    thread: Dim3
    condition: str
    message: Optional[str]
    printf: bool
    raw: str


@dataclass(frozen=True)
class AssertSite:
    """Every line from one assert site (same file, line and condition), folded into one fact.

    ``file`` is ``""`` for a condition recovered from spliced lines, whose location was lost.
    """

    file: str
    line: int
    function: Optional[str]
    condition: str
    message: Optional[str]
    count: int
    threads: int
    blocks: int
    first: AssertLine

    @property
    def where(self) -> str:
        """``Loss.cu:250``; Triton kernels built without debug info, and spliced lines, say so."""
        if not self.file:
            return "(location lost in interleaved output)"
        if self.file in _NO_LOCATION or self.file.startswith("<frozen "):
            return "Triton kernel (no source location)"
        return f"{self.file.rsplit('/', 1)[-1]}:{self.line}"

    def summary(self) -> str:
        """One line a person can read, e.g. ``Loss.cu:250 f: `c` failed in 64 threads of 2 blocks``."""
        func = short_function(self.function)
        if func == "unknown":
            func = None
        head = f"{self.where} {func}:" if func else f"{self.where}:"
        if self.first.thread == NO_DIM:  # HIP and recovered conditions name no thread
            times = f"{plural(self.count, 'time')}"
        else:
            times = f"in {plural(self.threads, 'thread')} of {plural(self.blocks, 'block')}"
        text = f"{head} `{self.condition}` failed {times}"
        if self.message:
            text += f": {self.message}"
        return text


@dataclass(frozen=True)
class Orphan:
    """Condition text from a line that held no whole record (spliced by concurrent writers, or cut)."""

    fragment: str
    raw: str
    group: Optional[str] = None


@dataclass(frozen=True)
class ScanResult:
    """Everything a text holds: sites per group (rank), orphan fragments, and lines that could not be read."""

    groups: Dict[Optional[str], List[AssertSite]]
    orphans: List[Orphan]
    unreadable: List[Tuple[Optional[str], str]]
    records: int

    @property
    def sites(self) -> List[AssertSite]:
        return [s for sites in self.groups.values() for s in sites]


def short_function(function: Optional[str]) -> Optional[str]:
    """The kernel's name without THC return types, parameter lists and ``[with T = ...]`` tails."""
    if not function:
        return function
    name = function.split(" [with ", 1)[0].strip()
    if name.startswith("lambda"):
        return "lambda"
    depth, start = 0, 0
    for i, ch in enumerate(name):
        depth += (ch == "<") - (ch == ">")
        if depth:
            continue
        if ch == "(" and not name[:i].endswith("operator"):  # parameters start here
            return name[start:i] or function
        if ch == " ":  # a return type ends here
            start = i + 1
    return name[start:] or function


def parse_line(text: str) -> Optional[AssertLine]:
    """The first assertion record in ``text`` (one physical line), or None."""
    if "ssertion" not in text:
        return None
    found, _ = records(text)
    return AssertLine(*found[0]) if found else None


def _is_candidate(line: str) -> bool:
    return "ssertion" in line or _FAILED in line or ": block: [" in line


def _walk(text: str) -> Iterator[Tuple[str, List[Record], List[str]]]:
    """``(first physical line, whole records, orphan fragments)`` for every line that holds any of them;
    a line with a record marker and neither comes back with both empty (unreadable)."""
    lines = text.splitlines()
    used = -1  # index of the last physical line that produced records
    for i, line in enumerate(lines):
        if i <= used or not _is_candidate(line):
            continue
        found, dropped = records(line) if "ssertion" in line else ([], 0)
        if found and not dropped:
            used = i
            yield line, found, []
            continue
        if not found:
            joined, lo, hi = _rejoin(lines, i, used)
            if joined:
                used = hi
                yield lines[lo], joined, []
                continue
        fragments = orphan_fragments(line)
        for rec in found:
            if rec[6] in fragments:
                fragments.remove(rec[6])
        if found:
            used = i
        if found or fragments or "ssertion `" in line or ": block: [" in line:
            yield line, found, fragments


def _rejoin(lines: List[str], i: int, used: int) -> Tuple[List[Record], int, int]:
    """Try ``lines[i]`` glued to up to two previous lines, or to the next ones (console wrap)."""
    for lo, hi in ((i - 1, i), (i - 2, i), (i, i + 1), (i, i + 2)):
        if lo <= used or lo < 0 or hi >= len(lines):
            continue
        joined = "".join(lines[lo:hi + 1])
        if len(joined) > 4096:
            continue
        found, _ = records(joined)
        if found:
            return found, lo, max(used, hi)
    return [], i, used


def parse_lines(text: str) -> List[AssertLine]:
    """Every whole assertion record in a blob of stderr/stdout, in order; junk lines are skipped.

    Lines that fail alone but hold part of a record are retried joined with their neighbours,
    which recovers records a console wrapped at its width (``thr`` / ``ead: [215,0,0]``).
    """
    return [AssertLine(*r) for _, found, _ in _walk(text) for r in found]


def _fold(
    records_: Iterable[Tuple[str, int, str, Optional[str], Optional[str], Dim3, Dim3, object]],
) -> List[AssertSite]:
    acc: dict = {}
    for file, lineno, condition, function, message, block, thread, first in records_:
        key = (file, lineno, condition)
        entry = acc.get(key)
        if entry is None:
            acc[key] = [first, function, message, 1, {(block, thread)}, {block}]
            continue
        entry[3] += 1
        entry[4].add((block, thread))
        entry[5].add(block)
        if entry[1] is None and function is not None:
            entry[1] = function
        if entry[2] is None and message is not None:
            entry[2] = message
    sites = []
    for (file, lineno, condition), (first, function, message, count, threads, blocks) in acc.items():
        first = first if isinstance(first, AssertLine) else AssertLine(*first)
        sites.append(AssertSite(file, lineno, function, condition, message, count, len(threads), len(blocks), first))
    return sites


def fold(lines: Iterable[AssertLine]) -> List[AssertSite]:
    """One ``AssertSite`` per (file, line, condition), in first-seen order."""
    return _fold((a.file, a.line, a.condition, a.function, a.message, a.block, a.thread, a) for a in lines)


def _fold_records(recs: Iterable[Record]) -> List[AssertSite]:
    return _fold((r[1], r[2], r[6], r[3], r[7], r[4], r[5], r) for r in recs)


def scan(text: str) -> List[AssertSite]:
    """``fold(parse_lines(text))``, without building an ``AssertLine`` for every thread."""
    return _fold_records(r for _, found, _ in _walk(text) for r in found)


def scan_all(text: str, group: Optional[Callable[[str], Optional[str]]] = None) -> ScanResult:
    """Sites folded per group (``group(physical line)``, e.g. the rank a launcher prefix names), plus
    orphan fragments and the lines that held a record marker but nothing whole."""
    per: Dict[Optional[str], List[Record]] = {}
    orphans: List[Orphan] = []
    unreadable: List[Tuple[Optional[str], str]] = []
    count = 0
    for line, found, fragments in _walk(text):
        key = group(line) if group is not None else None
        if found:
            per.setdefault(key, []).extend(found)
            count += len(found)
        orphans.extend(Orphan(f, line, key) for f in fragments)
        if not found and not fragments:
            unreadable.append((key, line))
    return ScanResult({k: _fold_records(v) for k, v in per.items()}, orphans, unreadable, count)
