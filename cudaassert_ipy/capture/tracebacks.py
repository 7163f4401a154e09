"""The frames of a printed traceback, read back from text: what a pasted report holds instead of the kernel's line.

People paste the traceback, not the server log: the frames (file, function, the source line printed under them)
are often all the evidence there is. Four printed forms are read:

- Python's own: ``File "/x/modeling_bert.py", line 202, in forward`` and the source line under it (a paste that
  begins mid-line keeps ``"/x/modeling_bert.py", line 202, in forward``);
- IPython 8+: ``File /x/modeling_bert.py:202, in BertEmbeddings.forward(self, ...)`` and a numbered excerpt whose
  ``-->`` line is the one that ran (``Cell In[5], line 3`` for a cell);
- IPython 7 (Colab and Kaggle pin it): ``/x/modeling_bert.py in forward(self, ...)`` and the same excerpt;
- the same lines behind a launcher's prefix (``[rank0]:``, ``(VllmWorker rank=1 pid=7)``), colour codes removed;
- a frame line whose start was cut off by the paste (``line 306, in build_targets``): no path, the rest stands.

Standard library only: the log explainer and the live path both read frames through this one reader.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Frame", "frames_in_text"]

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_PY = re.compile(r'(?:File "|^"?)(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>[\w<>.\-]+)')
_IPY8 = re.compile(r"File (?P<path>\S[^:\n]*?):(?P<line>\d+), in (?P<func>[\w<>.]+)(?:\(|$)")
_IPY8_CELL = re.compile(r"(?P<path>Cell In ?\[\d*\]), line (?P<line>\d+)(?:, in (?P<func>[\w<>.]+))?")
_IPY7 = re.compile(r"^(?P<path>(?:/|[A-Za-z]:\\|~/|<ipython-input-)\S*?(?:\.py|>)) in (?P<func>[\w<>.]+)(?:\(|$)")
_CUT = re.compile(r"^line (?P<line>\d+), in (?P<func>[\w<>.\-]+)$")  # a frame line whose ``File "..."`` was cut off
_ARROW = re.compile(r"^\s*-+>\s*(?P<line>\d+)\s?(?P<code>.*)$")
_NUMBERED = re.compile(r"^\s*\d+\s")
_CARETS = re.compile(r"^[\s~^]+$")
_SCAN_LIMIT = 200_000  # frames are read from the start and the end of huge texts only: tracebacks sit there


@dataclass(frozen=True)
class Frame:
    """One printed frame: its file as printed, line, function (``Class.method`` when IPython 8 says so), code."""

    path: str
    line: int
    func: str
    code: str = ""
    block: int = 0  # which traceback of the text (0: the first printed; chained errors print several)

    @property
    def norm_path(self) -> str:
        """The path with forward slashes, for matching (Windows builds print backslashes)."""
        return self.path.replace("\\", "/")


def _strip_prefix(line: str) -> str:
    """The line without colour codes and a launcher's prefix in front of ``File``/``Traceback``."""
    line = _ANSI.sub("", line).rstrip("\r")
    for mark in ('File "', "File ", "Traceback (", "Cell In"):
        i = line.find(mark)
        if i > 0 and line[:i].strip() and not line[:i].strip().startswith("#"):
            head = line[:i]
            if head.rstrip().endswith((":", ")", "]", "|", "│")) or head.strip() == "":
                return line[i:]
    return line


def _code_after(lines: list[str], i: int) -> str:
    """The source line Python prints under a ``File`` line (empty when the source was not available)."""
    j = i + 1
    while j < len(lines):
        text = _strip_prefix(lines[j]).strip()
        if not text or _CARETS.match(text):
            j += 1
            continue
        if text.startswith(("File ", "Traceback", "During handling", "The above exception")) or _PY.search(text):
            return ""
        return text
    return ""


def _arrow_after(lines: list[str], i: int, limit: int = 40) -> tuple[int | None, str]:
    """The ``-->`` line of IPython's numbered excerpt under a frame header."""
    for j in range(i + 1, min(len(lines), i + 1 + limit)):
        text = _ANSI.sub("", lines[j])
        m = _ARROW.match(text)
        if m is not None:
            return int(m.group("line")), m.group("code").strip()
        if j > i + 1 and not text.strip():
            continue
        if not _NUMBERED.match(text) and text.strip() and not text.strip().startswith(("...", "[...")):
            return None, ""
    return None, ""


_FILE_TAIL = re.compile(r'^[^"\s]*", line \d+, in ')
_FRAGMENT = re.compile(r"^[\w<>]{1,40}$")
_PY_TAIL = re.compile(r'", line \d+, in [\w<>.\-]')  # what follows a path's closing quote in a ``_PY`` match
_NAME_END = re.compile(r"[\w<>]+$")


