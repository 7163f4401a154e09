"""Parse and fold the lines a CUDA kernel prints when a device-side assertion fails.

One failing kernel prints one line per failing thread, often thousands of them, in several
formats (glibc ``__assert_fail``, Windows ``_wassert``, the ``[CUDA_KERNEL_ASSERT]`` printf form,
old THC template signatures, Inductor's ``unknown``; see reference/error_texts.md §1.2 and §7).
The user needs one fact per assert site, so we parse each line and fold them by site.
Pure string work: no IPython, no torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, List, Optional, Tuple

from cudaassert_ipy.wording import plural

__all__ = ["AssertLine", "AssertSite", "fold", "normalise_file", "parse_line", "parse_lines", "scan", "short_function"]

Dim3 = Tuple[int, int, int]

_FAILED = "` failed"
_PRINTF_SEP = "`: "
# Markers where the stable part of a kernel source path starts (earliest wins; "lib/" last).
_ROOTS = ("aten/", "c10/", "torch/lib/")
_PATH_START = re.compile(r"^(?:[A-Za-z]:)?(?:\.{1,2}/|/)*")


@dataclass(frozen=True)
class AssertLine:
    """One parsed assertion record, as one failing GPU thread printed it.

    ``raw`` is the record itself, without launcher prefixes or text glued in front of it.
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
    """Every line from one assert site (same file, line and condition), folded into one fact."""

    file: str
    line: int
    function: Optional[str]
    condition: str
    message: Optional[str]
    count: int
    threads: int
    blocks: int
    first: AssertLine

    def summary(self) -> str:
        """One line a person can read, e.g. ``Loss.cu:250 f: `c` failed in 64 threads of 2 blocks``."""
        where = f"{self.file.rsplit('/', 1)[-1]}:{self.line}"
        func = short_function(self.function)
        head = f"{where} {func}:" if func else f"{where}:"
        text = (
            f"{head} `{self.condition}` failed in {plural(self.threads, 'thread')} of {plural(self.blocks, 'block')}"
        )
        if self.message:
            text += f": {self.message}"
        return text


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


@lru_cache(maxsize=256)
def normalise_file(path: str) -> str:
    """The build-independent part of a kernel source path, with forward slashes.

    ``/opt/conda/conda-bld/pytorch_1678402412426/work/aten/src/ATen/native/cuda/Loss.cu`` and
    ``C:\\actions-runner\\...\\aten\\src\\ATen\\native\\cuda\\Loss.cu`` both become
    ``aten/src/ATen/native/cuda/Loss.cu``; Inductor kernels keep ``torchinductor_<user>/xx/hash.py``.
    """
    p = path.replace("\\", "/")
    best = -1
    for root in _ROOTS:
        i = p.find("/" + root)
        j = i + 1 if i >= 0 else (0 if p.startswith(root) else -1)
        if j >= 0 and (best < 0 or j < best):
            best = j
    if best < 0:
        i = p.find("torchinductor_")
        if i >= 0:
            return p[i:]
        i = p.find("/lib/")
        best = i + 1 if i >= 0 else (0 if p.startswith("lib/") else -1)
    if best >= 0:
        return p[best:]
    return _PATH_START.sub("", p, count=1)


# The path is ASCII without spaces, brackets, commas or colons (except a drive letter), so launcher
# prefixes ("[rank0]:", "[1,0]<stderr>:") and glued non-path text fall outside it.
_Record = tuple  # (path, file, line, function, block, thread, condition, message, printf, raw)

# Fast path for the common case of one record per line: the text before ": block: [" and the
# text after "Assertion `" repeat across every thread of a site, so they are parsed once and
# cached; only the block/thread numbers change per line.
_HEAD = re.compile(
    r"(?P<marker>\[CUDA_KERNEL_ASSERT\] ?)?"
    r"(?P<path>(?:[A-Za-z]:)?[\w.~+@%=$!&/\\-]*?\.(?:cuh|cu|hpp|h|cpp|cc|cxx|c|py))"
    r":(?P<line>\d+)(?:: (?P<func>.*))?\Z",
    re.ASCII,
)
_BLOCK_THREAD = re.compile(
    r"block: \[(\d+, ?\d+, ?\d+)\], thread: \[(\d+, ?\d+, ?\d+)\]:? Assertion (failed: )?`",
    re.ASCII,
)
_MARK = ": block: ["
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_CACHE_LIMIT = 4096
_HEAD_LIMIT = 2048  # path + THC signature fit; bounds the regex on a long glued line
_MISSING = object()
_heads: dict = {}
_tails: dict = {}
_dims: dict = {}


def _dim3(text: str) -> Dim3:
    d = _dims.get(text)
    if d is None:
        a, b, c = text.split(",")
        d = _dims[text] = (int(a), int(b), int(c))
        if len(_dims) > _CACHE_LIMIT:
            _dims.clear()
    return d


def _parse_head(head: str) -> Optional[tuple]:
    """``(path, file, line, function, start)`` for the text before ": block: [", or None."""
    parsed = _heads.get(head, _MISSING)
    if parsed is not _MISSING:
        return parsed
    m = _HEAD.search(head)
    parsed = None
    if m is not None:
        func = m.group("func")
        path = m.group("path")
        parsed = (path, normalise_file(path), int(m.group("line")), (func or "").strip() or None, m.start())
    if len(_heads) > _CACHE_LIMIT:
        _heads.clear()
    _heads[head] = parsed
    return parsed


