"""Score the explainer on the corpus of real public reports (tests/data/real_reports/); prints one table a part.

    python benchmarks/bench_reports.py [--part dev|held_out|all] [--misses]

Per framework: reports, causes right, fixes in the framework's words, generic answers; the dev part (what the
rules were written against) and the held-out quarter (drawn at random when the reports were added, scored only)
side by side. Goals (held-out): right cause >= 90%, fix in the framework's words >= 80%, generic <= 5%.
``--misses`` lists each report that misses, with what the diagnosis named.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from helpers.real_reports import Score, load, score, split


def _pct(n: int, total: int) -> str:
    return f"{n:>3}/{total:<3} {100 * n / total:5.1f}%" if total else "   -        "


def table(scores: list[Score], title: str) -> str:
    rows = defaultdict(list)
    for s in scores:
        rows[s.framework].append(s)
    lines = [
        f"== {title}: {len(scores)} reports",
        f"{'framework':<22} {'n':>4}  {'cause right':<14} {'fix in its words':<14} {'generic':<14}",
    ]
    for fw in [*sorted(rows, key=lambda k: (-len(rows[k]), k)), "ALL"]:
        group = scores if fw == "ALL" else rows[fw]
        n = len(group)
        lines.append(
            f"{fw:<22} {n:>4}  {_pct(sum(s.cause_right for s in group), n):<14} "
            f"{_pct(sum(s.fix_right for s in group), n):<14} {_pct(sum(s.generic for s in group), n):<14}"
        )
    return "\n".join(lines)


def markdown(scores: dict[str, list[Score]]) -> str:
    """Per framework: reports, right cause, fix in its words, generic; the dev part / the held-out quarter."""

    def cell(group: list[Score], what: str) -> str:
        n = len(group)
        return f"{sum(getattr(s, what) for s in group)}/{n}" if n else "-"

    frameworks = sorted(
        {s.framework for part in scores.values() for s in part},
        key=lambda fw: (-sum(s.framework == fw for p in scores.values() for s in p), fw),
    )
    lines = [
        "| framework | reports (dev + held out) | right cause | fix in its words | generic |",
        "|---|---|---|---|---|",
    ]
    for fw in [*frameworks, "all"]:
        parts = {k: [s for s in v if fw in ("all", s.framework)] for k, v in scores.items()}
        dev, held = parts["dev"], parts["held_out"]
        row = [f"{len(dev)} + {len(held)}"] + [
            f"{cell(dev, w)} · {cell(held, w)}" for w in ("cause_right", "fix_right", "generic")
        ]
        name = f"**{fw}**" if fw == "all" else fw
        lines.append(f"| {name} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("dev", "held_out", "all"), default="all")
    ap.add_argument("--misses", action="store_true")
    ap.add_argument("--markdown", action="store_true", help="the README's table: per framework, both parts")
    args = ap.parse_args()
    parts = split()
    reports = load()
    unsplit = [r.id for r in reports if r.id not in parts]
    if unsplit:
        print(f"not in split.json (add reports with scripts/add_reports.py): {', '.join(unsplit)}", file=sys.stderr)
        return 2
    if args.markdown:
        print(markdown({part: [score(r) for r in reports if parts[r.id] == part] for part in ("dev", "held_out")}))
        return 0
    wanted = ("dev", "held_out") if args.part == "all" else (args.part,)
    start, cpu = time.perf_counter(), time.process_time()
    for part in wanted:
        chosen = [r for r in reports if parts[r.id] == part]
        scores = [score(r) for r in chosen]
        print(table(scores, part))
        if args.misses:
            by_id = {r.id: r for r in chosen}
            for s in scores:
                if not (s.cause_right and s.fix_right):
                    r = by_id[s.id]
                    print(
                        f"  miss {s.id}: want {r.cause} {list(r.fix_words)}, got {s.got or 'nothing'}"
                        f"{'' if s.cause_right else ' (cause)'}{'' if s.fix_right else ' (fix)'}"
                    )
        print()
    print(
        f"{len(reports)} reports explained in {time.perf_counter() - start:.2f} s wall, "
        f"{time.process_time() - cpu:.2f} s CPU"
    )
    _big_paste(reports)
    return 0


def _big_paste(reports: list, mb: int = 10) -> None:
    """A paste of ``mb`` MB (every report's text, then training output, repeated): explained and rendered."""
    from cudaassert_ipy.logs.explain import explain_text
    from cudaassert_ipy.logs.render import render

    chunk = "\n".join(r.text for r in reports) + "\n" + "epoch 1 step 10 loss 0.1234\n" * 2000
    text = (chunk * (mb * 2**20 // len(chunk) + 1))[: mb * 2**20]
    start, cpu = time.perf_counter(), time.process_time()
    render(explain_text(text, source="paste"))
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(
        f"a {mb} MB paste explained and rendered in {wall:.2f} s wall, {cpu:.2f} s CPU (goal <= 2 s; on a loaded "
        "machine the CPU time is the figure)"
    )


if __name__ == "__main__":
    raise SystemExit(main())
