"""The frames of a printed traceback, read back from text: what a pasted report holds instead of the kernel's line.

People paste the traceback, not the server log: the frames (file, function, the source line printed under them)
are often all the evidence there is. Four printed forms are read:

- Python's own: ``File "/x/modeling_bert.py", line 202, in forward`` and the source line under it;
- IPython 8+: ``File /x/modeling_bert.py:202, in BertEmbeddings.forward(self, ...)`` and a numbered excerpt whose
  ``-->`` line is the one that ran (``Cell In[5], line 3`` for a cell);
- IPython 7 (Colab and Kaggle pin it): ``/x/modeling_bert.py in forward(self, ...)`` and the same excerpt;
- a first frame line whose ``File "..."`` the paste cut off (``line 306, in build_targets``);
- the same lines behind a launcher's prefix (``[rank0]:``, ``(VllmWorker rank=1 pid=7)``), colour codes removed.

Standard library only: the log explainer and the live path both read frames through this one reader.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Frame", "frames_in_text"]

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_PY = re.compile(r'(?:File "|^)(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>[\w<>.\-]+)')
_IPY8 = re.compile(r"File (?P<path>\S[^:\n]*?):(?P<line>\d+), in (?P<func>[\w<>.]+)(?:\(|$)")
_IPY8_CELL = re.compile(r"(?P<path>Cell In ?\[\d*\]), line (?P<line>\d+)(?:, in (?P<func>[\w<>.]+))?")
#: a paste that starts inside a frame line, its ``File "..."`` cut off: ``line 306, in build_targets``
_CUT = re.compile(r"^line (?P<line>\d+), in (?P<func>[\w<>.]+)$")
_IPY7 = re.compile(r"^(?P<path>(?:/|[A-Za-z]:\\|~/|<ipython-input-)\S*?(?:\.py|>)) in (?P<func>[\w<>.]+)(?:\(|$)")
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


_FILE_HEAD = re.compile(r'File "[^"]*$')
_FILE_TAIL = re.compile(r'^[^"\s]*", line \d+, in ')
_FRAGMENT = re.compile(r"^[\w<>]{1,40}$")


def _unwrap(lines: list[str]) -> list[str]:
    """Frame lines a console or a paste wrapped, joined again: ``File "/a/b/mod`` + ``el.py", line 3, in f``,
    ``..., in _make_causal_m`` + ``ask``."""
    out: list[str] = []
    for line in lines:
        if out and ((_FILE_HEAD.search(out[-1]) and not _PY.search(out[-1])) or _FILE_TAIL.match(line)):
            out[-1] = out[-1].rstrip("\r\n") + line
            continue
        if out and _FRAGMENT.match(line) and re.search(r", in [\w<>]+$", out[-1]):
            out[-1] += line
            continue
        out.append(line)
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
    first = next((i for i, raw in enumerate(lines) if raw.strip()), -1)
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
        m8 = _IPY8.match(stripped) if stripped.startswith("File ") else None
        if m8 is not None:
            n, code = _arrow_after(lines, i)
            out.append(Frame(m8.group("path"), n or int(m8.group("line")), m8.group("func"), code, block))
            seen_frame = True
            continue
        mc = _IPY8_CELL.match(stripped)
        if mc is not None:
            n, code = _arrow_after(lines, i)
            out.append(Frame(mc.group("path"), n or int(mc.group("line")), mc.group("func") or "<module>", code,
                             block))
            seen_frame = True
            continue
        mcut = _CUT.match(stripped) if i == first else None
        if mcut is not None:
            out.append(Frame("", int(mcut.group("line")), mcut.group("func"), _code_after(lines, i), block))
            seen_frame = True
            continue
        m7 = _IPY7.match(stripped)
        if m7 is not None:
            n, code = _arrow_after(lines, i)
            out.append(Frame(m7.group("path"), n or 0, m7.group("func"), code, block))
            seen_frame = True
    return tuple(out)
