"""Conditions recovered from spliced assertion lines: only whole catalogued conditions count.

When several processes write into one stream, a condition can come back with another writer's
text inside or around it (``... && "index out of bounds",0,0``). A fragment that contains a whole
catalogued condition names that assert for sure; its location is lost, so it becomes a site with
no file. A short condition (``false``, ``index >= 0``) says nothing on its own: it is recovered only
when its line still shows one of the catalogued kernel files that print it, and the site keeps that
file's name. Anything else is reported as unreadable, never as a site.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from cudaassert_ipy.capture.assert_lines import AssertLine, AssertSite, Orphan
from cudaassert_ipy.capture.assert_records import NO_DIM
from cudaassert_ipy.diagnose.causes import all_causes

__all__ = ["recover"]

_LONG = 8  # a catalogued condition this long names its assert alone


@lru_cache(maxsize=1)
def _known_conditions() -> tuple[list[str], dict[str, tuple[str, ...]]]:
    """Every long catalogued condition, longest first (the most specific wins), and for each short one the
    kernel files that print it."""
    long: set[str] = set()
    short: dict[str, set[str]] = {}
    for cause in all_causes():
        for c in cause.conditions:
            if len(c) >= _LONG:
                long.add(c)
            elif c:
                short.setdefault(c, set()).update(cause.file_names)
    return sorted(long, key=len, reverse=True), {c: tuple(sorted(f)) for c, f in short.items()}


def _stem_in(raw: str, names: tuple[str, ...]) -> str | None:
    """The catalogued file whose name (without extension: ROCm builds rename ``.cu``) the raw line shows."""
    for name in names:
        stem = name.rsplit(".", 1)[0]
        if re.search(r"(?<![\w-])" + re.escape(stem) + r"\.\w+:", raw):
            return name
    return None


def recover(
    orphans: Iterable[Orphan], known_sites: Iterable[AssertSite] = ()
) -> tuple[list[AssertSite], list[Orphan], int]:
    """Sites for fragments holding a whole catalogued condition (file ``""``, or the catalogued file a short
    condition's line shows), the fragments left unread, and how many fragments only repeat a condition already
    read whole elsewhere (``known_sites``)."""
    already = {s.condition for s in known_sites}
    conditions, short = _known_conditions()
    found: dict[tuple[str, str], list[Orphan]] = {}
    unread: list[Orphan] = []
    repeats = 0
    for orphan in orphans:
        match = next((c for c in conditions if c in orphan.fragment), None)
        file = ""
        if match is None and orphan.fragment in short:
            file = _stem_in(orphan.raw, short[orphan.fragment]) or ""
            match = orphan.fragment if file else None
        if match is None:
            unread.append(orphan)
        elif match in already:
            repeats += 1
        else:
            found.setdefault((match, file), []).append(orphan)
    sites = []
    for (condition, file), parts in found.items():
        first = AssertLine("", file, 0, None, NO_DIM, NO_DIM, condition, None, False, parts[0].raw)
        sites.append(AssertSite(file, 0, None, condition, None, len(parts), 0, 0, first))
    return sites, unread, repeats
