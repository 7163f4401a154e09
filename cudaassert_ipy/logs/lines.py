"""Pick the lines of a big log that can matter before any regex runs.

A 100 MB training log is mostly progress bars and metrics. Only lines holding a record marker
(``ssert``, ``: block: [``, ``` failed``, a trap's ``Calling `trap;```) or an error word
(``rror``/``RROR``) go on to the parsers, in their original order. A record a console wrapped keeps
its other pieces: the lines around any line that holds only part of a record (a marker without the
closing ``` failed``, or a head with no path: the path was wrapped onto the line before).
"""

from __future__ import annotations

__all__ = ["interesting"]

_WRAP = 4  # pieces of one wrapped record kept on each side (a THC signature wraps 4 times at 80 columns)


def interesting(text: str) -> str:
    """The lines of ``text`` that hold a record marker or an error word (and wrapped pieces), joined by newlines."""
    lines = text.splitlines()
    # the markers written inline (no call per line: a 10 MB paste has 200k lines); the error words first, they
    # are the most common; "` failed" and "`trap;`" behind their backtick
    keep = [
        i
        for i, line in enumerate(lines)
        if "rror" in line
        or "ssert" in line
        or "RROR" in line
        or ": block: [" in line
        or ("`" in line and ("` failed" in line or "`trap;`" in line))
    ]
    extra: set[int] = set()
    for i in keep:
        line = lines[i]
        k = line.find(": block: [")
        # whole: the marker, the closing "` failed", and a path before the marker (a wrapped head has none);
        # written inline: this runs once per assertion line of a 100 MB log
        whole = (
            k > 0
            and "` failed" in line
            and (
                line.find("/", 0, k) >= 0
                or line.find("\\", 0, k) >= 0
                or line.find("unknown", 0, k) >= 0
                or line.find("<frozen", 0, k) >= 0
            )
        )
        if not whole and ("ssertion" in line or k >= 0 or "` failed" in line or "`trap;`" in line):
            extra.update(range(max(0, i - _WRAP), min(len(lines), i + 1 + _WRAP)))
    if extra:
        keep = sorted(extra.union(keep))
    return "\n".join([lines[i] for i in keep])