def _gains_py(text: str, pairs: list[tuple[int, int]]) -> bool:
    """Whether ``_PY`` matches ``text`` with its path closed by one of ``pairs``' quotes (``(quote, the quote
    before it)``): the path runs from just after the quote before, behind ``File "``, or from the start."""
    for quote, before in pairs:
        if _PY_TAIL.match(text, quote) is None:
            continue
        if before >= 5 and _PY.match(text, before - 5) is not None:
            return True
        if before <= 0 and _PY.match(text) is not None:
            return True
    return False


def _unwrap(lines: list[str]) -> list[str]:
    """Frame lines a console or a paste wrapped, joined again: ``File "/a/b/mod`` + ``el.py", line 3, in f``,
    ``..., in _make_causal_m`` + ``ask``.

    What the join test asks of the line being joined (a ``File "`` whose path no quote closed yet, ``File "[^"]*$``,
    and no whole ``_PY`` frame) is kept up to date as pieces are added: searching the whole joined text for every
    piece made a paste with an unclosed ``File "`` quadratic. A ``_PY`` match the text gains ends in the added
    piece, so the quote closing its path is the text's last quote or one of the piece's.
    """
    out: list[str] = []
    text = ""
    q1 = q2 = -1  # the last quote of ``text`` and the one before it
    py: bool | None = None  # whether ``_PY`` matches ``text`` (None: not asked yet)
    for n, line in enumerate(lines):
        join = False
        if n:
            if _FILE_TAIL.match(line):
                join = True
            elif q1 >= 5 and text.startswith('File "', q1 - 5):  # ``File "[^"]*$`` searched in ``text``
                if py is None:
                    py = _PY.search(text) is not None
                join = not py
            if not join and _FRAGMENT.match(line):
                k = text.rfind(", in ")  # ``, in [\w<>]+$`` can only match at the last ``, in ``
                join = k >= 0 and _NAME_END.match(text, k + 5) is not None
        if not join:
            if n:
                out.append(text)
            text, py = line, None
            q1 = line.rfind('"')
            q2 = line.rfind('"', 0, q1) if q1 > 0 else -1
            continue
        if text.endswith(("\r", "\n")):
            text = text.rstrip("\r\n")
        start = len(text)
        text += line
        pairs = [(q1, q2)] if q1 >= 0 else []
        i = line.find('"')
        while i >= 0:
            q1, q2 = start + i, q1
            pairs.append((q1, q2))
            i = line.find('"', i + 1)
        if py is False:
            py = _gains_py(text, pairs)
    if lines:
        out.append(text)
    return out


def _window(text: str) -> str:
    if len(text) <= 2 * _SCAN_LIMIT:
        return text
    return text[:_SCAN_LIMIT] + "\n" + text[-_SCAN_LIMIT:]


def frames_in_text(text: str) -> tuple[Frame, ...]:
    """Every frame printed in ``text``, outermost first within each traceback, tracebacks in printed order."""
    if "File" not in text and " in " not in text:
        return ()
    lines = _unwrap(_window(text).splitlines())
    out: list[Frame] = []
    block = 0
    seen_frame = False
    for i, raw in enumerate(lines):
        line = _strip_prefix(raw)
        stripped = line.strip()
        if stripped.startswith(("Traceback (most recent call last)", "During handling of", "The above exception")):
            if seen_frame:
                block += 1
                seen_frame = False
            continue
        m = _PY.search(stripped)
        if m is not None and (stripped.startswith("File") or m.start() == 0):
            out.append(Frame(m.group("path"), int(m.group("line")), m.group("func"), _code_after(lines, i), block))
            seen_frame = True
            continue
        mcut = _CUT.match(stripped)
        if mcut is not None:  # the paste began mid-line: the function and its source line still tell
            out.append(Frame("", int(mcut.group("line")), mcut.group("func"), _code_after(lines, i), block))
            seen_frame = True
            continue
        m8 = _IPY8.match(stripped) if stripped.startswith("File ") else None
        if m8 is not None:
            n, code = _arrow_after(lines, i)
            out.append(Frame(m8.group("path"), n or int(m8.group("line")), m8.group("func"), code, block))
            seen_frame = True
            continue
        mc = _IPY8_CELL.match(stripped)
        if mc is not None:
            n, code = _arrow_after(lines, i)
            out.append(Frame(mc.group("path"), n or int(mc.group("line")), mc.group("func") or "<module>", code, block))
            seen_frame = True
            continue
        m7 = _IPY7.match(stripped)
        if m7 is not None:
            n, code = _arrow_after(lines, i)
            out.append(Frame(m7.group("path"), n or 0, m7.group("func"), code, block))
            seen_frame = True
    return tuple(out)
