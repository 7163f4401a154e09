"""Parse and fold the lines a CUDA kernel prints when a device-side assertion fails.

One failing kernel prints one line per failing thread, often thousands of them, in several
formats (glibc ``__assert_fail``, Windows ``_wassert``, the ``[CUDA_KERNEL_ASSERT]`` printf form,
old THC template signatures, Triton's ``unknown``, ROCm/HIP, printf-then-trap kernels; every form
with an example is in docs/causes.md). The user needs one fact per assert site, so we parse each line
and fold them by site.
Lines that several processes spliced into each other keep their conditions as orphan fragments,
never as sites. Pure string work: no IPython, no torch.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from cudaassert_ipy.base.wording import plural
from cudaassert_ipy.capture.assert_records import (
    _MARK,
    NO_DIM,
    TRAP_FILE,
    TRAP_MARK,
    Record,
    may_hold,
    normalise_file,
    orphan_fragments,
    records,
)

__all__ = [
    "AssertLine",
    "AssertSite",
    "Orphan",
    "ScanResult",
    "fold",
    "normalise_file",
    "parse_line",
    "parse_lines",
    "scan",
    "scan_all",
    "short_function",
]

Dim3 = tuple[int, int, int]
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
    function: str | None
    block: Dim3
    thread: Dim3
    condition: str
    message: str | None
    printf: bool
    raw: str


@dataclass(frozen=True)
class AssertSite:
    """Every line from one assert site (same file, line and condition), folded into one fact.

    ``file`` is ``""`` for a condition recovered from spliced lines, whose location was lost.
    """

    file: str
    line: int
    function: str | None
    condition: str
    message: str | None
    count: int
    threads: int
    blocks: int
    first: AssertLine

    @property
    def where(self) -> str:
        """``Loss.cu:250``; Triton kernels built without debug info, and spliced lines, say so."""
        if not self.file:
            return "(location lost in interleaved output)"
        if self.file == TRAP_FILE:
            return "a kernel's message before a trap (no source location)"
        if self.file in _NO_LOCATION or self.file.startswith("<frozen "):
            return "Triton kernel (no source location)"
        base = self.file.rsplit("/", 1)[-1]
        return f"{base}:{self.line}" if self.line else f"{base} (line number lost)"

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
    group: str | None = None


@dataclass(frozen=True)
class ScanResult:
    """Everything a text holds: sites per group (rank), orphan fragments, and lines that could not be read."""

    groups: dict[str | None, list[AssertSite]]
    orphans: list[Orphan]
    unreadable: list[tuple[str | None, str]]
    records: int
    sites: list[AssertSite]  # every group's sites, in first-seen order


def short_function(function: str | None) -> str | None:
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


def _has_record_word(line: str) -> bool:
    return "ssertion" in line or TRAP_MARK in line


def parse_line(text: str) -> AssertLine | None:
    """The first assertion record in ``text`` (one physical line), or None."""
    if not _has_record_word(text):
        return None
    found, _ = records(text)
    return AssertLine(*found[0]) if found else None


def _is_candidate(line: str) -> bool:
    return _has_record_word(line) or _FAILED in line or ": block: [" in line


def _walk(
    lines: list[str], indices: Iterable[int], taken: set[int] | None = None
) -> Iterator[tuple[int, list[Record], list[str]]]:
    """``(index of the first physical line, whole records, orphan fragments)`` for every candidate line
    (``indices``, ascending) that holds any of them; a line with a record marker and neither comes back
    with both empty (unreadable). Lines in ``taken`` were read already and are not rejoined."""
    used = -1  # index of the last physical line that produced records
    whole: dict[int, bool] = {}
    for i in indices:
        line = lines[i]
        if i <= used:
            continue
        found, dropped = records(line) if _has_record_word(line) else ([], 0)
        if found and not dropped:
            used = i
            yield i, found, []
            continue
        if not found:
            joined, lo, hi = _rejoin(lines, i, used, taken or set(), whole)
            if joined:
                used = hi
                yield lo, joined, []
                continue
        fragments = orphan_fragments(line)
        for rec in found:
            if rec[6] in fragments:
                fragments.remove(rec[6])
        if found:
            used = i
        if found or fragments or "ssertion `" in line or ": block: [" in line:
            yield i, found, fragments


def _joins(i: int) -> tuple[tuple[int, int], ...]:
    return (
        (i - 1, i),
        (i - 2, i),
        (i - 3, i),
        (i - 4, i),
        (i, i + 1),
        (i, i + 2),
        (i - 1, i + 1),
        (i - 2, i + 1),
        (i - 1, i + 2),
        (i, i + 3),
        (i - 1, i + 3),
        (i, i + 4),
        (i - 1, i + 4),
    )  # long conditions wrap further


def _rejoin(
    lines: list[str], i: int, used: int, taken: set[int], whole: dict[int, bool]
) -> tuple[list[Record], int, int]:
    """Try ``lines[i]`` glued to up to four previous lines, to up to four next ones, or to both (console wrap).

    ``whole`` remembers which lines hold a record on their own (a line is asked by each neighbour's rejoin).
    A record holds a marker (:func:`may_hold`), so a line or a join without one is not parsed; many lines that
    get here (``... to enable device-side assertions.``) have no marker within four lines.
    """
    if not may_hold("".join(lines[max(0, i - 4) : i + 5])):  # every join of ``_joins(i)`` is a part of this text
        return [], i, used
    for lo, hi in _joins(i):
        if lo <= used or lo < 0 or hi >= len(lines) or not taken.isdisjoint(range(lo, hi + 1)):
            continue
        if hi > i and any(_whole(lines, n, whole) for n in range(i + 1, hi + 1)):
            continue  # a later line is whole on its own: it is no continuation of this one
        joined = "".join(lines[lo : hi + 1])
        if len(joined) > 4096 or not may_hold(joined):
            continue
        found, _ = records(joined)
        if found:
            return found, lo, max(used, hi)
    return [], i, used


def _whole(lines: list[str], n: int, seen: dict[int, bool]) -> bool:
    """Whether ``lines[n]`` holds a whole record on its own."""
    known = seen.get(n)
    if known is None:
        known = seen[n] = may_hold(lines[n]) and bool(records(lines[n])[0])
    return known


def parse_lines(text: str) -> list[AssertLine]:
    """Every whole assertion record in a blob of stderr/stdout, in order; junk lines are skipped.

    Lines that fail alone but hold part of a record are retried joined with their neighbours,
    which recovers records a console wrapped at its width (``thr`` / ``ead: [215,0,0]``).
    """
    lines = text.splitlines()
    candidates = [i for i, line in enumerate(lines) if _is_candidate(line)]
    return [AssertLine(*r) for _, found, _ in _walk(lines, candidates) for r in found]


def _dims_key(block: Dim3, thread: Dim3) -> str:
    """The dims as the bulk path keeps them: the text between ``block: [`` and the thread's ``]``."""
    return f"{block[0]},{block[1]},{block[2]}{_THREAD}{thread[0]},{thread[1]},{thread[2]}"


class _Entry:
    """One site being folded: its first record, function and message (first seen), line count, dims, order."""

    __slots__ = ("count", "dims", "first", "function", "message", "order")

    def __init__(self, first: Record, order: int) -> None:
        self.first = first
        self.function = first[3]
        self.message = first[7]
        self.count = 0
        self.dims: set[str] = set()
        self.order = order


class _Folder:
    """Accumulates records into sites keyed by (file, line, condition), remembering first-seen order."""

    def __init__(self) -> None:
        self.acc: dict[tuple[str, int, str], _Entry] = {}

    def add(self, rec: Record, order: int, dims: Iterable[str], count: int) -> None:
        key = (rec[1], rec[2], rec[6])
        entry = self.acc.get(key)
        if entry is None:
            entry = self.acc[key] = _Entry(rec, order)
        entry.count += count
        entry.dims.update(dims)
        if entry.function is None and rec[3] is not None:
            entry.function = rec[3]
        if entry.message is None and rec[7] is not None:
            entry.message = rec[7]

    def sites(self) -> list[tuple[int, AssertSite]]:
        out = []
        for (file, lineno, condition), e in self.acc.items():
            blocks = {d.partition("]")[0] for d in e.dims}
            out.append(
                (
                    e.order,
                    AssertSite(
                        file,
                        lineno,
                        e.function,
                        condition,
                        e.message,
                        e.count,
                        len(e.dims),
                        len(blocks),
                        AssertLine(*e.first),
                    ),
                )
            )
        return out


def fold(lines: Iterable[AssertLine]) -> list[AssertSite]:
    """One ``AssertSite`` per (file, line, condition), in first-seen order."""
    folder = _Folder()
    for n, a in enumerate(lines):
        rec = (a.path, a.file, a.line, a.function, a.block, a.thread, a.condition, a.message, a.printf, a.raw)
        folder.add(rec, n, (_dims_key(a.block, a.thread),), 1)
    return [site for _, site in sorted(folder.sites(), key=lambda p: p[0])]


_THREAD = "], thread: ["
_DIMS = re.compile(r"\d+, ?\d+, ?\d+\], thread: \[\d+, ?\d+, ?\d+", re.ASCII)


def _bulk(lines: list[str]) -> tuple[dict[tuple[str, str], list[int]], list[int]]:
    """Split the lines: single-record lines grouped by the text around their dims (a template: only the
    dims differ between a kernel's threads), and the indices of every other candidate line."""
    templates: dict[tuple[str, str], list[int]] = {}
    rest: list[int] = []
    mark, thread, failed = _MARK, _THREAD, _FAILED
    for n, line in enumerate(lines):
        i = line.find(mark)
        if i < 0:
            if "ssertion" in line or failed in line or TRAP_MARK in line:
                rest.append(n)
            continue
        k = line.find(thread, i)
        j = line.find("]", k + 12) if k > 0 else -1
        if j < 0:
            rest.append(n)
            continue
        key = (line[:i], line[j:])
        found = templates.get(key)
        if found is None:
            templates[key] = [n]
        else:
            found.append(n)
    return templates, rest


def _template_record(key: tuple[str, str], lines: list[str], indices: list[int]) -> tuple[Record, list[str]] | None:
    """The template's record and every line's dims, or None when the template is not one whole record."""
    head, tail = key
    if _MARK in tail or "\x1b" in head or "\x1b" in tail or "Device-side assertion" in head + tail:
        return None
    start, cut = len(head) + len(_MARK), len(tail)
    dims = [lines[n][start : len(lines[n]) - cut] for n in indices]
    if not all(_DIMS.fullmatch(d) for d in set(dims)):
        return None
    found, dropped = records(lines[indices[0]])
    if len(found) != 1 or dropped:
        return None
    return found[0], [d.replace(" ", "") if " " in d else d for d in dims]


def scan(text: str) -> list[AssertSite]:
    """``fold(parse_lines(text))``, without building an ``AssertLine`` for every thread."""
    return scan_all(text).sites


def scan_all(text: str, group: Callable[[str], str | None] | None = None) -> ScanResult:
    """Sites folded per group (``group(physical line)``, e.g. the rank a launcher prefix names), plus
    orphan fragments and the lines that held a record marker but nothing whole.

    Most lines are one thread's copy of a record that differs from the others only in its dims:
    those are grouped by the text around the dims first, and each group is parsed once.
    """
    lines = text.splitlines()
    templates, rest = _bulk(lines)
    folders: dict[str | None, _Folder] = {}
    count = 0
    taken: set[int] = set()
    for key, indices in templates.items():
        parsed = _template_record(key, lines, indices)
        if parsed is None:
            rest.extend(indices)
            continue
        taken.update(indices)
        rec, dims = parsed
        label = group(lines[indices[0]]) if group is not None else None
        folders.setdefault(label, _Folder()).add(rec, indices[0], dims, len(dims))
        count += len(dims)
    orphans: list[Orphan] = []
    unreadable: list[tuple[str | None, str]] = []
    for n, found, fragments in _walk(lines, sorted(rest), taken):
        label = group(lines[n]) if group is not None else None
        if found:
            folder = folders.setdefault(label, _Folder())
            for rec in found:
                folder.add(rec, n, (_dims_key(rec[4], rec[5]),), 1)
            count += len(found)
        orphans.extend(Orphan(f, lines[n], label) for f in fragments)
        if not found and not fragments:
            unreadable.append((label, lines[n]))
    groups = {}
    everything = []
    for label, folder in folders.items():
        ordered = sorted(folder.sites(), key=lambda p: p[0])
        groups[label] = [site for _, site in ordered]
        everything += ordered
    return ScanResult(groups, orphans, unreadable, count, [site for _, site in sorted(everything, key=lambda p: p[0])])
