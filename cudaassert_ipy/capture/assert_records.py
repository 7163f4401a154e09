"""Find the assertion records in one physical line: the string work under :mod:`.assert_lines`.

A record is what one failing GPU thread printed (every form is listed, with examples, in docs/causes.md):
``<path>:<line>: <function>: block: [b], thread: [t] Assertion `<condition>` failed.`` (glibc),
the same without ``<function>:`` (Windows), the ``[CUDA_KERNEL_ASSERT]`` printf form, Triton's
``unknown:0: unknown:`` or a Python frame as location, ROCm/HIP's
``<path>:<line>: <function>: Device-side assertion `<condition>' failed.`` (no block or thread), and the
printf-then-trap forms of kernels that stop without ``__assert_fail`` (``Assertion failed (<path>:<line>):
<condition>``, or a known message such as vLLM's ``[topk_select] NaN detected. Calling `trap;` ...``). The
condition may be empty: a GPU tensor check without a message prints ``Assertion `` failed.``.
Records are kept only when whole: a condition that carries text from another writer (processes
writing into one stream splice lines mid-token) comes back as an orphan fragment instead.
Pure string work; heads and tails repeat across threads, so both are parsed once and cached.
"""

from __future__ import annotations

import re
import string
from functools import lru_cache
from typing import ClassVar

__all__ = ["NO_DIM", "TRAP_FILE", "TRAP_MARK", "Record", "may_hold", "normalise_file", "orphan_fragments", "records"]

Dim3 = tuple[int, int, int]
# (path, file, line, function, block, thread, condition, message, printf, raw)
Record = tuple[str, str, int, str | None, Dim3, Dim3, str, str | None, bool, str]
_Head = tuple[str, str, int, str | None, int]  # (path, file, line, function, start)
_Tail = tuple[str, str | None, int, bool]  # (condition, message, raw length, spliced)
# Everything of a record but its dims: (path, file, line, function, condition, message, printf, before, after)
_Template = tuple[str, str, int, str | None, str, str | None, bool, str, str]
NO_DIM: Dim3 = (-1, -1, -1)  # HIP and printf-then-trap lines print no block or thread
TRAP_FILE = "<trap>"  # the location of a printf-then-trap line that names no source file
TRAP_MARK = "Calling `trap;`"  # in the text of a kernel that prints a message and traps on purpose
_TRAP_ASSERT = "Assertion failed ("
# FlashMLA-style printf before a trap: "Assertion failed (<file>:<line>): <condition>", to the end of the line.
_TRAP_RECORD = re.compile(
    r"Assertion failed \((?P<path>[^()\s]+?\.(?:cuh|cu|hpp|h|cpp|cc)):(?P<line>\d+)\): "
    r"(?P<cond>.*\S)",
    re.ASCII,
)
# A known trap message (its whole text is the condition), with any launcher prefix left out.
# It is whole once its quoted words have closed ('... which will result in "unspecified launch failure"').
_TRAP_MESSAGE = re.compile(r"\[\w+\] [^\[\]`]*?" + re.escape(TRAP_MARK) + r'[^"\n]*"[^"\n]*"')

_FAILED = "` failed"
_HIP_FAILED = "' failed"
_PRINTF_SEP = "`: "
_MARK = ": block: ["
_HIP_MARK = ": Device-side assertion `"
# Markers where the stable part of a kernel source path starts (the last one wins: a spliced
# path holds the start of another process's path before the real one).
_ROOTS = ("aten/", "c10/", "torch/lib/")
_PATH_START = re.compile(r"^(?:[A-Za-z]:)?(?:\.{1,2}/|/)*")
_PATH_CHARS = frozenset(string.ascii_letters + string.digits + "_.~+@%=$!&/\\-")
# A location: a source file, Triton's ``unknown`` or a frozen module, then ``:<line>`` and ": " or the end.
_LOC = re.compile(
    r"(?:\.(?:cuh|cu|hip|hpp|h|cpp|cc|cxx|c|py)|(?<![\w.])unknown|<frozen [\w.]+>):(\d+)(?=: |\Z)", re.ASCII
)
_BLOCK_THREAD = re.compile(
    r"block: \[(\d+, ?\d+, ?\d+)\], thread: \[(\d+, ?\d+, ?\d+)\]:? Assertion (failed: )?`", re.ASCII
)
# Text from another writer inside a condition: dims, record words, paths.
_SPLICED = re.compile(
    r"block: \[|thread: \[|Assertion|` failed|\d,\d|\.(?:cuh?|hip|py|cpp|h):\d|[/\\](?:aten|c10)[/\\]", re.ASCII
)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_CACHE_LIMIT = 4096
_HEAD_LIMIT = 2048  # path + THC signature fit; bounds the work on a long glued line


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
        i = p.rfind("/" + root)
        j = i + 1 if i >= 0 else (0 if p.startswith(root) else -1)
        if j > best:
            best = j
    if best < 0:
        i = p.rfind("torchinductor_")
        if i >= 0:
            return p[i:]
        i = p.rfind("/lib/")
        best = i + 1 if i >= 0 else (0 if p.startswith("lib/") else -1)
    if best >= 0:
        return p[best:]
    return _PATH_START.sub("", p, count=1)


