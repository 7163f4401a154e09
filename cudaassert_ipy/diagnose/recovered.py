"""Conditions recovered from spliced assertion lines: only whole catalogued conditions count.

When several processes write into one stream, a condition can come back with another writer's
text inside or around it (``... && "index out of bounds",0,0``). A fragment that contains a whole
catalogued condition names that assert for sure; its location is lost, so it becomes a site with
no file. Anything else is reported as unreadable, never as a site.
"""

from __future__ import annotations

from typing import Iterable

from cudaassert_ipy.capture.assert_lines import AssertLine, AssertSite, Orphan
from cudaassert_ipy.capture.assert_records import NO_DIM
from cudaassert_ipy.diagnose.causes import all_causes

__all__ = ["recover"]


def _known_conditions() -> list[str]:
    """Every catalogued condition, longest first, so the most specific one wins."""
    conditions = {c for cause in all_causes() for c in cause.conditions if len(c) >= 8}
    return sorted(conditions, key=len, reverse=True)


def recover(orphans: Iterable[Orphan],
            known_sites: Iterable[AssertSite] = ()) -> tuple[list[AssertSite], list[Orphan], int]:
    """Sites (file ``""``) for fragments holding a whole catalogued condition, the fragments left unread, and
    how many fragments only repeat a condition already read whole elsewhere (``known_sites``)."""
    already = {s.condition for s in known_sites}
    conditions = _known_conditions()
    found: dict[str, list[Orphan]] = {}
    unread: list[Orphan] = []
    repeats = 0
    for orphan in orphans:
        match = next((c for c in conditions if c in orphan.fragment), None)
        if match is None:
            unread.append(orphan)
        elif match in already:
            repeats += 1
        else:
            found.setdefault(match, []).append(orphan)
    sites = []
    for condition, parts in found.items():
        first = AssertLine("", "", 0, None, NO_DIM, NO_DIM, condition, None, False, parts[0].raw)
        sites.append(AssertSite("", 0, None, condition, None, len(parts), 0, 0, first))
    return sites, unread, repeats