def _parse_tail(region: str, printf: bool) -> Optional[tuple]:
    """``(condition, message, raw_length)`` for the text after "Assertion `", or None if cut off."""
    key = (region, printf)
    parsed = _tails.get(key, _MISSING)
    if parsed is not _MISSING:
        return parsed
    message: Optional[str] = None
    if printf:  # "`cond`: message" up to the end of the line; the message may hold backticks too
        text = region.rstrip()
        raw_len = len(text)
        cond, sep, rest = text.partition(_PRINTF_SEP)
        if sep:
            message = rest.strip() or None
        else:
            cond = text[:-2] if text.endswith("`:") else text[:-1] if text.endswith("`") else ""
    else:
        i = region.rfind(_FAILED)
        cond = region[:i] if i >= 0 else ""
        raw_len = i + len(_FAILED) + (1 if region.startswith(".", i + len(_FAILED)) else 0)
    condition = " ".join(cond.split())
    parsed = (condition, message, raw_len) if condition else None
    if len(_tails) > _CACHE_LIMIT:
        _tails.clear()
    _tails[key] = parsed
    return parsed


def _one_record(line: str, i: int, end: int) -> Optional[_Record]:
    """The record whose ": block: [" is at ``line[i]`` and whose text ends before ``end``."""
    lo = max(0, i - _HEAD_LIMIT)
    head = _parse_head(line[lo:i])
    if head is None:
        return None
    m = _BLOCK_THREAD.match(line, i + 2)
    if m is None:
        return None
    printf = m.group(3) is not None
    tail = _parse_tail(line[m.end() : end], printf)
    if tail is None:
        return None
    path, file, lineno, function, start = head
    condition, message, raw_len = tail
    block, thread = _dim3(m.group(1)), _dim3(m.group(2))
    raw = line[lo + start : m.end() + raw_len]
    return (path, file, lineno, function, block, thread, condition, message, printf, raw)


def _records(line: str) -> List[_Record]:
    """Every complete record in one physical line (several when threads' output is glued)."""
    i = line.find(_MARK)
    if i < 0:
        return []
    if "\x1b" in line:  # colour codes from a log prefixer would glue onto the path
        line = _ANSI.sub("", line)
        i = line.find(_MARK)
    j = line.find(_MARK, i + len(_MARK))
    if j < 0:
        rec = _one_record(line, i, len(line))
        return [rec] if rec is not None else []
    # Several records glued on one line: each one's text ends at its last "` failed".
    out: List[_Record] = []
    marks = [i]
    while j >= 0:
        marks.append(j)
        j = line.find(_MARK, j + len(_MARK))
    head_start = 0
    for n, k in enumerate(marks):
        if n + 1 == len(marks):
            cut = len(line)
        else:
            cut = line.rfind(_FAILED, k, marks[n + 1])
            if cut < 0:
                head_start = k + len(_MARK)  # not a whole record: its text is junk for the next one
                continue
            cut += len(_FAILED) + (1 if line.startswith(".", cut + len(_FAILED)) else 0)
        rec = _one_record(line[head_start:cut], k - head_start, cut - head_start)
        if rec is not None:
            out.append(rec)
        head_start = cut
    return out


def parse_line(text: str) -> Optional[AssertLine]:
    """The first assertion record in ``text`` (one physical line), or None."""
    if "Assertion" not in text:
        return None
    found = _records(text)
    return AssertLine(*found[0]) if found else None


def _is_candidate(line: str) -> bool:
    return "Assertion" in line or _FAILED in line


def _raw_records(text: str) -> List[_Record]:
    out: List[_Record] = []
    lines = text.splitlines()
    used = -1  # index of the last physical line that produced records
    for i, line in enumerate(lines):
        if i <= used or not _is_candidate(line):
            continue
        found = _records(line) if "Assertion" in line else []
        if found:
            out.extend(found)
            used = i
            continue
        found, used = _rejoin(lines, i, used)
        out.extend(found)
    return out


def parse_lines(text: str) -> List[AssertLine]:
    """Every assertion record in a blob of stderr/stdout, in order; junk lines are skipped.

    Lines that fail alone but hold part of a record are retried joined with their neighbours,
    which recovers records a console wrapped at its width (``thr`` / ``ead: [215,0,0]``).
    """
    return [AssertLine(*r) for r in _raw_records(text)]


def _rejoin(lines: List[str], i: int, used: int) -> Tuple[List[_Record], int]:
    """Try ``lines[i]`` glued to up to two previous lines, or to the next ones (console wrap)."""
    for lo, hi in ((i - 1, i), (i - 2, i), (i, i + 1), (i, i + 2)):
        if lo <= used or lo < 0 or hi >= len(lines):
            continue
        joined = "".join(lines[lo : hi + 1])
        if len(joined) > 4096:
            continue
        found = _records(joined)
        if found:
            return found, max(used, hi)
    return [], used


def _fold(
    records: Iterable[Tuple[str, int, str, Optional[str], Optional[str], Dim3, Dim3, object]],
) -> List[AssertSite]:
    acc: dict = {}
    for file, lineno, condition, function, message, block, thread, first in records:
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


def scan(text: str) -> List[AssertSite]:
    """``fold(parse_lines(text))``, without building an ``AssertLine`` for every thread."""
    return _fold((r[1], r[2], r[6], r[3], r[7], r[4], r[5], r) for r in _raw_records(text))
