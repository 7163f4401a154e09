"""Pick the lines of a big log that can matter before any regex runs.

A 100 MB training log is mostly progress bars and metrics. Only lines holding a record marker
(``ssert``, ``: block: [``, ``` failed``) or an error word (``rror``/``RROR``) go on to the
parsers, in their original order, so console-wrapped halves of one record stay next to each other.
"""

from __future__ import annotations

__all__ = ["interesting"]


def interesting(text: str) -> str:
    """The lines of ``text`` that hold a record marker or an error word, joined by newlines."""
    return "\n".join([line for line in text.splitlines()
                      if "ssert" in line or "rror" in line or "RROR" in line or ": block: [" in line
                      or "` failed" in line])
