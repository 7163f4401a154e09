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
from typing import Iterable, Iterator, List, Optional, Tuple

__all__ = ["AssertLine", "AssertSite", "fold", "parse_line", "parse_lines", "scan"]

Dim3 = Tuple[int, int, int]

# Anchored on the fixed middle ("<path>:<line>: [<func>: ]block: [..], thread: [..] Assertion `").
# The path is ASCII without spaces, brackets, commas or colons (except a drive letter), so
# launcher prefixes ("[rank0]:", "[1,0]<stderr>:") and glued non-path text fall outside it.
_RECORD = re.compile(
    r"(?:\[CUDA_KERNEL_ASSERT\] ?)?"
    r"(?P<path>(?:[A-Za-z]:)?[\w.~+@%=$!&/\\-]*?\.(?:cuh|cu|hpp|h|cpp|cc|cxx|c|py))"
    r":(?P<line>\d+):(?: (?P<func>[^\n]*?):)? "
    r"block: \[(?P<b>\d+), ?(?P<b2>\d+), ?(?P<b3>\d+)\], "
    r"thread: \[(?P<t>\d+), ?(?P<t2>\d+), ?(?P<t3>\d+)\](?P<colon>:?) "
    r"Assertion (?P<printf>failed: )?`",
    re.ASCII,
)
_FAILED = "` failed"
_PRINTF_SEP = "`: "
# Markers where the stable part of a kernel source path starts (earliest wins; "lib/" last).
_ROOTS = ("aten/", "c10/", "torch/lib/")
_PATH_START = re.compile(r"(?:^|/)(?:\.\.?/)*")


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
            f"{head} `{self.condition}` failed in {_plural(self.threads, 'thread')}"
            f" of {_plural(self.blocks, 'block')}"
        )
        if self.message:
            text += f": {self.message}"
        return text


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def short_function(function: Optional[str]) -> Optional[str]:
    """The kernel's name without THC return types, parameter lists and ``[with T = ...]`` tails."""
    if not function:
        return function
    name = function.split(" [with ", 1)[0].strip()
    if name.startswith("lambda"):
        return "lambda"
    depth, cut = 0, len(name)
    for i, ch in enumerate(name):  # cut at the first "(" outside template brackets, keep "operator()"
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0 and not name[:i].endswith("operator"):
            cut = i
            break
    name = name[:cut]
    depth, start = 0, 0
    for i, ch in enumerate(name):  # drop a return type: the last space outside template brackets
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == " " and depth == 0:
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
    if len(p) > 2 and p[1] == ":":
        p = p[2:]
    return p.lstrip("/") if p.startswith("/") else _PATH_START.sub("", p, count=1)


def _dim3(a: str, b: str, c: str) -> Dim3:
    return (int(a), int(b), int(c))


def _records(line: str) -> Iterator[AssertLine]:
    """Every complete record in one physical line (several when threads' output is glued)."""
    matches = list(_RECORD.finditer(line))
    for k, m in enumerate(matches):
        end = matches[k + 1].start() if k + 1 < len(matches) else len(line)
        region = line[m.end() : end]
        message: Optional[str] = None
        printf = m.group("printf") is not None
        if printf:
            cond, sep, rest = region.partition(_PRINTF_SEP)
            if sep:
                message = rest.rstrip() or None
            elif region.rstrip().endswith("`"):
                cond = region.rstrip()[:-1]
            else:
                continue  # truncated: never invent a condition
            stop = end if sep else m.end() + len(region.rstrip())
            raw_end = len(line[:stop].rstrip())
        else:
            i = region.rfind(_FAILED)
            if i < 0:
                continue
            cond = region[:i]
            raw_end = m.end() + i + len(_FAILED)
            if line.startswith(".", raw_end):
                raw_end += 1
        condition = " ".join(cond.split())
        if not condition:
            continue
        path = m.group("path")
        func = m.group("func")
        yield AssertLine(
            path=path,
            file=normalise_file(path),
            line=int(m.group("line")),
            function=func.strip() or None if func is not None else None,
            block=_dim3(m.group("b"), m.group("b2"), m.group("b3")),
            thread=_dim3(m.group("t"), m.group("t2"), m.group("t3")),
            condition=condition,
            message=message,
            printf=printf,
            raw=line[m.start() : raw_end],
        )


def parse_line(text: str) -> Optional[AssertLine]:
    """The first assertion record in ``text`` (one physical line), or None."""
    if "Assertion" not in text:
        return None
    for record in _records(text):
        return record
    return None


def _is_candidate(line: str) -> bool:
    return "Assertion" in line or _FAILED in line


def parse_lines(text: str) -> List[AssertLine]:
    """Every assertion record in a blob of stderr/stdout, in order; junk lines are skipped.

    Lines that fail alone but hold part of a record are retried joined with their neighbours,
    which recovers records a console wrapped at its width (``thr`` / ``ead: [215,0,0]``).
    """
    out: List[AssertLine] = []
    lines = text.splitlines()
    used = -1  # index of the last physical line consumed by a joined record
    for i, line in enumerate(lines):
        if i <= used or not _is_candidate(line):
            continue
        found = list(_records(line)) if "Assertion" in line else []
        if found:
            out.extend(found)
            continue
        found, used = _rejoin(lines, i, used)
        out.extend(found)
    return out


def _rejoin(lines: List[str], i: int, used: int) -> Tuple[List[AssertLine], int]:
    """Try ``lines[i]`` glued to up to two previous lines, or to the next one (console wrap)."""
    for lo, hi in ((i - 1, i), (i - 2, i), (i, i + 1), (i, i + 2)):
        if lo <= used or lo < 0 or hi >= len(lines):
            continue
        joined = "".join(lines[lo : hi + 1])
        if len(joined) > 4096:
            continue
        found = list(_records(joined))
        if found:
            return found, max(used, hi)
    return [], used


def fold(lines: Iterable[AssertLine]) -> List[AssertSite]:
    """One ``AssertSite`` per (file, line, condition), in first-seen order."""
    acc: dict = {}
    for a in lines:
        key = (a.file, a.line, a.condition)
        entry = acc.get(key)
        if entry is None:
            acc[key] = [a, a.function, a.message, 1, {(a.block, a.thread)}, {a.block}]
            continue
        entry[3] += 1
        entry[4].add((a.block, a.thread))
        entry[5].add(a.block)
        if entry[1] is None and a.function is not None:
            entry[1] = a.function
        if entry[2] is None and a.message is not None:
            entry[2] = a.message
    return [
        AssertSite(
            file=key[0],
            line=key[1],
            function=function,
            condition=key[2],
            message=message,
            count=count,
            threads=len(threads),
            blocks=len(blocks),
            first=first,
        )
        for key, (first, function, message, count, threads, blocks) in acc.items()
    ]


def scan(text: str) -> List[AssertSite]:
    """``fold(parse_lines(text))``: the assert sites found in captured output."""
    return fold(parse_lines(text))
