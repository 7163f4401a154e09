"""An :class:`~cudaassert_ipy.logs.explain.Explanation` as text: a header, each rank's reports, what was unread.

Each diagnosis is rendered by :func:`cudaassert_ipy.view.report.to_text`, the same text a notebook shows.
"""

from __future__ import annotations

from cudaassert_ipy.base.wording import PREFIX, plural
from cudaassert_ipy.logs.explain import Explanation
from cudaassert_ipy.view.report import to_text

__all__ = ["NOTHING_FOUND", "render"]

HEADER = "{prefix} {source}: {sites}, {errors}{ranks}."
RANKS = "; grouped by rank ({labels})"
GROUP = "=== {label} ==="
UNTAGGED = "no rank tag"
NOTHING_FOUND = "{prefix} {source}: no kernel assertion line and no CUDA error found."
REPAIRED = "Read through paste damage: {repairs}."
SPLICED = (
    "Could not be read: {count} assertion fragment(s) cut and spliced by processes writing at once, with no "
    "whole known condition in them; first: {first}"
)
UNREADABLE = "Could not be read: {count} line(s) with part of an assertion record (cut off); first: {first}"
_SHOWN = 200  # characters of an unreadable line that are quoted


def _quote(line: str) -> str:
    line = line.strip()
    return line if len(line) <= _SHOWN else line[:_SHOWN] + "..."


def render(ex: Explanation) -> str:
    """The whole explanation as plain text."""
    if not ex.found:
        lines = [NOTHING_FOUND.format(prefix=PREFIX, source=ex.source)]
    else:
        labels = [g.label for g in ex.groups]
        tagged = any(label is not None for label in labels)
        ranks = RANKS.format(labels=", ".join(label or UNTAGGED for label in labels)) if tagged else ""
        lines = [
            HEADER.format(
                prefix=PREFIX,
                source=ex.source,
                sites=plural(ex.sites, "assertion site"),
                errors=plural(ex.errors, "CUDA error"),
                ranks=ranks,
            )
        ]
        for group in ex.groups:
            if tagged:
                lines += ["", GROUP.format(label=group.label or UNTAGGED)]
            for d in group.diagnoses:
                lines += ["", to_text(d)]
    extra = []
    if ex.repairs:
        extra.append(REPAIRED.format(repairs=", ".join(ex.repairs)))
    if ex.spliced:
        extra.append(SPLICED.format(count=len(ex.spliced), first=_quote(ex.spliced[0].raw)))
    if ex.unreadable:
        extra.append(UNREADABLE.format(count=len(ex.unreadable), first=_quote(ex.unreadable[0])))
    if extra:
        lines += ["", *extra]
    return "\n".join(lines)
