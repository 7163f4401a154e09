"""Find the CUDA errors printed in a log: Python exceptions, C++ ``what():`` lines, raw stderr reports.

A log has no exception objects, only their printed lines: ``RuntimeError: CUDA error: ...``,
``torch.AcceleratorError: ...``, ``  what():  CUDA error: ...`` after a C++ terminate,
``THCudaCheck FAIL ... error=710 : device-side assert triggered``, the NCCL watchdog's
``... terminated with exception: CUDA error: ...``. Only lines holding ``error`` in any case are
looked at, found with ``str.find`` so a 100 MB log costs two C-speed scans.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = ["UNTYPED", "LoggedError", "find_errors", "parse_error_line"]

UNTYPED = "log line"  # the "type" of an error line that names no exception type
_ANCHORS = ("rror", "RROR")
_MAX_LINE = 4000
# "RuntimeError: msg", "torch.AcceleratorError: msg", "c10::Error" after what(); "Triton Error [CUDA]: msg" is a message
_TYPED = re.compile(r"(?<![\w.:])((?:[A-Za-z_]\w*(?:\.|::))*[A-Za-z_]\w*(?:Error|Exception)): (.+)", re.ASCII)
_WHAT = re.compile(r"what\(\):\s+(.+)")
# TGI's router relaying a shard's Python error: "Server error: Unexpected <class 'RuntimeError'>: CUDA error: ..."
_RELAYED = re.compile(r"Server error: Unexpected <class '(?:[\w.]+\.)?(\w+)'>: (.+)")
_LIBRARY_REPORT = re.compile(
    r"(THCudaCheck FAIL .+|CUDA error after .+|(?:CUDA|cuDNN|HIP|CUDA driver) error: .+|Triton Error \[\w+\]: .+|"
    r"cuda runtime error \(\d+\) : .+)",
    re.IGNORECASE,
)
_MARKUP = "*_`> \t#"
_CODE_LINE = re.compile(r"(?:raise |File \"|except |assert |\w+\s*=\s)")


@dataclass(frozen=True)
class LoggedError:
    """One printed error: its type as printed (``RuntimeError``), its message, the physical line, its group."""

    type_name: str
    message: str
    line: str
    group: str | None
    offset: int  # where the line starts in the text: orders errors against each other


def _line_at(text: str, i: int) -> tuple[int, int]:
    start = text.rfind("\n", 0, i) + 1
    end = text.find("\n", i)
    return start, (len(text) if end < 0 else end)


def _hit_lines(text: str) -> Iterator[tuple[int, str]]:
    """Every line holding an anchor, once, in order."""
    starts: set[int] = set()
    for anchor in _ANCHORS:
        i = text.find(anchor)
        while i >= 0:
            start, end = _line_at(text, i)
            starts.add(start)
            i = text.find(anchor, end)
    for start in sorted(starts):
        end = text.find("\n", start)
        yield start, text[start : (len(text) if end < 0 else end)][:_MAX_LINE]


def _strip_tags(line: str, tag_end: Callable[[str], int]) -> str:
    body = line[tag_end(line) :].lstrip(_MARKUP)
    return body.rstrip(_MARKUP + "\r")


_GLUED = "Traceback (most recent call last)"  # 0.x stderr reports ran straight into the traceback


def parse_error_line(body: str) -> tuple[str, str] | None:
    """``(type name, message)`` for an error line without its prefixes, or None when it is not one."""
    body = body.split(_GLUED, 1)[0]
    if _CODE_LINE.match(body):
        return None  # a traceback's source line, or code quoted in the log
    m = _WHAT.search(body)
    if m is not None:
        return "c10::Error", m.group(1).strip()
    m = _RELAYED.search(body)
    if m is not None:  # the same error as the shard's own line: the same key, so it is counted once
        return m.group(1), m.group(2).strip()
    m = _TYPED.search(body)
    if m is not None and not body[: m.start()].rstrip().endswith(("raise", "(")):
        return m.group(1), m.group(2).strip()
    m = _LIBRARY_REPORT.search(body)
    if m is not None:
        return UNTYPED, m.group(1).strip()
    return None


def find_errors(text: str, group: Callable[[str], str | None], tag_end: Callable[[str], int]) -> list[LoggedError]:
    """Every error line in ``text``: ``group(line)`` names its rank; ``tag_end(line)`` is where its launcher
    and timestamp prefixes end."""
    out = []
    for start, line in _hit_lines(text):
        parsed = parse_error_line(_strip_tags(line, tag_end))
        if parsed is not None:
            out.append(LoggedError(parsed[0], parsed[1], line, group(line), start))
    return out
