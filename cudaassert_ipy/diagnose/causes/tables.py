"""Write the catalogue's tables into the README (a summary by family) and docs/causes.md (every text).

    python -m cudaassert_ipy.diagnose.causes.tables [REPOSITORY]

Run from a checkout after changing the catalogue; ``tests/test_causes.py`` fails while a table is stale.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from cudaassert_ipy.diagnose.causes import catalogue_table, summary_table

__all__ = ["main", "replace_block"]

MARKER = "causes-table"


def replace_block(text: str, table: str, name: str = MARKER) -> str:
    """``text`` with the lines between its ``<!-- name:start -->`` and ``<!-- name:end -->`` markers replaced."""
    pattern = re.compile(rf"(<!-- {name}:start -->\n)(?:.*?\n)?(<!-- {name}:end -->)", re.S)
    if not pattern.search(text):
        raise ValueError(f"no {name} markers")
    return pattern.sub(lambda m: m.group(1) + table + "\n" + m.group(2), text, count=1)


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else Path.cwd()
    for relative, table in (("README.md", summary_table()), ("docs/causes.md", catalogue_table())):
        path = root / relative
        path.write_text(replace_block(path.read_text(encoding="utf-8"), table), encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
