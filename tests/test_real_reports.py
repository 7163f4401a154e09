"""The real-report corpus keeps its scores: a report that is explained right today stays right.

The figures are printed by ``python benchmarks/bench_reports.py`` (per framework, dev part and held-out quarter).
Here each part's misses are pinned as sets: a change that makes one more report miss its cause, its fix in the
framework's words, or fall back to the generic answer fails, naming the report; a change that fixes one asks
for its id to leave the set (so the figures in the README move with it).
"""

from __future__ import annotations

import pytest
from helpers.real_reports import load, score, split

# The reports each part misses today, by what they miss (benchmarks/bench_reports.py --misses says why).
MISSES: dict[str, dict[str, frozenset[str]]] = {}


def _scores(part: str) -> list:
    parts = split()
    return [score(r) for r in load() if parts[r.id] == part]


def test_every_report_is_in_the_split_and_well_formed() -> None:
    parts = split()
    reports = load()
    assert len(reports) >= 80
    assert {r.id for r in reports} == set(parts)
    for r in reports:
        assert r.url.startswith("https://"), r.id
        assert r.text.strip() and r.fix_words, r.id
    held = sum(1 for v in parts.values() if v == "held_out")
    assert held >= len(parts) // 4 - 2  # a quarter of each batch, rounded up


@pytest.mark.parametrize("part", ["dev", "held_out"])
def test_no_report_regresses(part: str) -> None:
    scores = _scores(part)
    pinned = MISSES[part]
    now = {
        "cause": frozenset(s.id for s in scores if not s.cause_right),
        "fix": frozenset(s.id for s in scores if not s.fix_right),
        "generic": frozenset(s.id for s in scores if s.generic),
    }
    for what in now:
        worse = now[what] - pinned[what]
        better = pinned[what] - now[what]
        assert not worse, f"{part}: now missing the {what}: {sorted(worse)}"
        assert not better, f"{part}: now right ({what}); remove from MISSES: {sorted(better)}"
