"""Add gathered real reports to the corpus (tests/data/real_reports/) and hold back a random quarter of them.

    python scripts/add_reports.py DIR [DIR ...]

Each DIR holds one JSON file per report (fields: url, framework, text, resolution, cause, fix_words, notes).
A file whose URL is already in the corpus is skipped. Of the reports added in one run, a quarter (rounded up),
drawn with the operating system's randomness, goes to ``held_out`` in split.json: they are scored only at the
end, never read while rules are written. Bad input is named with what to fix, and nothing is written then.
"""

from __future__ import annotations

import json
import math
import random
import re
import sys
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "data" / "real_reports"
SPLIT = CORPUS / "split.json"
FIELDS = ("url", "framework", "text", "resolution", "cause", "fix_words")
SLUG = re.compile(r"^[a-z0-9][a-z0-9_\-]*$")


def main(dirs: list[str]) -> int:
    if not dirs:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    split = json.loads(SPLIT.read_text()) if SPLIT.exists() else {"dev": [], "held_out": []}
    known = {json.loads(p.read_text())["url"] for p in CORPUS.glob("*.json") if p != SPLIT}
    new: dict[str, dict[str, object]] = {}
    problems = []
    for folder in dirs:
        for path in sorted(Path(folder).glob("*.json")):
            try:
                raw = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as e:
                problems.append(f"{path}: not readable JSON ({e})")
                continue
            missing = [f for f in FIELDS if not raw.get(f)]
            rid = path.stem.replace("__", "-").lower()
            if missing or not SLUG.match(rid):
                problems.append(f"{path}: missing {', '.join(missing) or 'nothing'}; id {rid!r}")
                continue
            if raw["url"] in known or rid in new or (CORPUS / f"{rid}.json").exists():
                continue
            known.add(raw["url"])
            new[rid] = raw
    if problems:
        print("Nothing added; fix these files first:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 2
    ids = sorted(new)
    held = set(random.SystemRandom().sample(ids, math.ceil(len(ids) / 4))) if ids else set()
    for rid in ids:
        (CORPUS / f"{rid}.json").write_text(json.dumps(new[rid], indent=1, ensure_ascii=False) + "\n")
        split["held_out" if rid in held else "dev"].append(rid)
    split = {k: sorted(v) for k, v in split.items()}
    SPLIT.write_text(json.dumps(split, indent=1) + "\n")
    print(
        f"added {len(ids)} reports ({len(held)} held out); corpus: {len(split['dev'])} dev, "
        f"{len(split['held_out'])} held out"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
