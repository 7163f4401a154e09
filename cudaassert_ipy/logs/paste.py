"""Undo the damage pasting does to a log: markdown, quote marks, links, HTML entities.

Text copied from a forum or an issue is messier than a live stream: a renderer ate the
backticks (or the writer doubled them), ``>`` quote marks sit in front of every line, a path
became ``[path](url)``, ``&&`` became ``&amp;&amp;``, a line number or a drive letter went
missing. Each repair runs only when its marker is in the text, and says what it did, so the
explanation can tell the user what it read through.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

__all__ = ["Repaired", "repair"]

_LINK = re.compile(r"\[([^\]\n]{1,400})\]\((?:https?://|file:|vscode|/)[^)\s]{0,800}\)")
_QUOTE = re.compile(r"^(?:[ \t]*>)+[ \t]?", re.MULTILINE)
_ENTITY = re.compile(r"&(?:amp|lt|gt|quot|#39|#x27|#96);")
_RECORD_DIMS = r"block: \[[\d, ]+\], thread: \[[\d, ]+\]:? Assertion "
# "Assertion t >= 0 && t < n_classes failed." (backticks eaten by a markdown renderer)
_NO_TICKS = re.compile(r"(" + _RECORD_DIMS + r")(?![`'])(?!failed: )(?:([^\n]+?) | )failed\.")
_DOUBLED = re.compile(r"``([^\n]+?)``")
_DOUBLED_EMPTY = re.compile(r"(Assertion )````( failed)")  # an empty condition, its backticks doubled
# "Loss.cu: nll_loss_forward_reduce_cuda_kernel_2d: block: [" (the line number is gone)
_NO_LINE = re.compile(r"(\.(?:cuh|cu|hip|h|py))(: (?:[^:\n\[\]]{1,300}: )?block: \[)")

# "Assertion 'srcIndex < srcSelectDimSize' failed" quoted inline, without the kernel's record (file, block, thread);
# the look-behind comes after the word, so the search skips to each "Assertion" (5x cheaper on a large paste)
_BARE = re.compile(r"Assertion(?<!\] Assertion)\s+[`'\"‘’“”]+(?P<cond>[^`'‘’\n]{3,300}?)[`'‘’“”]+\s+failed")

LOST_LINE = 0  # the line number given to a record whose number was lost


@dataclass
class Repaired:
    """The repaired text, and one phrase per kind of damage read through (with counts)."""

    text: str
    repairs: list[str] = field(default_factory=list)


def _sub(pattern: re.Pattern[str], repl: str, text: str, what: str, out: list[str]) -> str:
    new, n = pattern.subn(repl, text)
    if n:
        out.append(f"{what} ({n})")
    return new


def repair(text: str) -> Repaired:
    """Undo markdown and paste damage around kernel assertion lines and error lines.

    Each repair runs only when its marker is in the text: call it on the lines that matter (see
    :func:`cudaassert_ipy.logs.lines.interesting`), not on a whole 100 MB log.
    """
    done: list[str] = []
    if "](" in text:
        text = _sub(_LINK, r"\1", text, "link markup around paths", done)
    if (text.startswith((">", " >")) or "\n>" in text or "\n >" in text) and _QUOTE.search(text):
        text = _sub(_QUOTE, "", text, "quote marks", done)
    if "&" in text and _ENTITY.search(text):
        n = len(_ENTITY.findall(text))
        text = html.unescape(text)
        done.append(f"HTML entities ({n})")
    if "``" in text:
        text = _sub(_DOUBLED_EMPTY, r"\1``\2", text, "doubled backticks around an empty condition", done)
        text = _sub(_DOUBLED, r"`\1`", text, "doubled backticks", done)
    if "] Assertion " in text and text.count("] Assertion ") > text.count("] Assertion `") + text.count(
        "] Assertion failed: `"
    ):
        text = _sub(_NO_TICKS, r"\1`\2` failed.", text, "conditions without backticks", done)
    if "Assertion" in text and _BARE.search(text):
        text = _sub(
            _BARE,
            r"\nunknown: block: [0,0,0], thread: [0,0,0] Assertion `\g<cond>` failed.\n",
            text,
            "an assertion quoted without its kernel's record",
            done,
        )
    if ": block: [" in text and _NO_LINE.search(text):
        text = _sub(_NO_LINE, r"\1:" + str(LOST_LINE) + r"\2", text, "records without a line number", done)
    return Repaired(text, done)
