"""``python -m cudaassert_ipy explain LOG``: explain a saved log (``-`` reads stdin).

Exit status: 0 when something was explained, 1 when nothing was found, 2 for a usage error
(one line on stderr that says what to do).
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from cudaassert_ipy.wording import PREFIX

__all__ = ["NO_FILE", "main", "read_log"]

USAGE = "python -m cudaassert_ipy explain LOG   (LOG: a saved log file, or - for stdin)"
NO_FILE = "{prefix} explain: cannot read {path}: {reason}. Give the path of a saved log, or - to read stdin."
IS_DIR = "{prefix} explain: {path} is a directory. Give the path of a saved log file in it."


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, then status 2 (argparse's own status for usage errors)
        print(f"{PREFIX} explain: {message}. Usage: {USAGE}", file=sys.stderr)
        raise SystemExit(2)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m cudaassert_ipy explain", usage=USAGE,
                description="Explain every kernel assertion and CUDA error in a saved log, grouped by rank.")
    p.add_argument("log", help="a saved log: a Kaggle 'Save Version' log, a torchrun or SLURM log, text copied "
                               "from a forum; - reads stdin")
    return p


def read_log(path: str) -> str:
    """The log's text; undecodable bytes become U+FFFD so nothing stops the reading."""
    if path == "-":
        return sys.stdin.buffer.read().decode("utf-8", errors="replace")
    with open(path, "rb") as f:
        return f.read().decode("utf-8", errors="replace")


def main(argv: list[str]) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    try:
        text = read_log(args.log)
    except IsADirectoryError:
        print(IS_DIR.format(prefix=PREFIX, path=args.log), file=sys.stderr)
        return 2
    except OSError as e:
        print(NO_FILE.format(prefix=PREFIX, path=args.log, reason=e.strerror or e), file=sys.stderr)
        return 2
    from cudaassert_ipy.logs.explain import explain_text
    from cudaassert_ipy.logs.render import render

    explanation = explain_text(text, source="stdin" if args.log == "-" else args.log)
    print(render(explanation))
    return 0 if explanation.found else 1