class _Caches:
    """Parsed heads, tails and dims, shared by every call (bounded; cleared when full)."""

    heads: ClassVar[dict[str, _Head | None]] = {}
    tails: ClassVar[dict[tuple[str, bool, str], _Tail | None]] = {}
    dims: ClassVar[dict[str, Dim3]] = {}
    # (text before the block dims, text after the thread dims) -> record template, or None: not a whole record
    lines: ClassVar[dict[tuple[str, str], _Template | None]] = {}


def _dim3(text: str) -> Dim3:
    d = _Caches.dims.get(text)
    if d is None:
        a, b, c = text.split(",")
        d = _Caches.dims[text] = (int(a), int(b), int(c))
        if len(_Caches.dims) > _CACHE_LIMIT:
            _Caches.dims.clear()
    return d


def _path_start(head: str, end: int) -> int:
    """Where the path that ends at ``head[end]`` starts: path characters, plus a drive letter."""
    i = end
    while i > 0 and head[i - 1] in _PATH_CHARS:
        i -= 1
    drive = i >= 2 and head[i - 1] == ":" and head[i - 2].isalpha() and head[i : i + 1] in ("/", "\\")
    if drive and (i == 2 or head[i - 3] not in _PATH_CHARS):
        i -= 2
    return i


def _parse_head(head: str) -> _Head | None:
    """``(path, file, line, function, start)`` for the text before the record's marker, or None.

    The last location wins: text glued in front (a prefix, another writer's cut path) is left out.
    """
    try:  # one lookup: another thread may clear the cache between two
        return _Caches.heads[head]
    except KeyError:
        pass
    last = None
    for found in _LOC.finditer(head):
        last = found
    parsed: _Head | None = None
    if last is not None:
        colon = last.start(1) - 1
        if head[colon - 1] == ">":  # <frozen importlib._bootstrap>
            start = head.rfind("<frozen ", 0, colon)
        elif head.endswith("unknown", 0, colon) and not head.endswith(".unknown", 0, colon):
            start = colon - len("unknown")
        else:
            start = _path_start(head, colon)
        path = head[start:colon]
        func = head[last.end() + 2 :].strip() or None
        whole = path.replace("\\", "/")
        base = whole.rsplit("/", 1)[-1]
        # A kernel's __FILE__ always has a directory: a bare "ss.cu" is the tail of a path cut by another writer.
        if base and not base.startswith(".") and ("/" in whole or path == "unknown" or path.startswith("<frozen ")):
            parsed = (path, normalise_file(path), int(last.group(1)), func, start)
    if len(_Caches.heads) > _CACHE_LIMIT:
        _Caches.heads.clear()
    _Caches.heads[head] = parsed
    return parsed


def _parse_tail(region: str, printf: bool, closer: str) -> _Tail | None:
    """``(condition, message, raw_length, spliced)`` for the text after the opening backtick, or None."""
    key = (region, printf, closer)
    try:
        return _Caches.tails[key]
    except KeyError:
        pass
    message: str | None = None
    closed = False
    if printf:  # "`cond`: message" up to the end of the line; the message may hold backticks too
        text = region.rstrip()
        raw_len = len(text)
        cond, sep, rest = text.partition(_PRINTF_SEP)
        if sep:
            message = rest.strip() or None
        else:
            cond = text[:-2] if text.endswith("`:") else text[:-1] if text.endswith("`") else ""
    else:
        i = region.rfind(closer)
        cond = region[:i] if i >= 0 else ""
        raw_len = i + len(closer) + (1 if region.startswith(".", i + len(closer)) else 0)
        closed = i >= 0
    condition = " ".join(cond.split())
    # An empty condition counts only when its backticks closed (``Assertion `` failed.``: a check with no message).
    whole = bool(condition) or (not printf and closed) or (printf and message is not None)
    parsed: _Tail | None = (condition, message, raw_len, bool(_SPLICED.search(condition))) if whole else None
    if len(_Caches.tails) > _CACHE_LIMIT:
        _Caches.tails.clear()
    _Caches.tails[key] = parsed
    return parsed


def _one_record(line: str, i: int, end: int) -> Record | None:
    """The record whose ": block: [" (or HIP marker) is at ``line[i]`` and whose text ends before ``end``."""
    lo = max(0, i - _HEAD_LIMIT)
    head = _parse_head(line[lo:i])
    if head is None:
        return None
    if line.startswith(_HIP_MARK, i):
        body, printf, closer, block, thread = i + len(_HIP_MARK), False, _HIP_FAILED, NO_DIM, NO_DIM
    else:
        m = _BLOCK_THREAD.match(line, i + 2)
        if m is None:
            return None
        body, printf, closer = m.end(), m.group(3) is not None, _FAILED
        block, thread = _dim3(m.group(1)), _dim3(m.group(2))
    tail = _parse_tail(line[body:end], printf, closer)
    if tail is None or tail[3]:
        return None  # cut off, or spliced with another writer's text: not a whole record
    path, file, lineno, function, start = head
    condition, message, raw_len, _ = tail
    return (path, file, lineno, function, block, thread, condition, message, printf, line[lo + start : body + raw_len])


