"""Thin out kernel assertion lines on their way to the notebook cell; every other byte passes unchanged.

A failing kernel prints one line per failing thread: 10,000 lines store 1.7 MB of stderr in the
notebook above a report that already folds them into one fact. So the cell gets the first few raw
lines of each assert site and one line counting the rest; the kernel's log gets every byte (that is
the caller's job, see cell_route.py). Lines are classified only once complete: a partial line at a
chunk boundary is held until its newline arrives, or released unfiltered when the writer goes quiet.
Pure bytes work: no IPython, no torch.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from cudaassert_ipy.base.wording import PREFIX

__all__ = ["MORE_LINES", "LineFilter", "site_of"]

MORE_LINES = "{prefix} … {count} more {lines} of this assertion ({site}) {were} written to the kernel's log.\n"

_MARKER = b"Assertion"
_HOLD_LIMIT = 64 << 10  # a held partial line longer than this cannot be an assertion line: release it
_LINE_LIMIT = 8 << 10  # lines longer than this are never parsed (a THC signature line is ~1 KiB)
_CACHE_LIMIT = 1024
# What differs between the threads of one site: drop it, and every line of a site has the same key.
_PER_THREAD = re.compile(rb"block: \[\d+, ?\d+, ?\d+\], thread: \[\d+, ?\d+, ?\d+\]")

Site = tuple[str, int, str]  # (file, line, condition): how assert_lines.fold groups lines into one site


def site_of(line: str) -> tuple[Site, str] | None:
    """``((file, line, condition), "Loss.cu:250")`` for an assertion line, None for any other line."""
    from cudaassert_ipy.capture.assert_lines import parse_line  # only once a line says "Assertion": load stays light

    parsed = parse_line(line)
    if parsed is None:
        return None
    return (parsed.file, parsed.line, parsed.condition), f"{parsed.file.rsplit('/', 1)[-1]}:{parsed.line}"


class _Tally:
    """One site's lines shown and hidden since the last summary, and its label ("Loss.cu:250")."""

    __slots__ = ("hidden", "label", "shown")

    def __init__(self, label: str) -> None:
        self.shown = 0
        self.hidden = 0
        self.label = label


class LineFilter:
    """Bytes in, bytes for the cell out: at most ``shown`` raw lines per assert site (negative: all).

    ``feed()`` returns what the cell may show now, ``release()`` hands over a held partial line,
    ``summary()`` the one line per site saying how many lines went only to the log (then counts restart).
    """

    def __init__(self, shown: int = 3, classify: Callable[[str], tuple[Site, str] | None] = site_of) -> None:
        self.shown = shown
        self._classify = classify
        self._held = b""  # the start of a line whose newline has not arrived
        self._committed = False  # the current line was already released unfiltered: its rest passes too
        self._cache: dict[bytes, tuple[Site, str] | None] = {}
        self._counts: dict[Site, _Tally] = {}  # site -> lines shown, lines hidden, "Loss.cu:250" since summary()

    @property
    def holding(self) -> bool:
        """Whether a partial line waits for its newline."""
        return bool(self._held)

    def feed(self, data: bytes) -> bytes:
        """What the cell may show of ``data`` now. If it raises, the state is as before the call."""
        out, committed = b"", self._committed
        if committed:
            end = data.find(b"\n")
            if end < 0:
                return data
            out, data, committed = data[: end + 1], data[end + 1 :], False
        if self._held:
            data = self._held + data
        cut = data.rfind(b"\n") + 1
        body, rest = data[:cut], data[cut:]
        if len(rest) > _HOLD_LIMIT:
            body, rest, committed = data, b"", True
        if self.shown >= 0 and _MARKER in body:
            body = self._thin(body)
        self._held, self._committed = rest, committed
        return out + body

    def release(self) -> bytes:
        """The held partial line, unfiltered (the writer went quiet or the cell ends); its rest will pass too."""
        held, self._held = self._held, b""
        self._committed = self._committed or bool(held)
        return held

    def summary(self) -> str:
        """One line per site whose lines were hidden since the last summary; counting starts again."""
        lines = []
        for tally in self._counts.values():
            hidden, site = tally.hidden, tally.label
            if hidden:
                lines.append(
                    MORE_LINES.format(
                        prefix=PREFIX,
                        count=f"{hidden:,}",
                        lines="line" if hidden == 1 else "lines",
                        site=site,
                        were="was" if hidden == 1 else "were",
                    )
                )
        self._counts = {}
        return "".join(lines)

    def _thin(self, body: bytes) -> bytes:
        """``body`` (whole lines) without the lines of sites already shown ``shown`` times."""
        kept: list[bytes] = []
        start = 0  # body[start:] is not decided yet
        pos = body.find(_MARKER)
        while pos >= 0:
            line_start = body.rfind(b"\n", 0, pos) + 1
            line_end = body.find(b"\n", pos) + 1  # body ends with a newline, so this is > 0
            if self._hides(body[line_start : line_end - 1]):
                kept.append(body[start:line_start])
                start = line_end
            pos = body.find(_MARKER, line_end)
        if start == 0:
            return body
        kept.append(body[start:])
        return b"".join(kept)

    def _hides(self, line: bytes) -> bool:
        if len(line) > _LINE_LIMIT:
            return False
        key = _PER_THREAD.sub(b"", line)
        try:  # one lookup, as dict.get was
            found = self._cache[key]
        except KeyError:
            found = self._classify(line.decode("utf-8", "replace"))
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[key] = found
        if found is None:
            return False
        site, label = found
        entry = self._counts.get(site)
        if entry is None:
            entry = self._counts[site] = _Tally(label)
        if entry.shown < self.shown:
            entry.shown += 1
            return False
        entry.hidden += 1
        return True