def _marks(line: str) -> list[int]:
    marks = []
    for mark in (_MARK, _HIP_MARK):
        j = line.find(mark)
        while j >= 0:
            marks.append(j)
            j = line.find(mark, j + len(mark))
    return sorted(marks)


_THREAD = "], thread: ["


def _fast(line: str, i: int) -> tuple[list[Record], int] | None:
    """The common line, one record and nothing else: only its dims differ from the line before,
    so everything else is looked up by the text around them. None when the line is not that simple."""
    k = line.find(_THREAD, i)
    j = line.find("]", k + len(_THREAD)) if k > 0 else -1
    if j < 0 or line.find(_MARK, j) >= 0 or "\x1b" in line:
        return None
    key = (line[:i], line[j:])
    template: _Template | None
    try:
        template = _Caches.lines[key]
    except KeyError:
        found = _one_record(line, i, len(line))
        if found is None:
            template = None
        else:
            raw = found[9]
            start = i - raw.find(_MARK)  # where the record starts in the line
            template = (*found[:4], *found[6:9], raw[: i - start], raw[j - start :])
        if len(_Caches.lines) > _CACHE_LIMIT:
            _Caches.lines.clear()
        _Caches.lines[key] = template
    if template is None:
        return [], 1
    try:
        block, thread = _dim3(line[i + len(_MARK) : k]), _dim3(line[k + len(_THREAD) : j])
    except ValueError:
        return None
    path, file, lineno, function, condition, message, printf, before, after = template
    raw = before + line[i:j] + after
    return [(path, file, lineno, function, block, thread, condition, message, printf, raw)], 0


def may_hold(text: str) -> bool:
    """False when :func:`records` surely finds nothing in ``text``: no record marker, and no colour code whose
    removal could make one."""
    return _MARK in text or _HIP_MARK in text or _TRAP_ASSERT in text or TRAP_MARK in text or "\x1b" in text


def records(line: str) -> tuple[list[Record], int]:
    """Every whole record in one physical line (several when threads' output is glued), and how many
    record markers in it gave no whole record (cut off or spliced)."""
    i = line.find(_MARK)
    if i >= 0 and _HIP_MARK not in line:
        fast = _fast(line, i)
        if fast is not None:
            return fast
    if "\x1b" in line:  # colour codes from a log prefixer would glue onto the path
        line = _ANSI.sub("", line)
    i = line.find(_MARK)
    if i >= 0 and line.find(_MARK, i + len(_MARK)) < 0 and _HIP_MARK not in line:
        rec = _one_record(line, i, len(line))  # the common case: one record per line
        return ([rec], 0) if rec is not None else ([], 1)
    marks = _marks(line)
    if not marks:
        return _trap_records(line)
    out: list[Record] = []
    head_start = 0
    for n, k in enumerate(marks):
        closer = _HIP_FAILED if line.startswith(_HIP_MARK, k) else _FAILED
        if n + 1 == len(marks):
            cut = len(line)
        else:
            cut = line.rfind(closer, k, marks[n + 1])
            if cut < 0:
                head_start = k + 2  # not a whole record: its text is junk for the next one
                continue
            cut += len(closer) + (1 if line.startswith(".", cut + len(closer)) else 0)
        rec = _one_record(line[head_start:cut], k - head_start, cut - head_start)
        if rec is not None:
            out.append(rec)
        head_start = cut
    return out, len(marks) - len(out)


def _trap_records(line: str) -> tuple[list[Record], int]:
    """A printf-then-trap line as a record with no block or thread: ``Assertion failed (<path>:<line>): <cond>``
    (the file named) or a known trap message (no file: :data:`TRAP_FILE`)."""
    if _TRAP_ASSERT in line:
        m = _TRAP_RECORD.search(line)
        if m is None:
            return [], 1
        path, condition = m.group("path"), " ".join(m.group("cond").split())
        rec = (
            path,
            normalise_file(path),
            int(m.group("line")),
            None,
            NO_DIM,
            NO_DIM,
            condition,
            None,
            True,
            line[m.start() : m.end()],
        )
        return [rec], 0
    if TRAP_MARK in line:
        t = _TRAP_MESSAGE.search(line)
        if t is None:
            return [], 1
        text = t.group(0)
        return [(TRAP_FILE, TRAP_FILE, 0, None, NO_DIM, NO_DIM, " ".join(text.split()), None, True, text)], 0
    return [], 0


_FRAGMENT = re.compile(r"(?:Assertion (?:failed: )?`|Device-side assertion `)(.*?)(?:` failed|' failed)")


def orphan_fragments(line: str) -> list[str]:
    """Condition text between an assertion's opening backtick and its ``failed``, with no readable location.

    Used for lines that held no whole record: a condition cut and spliced by another writer is
    still there, with the other writer's text mixed in.
    """
    return [" ".join(m.group(1).split()) for m in _FRAGMENT.finditer(line) if m.group(1).strip()]
