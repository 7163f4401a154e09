"""``python -m cudaassert_ipy explain LOG``: explain a saved log (``-`` reads stdin).

Exit status: 0 when something was explained, 1 when nothing was found, 2 for a usage error
(one line on stderr that says what to do).
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from cudaassert_ipy.base.wording import PREFIX

__all__ = [
    "NO_FILE",
    "PASTED",
    "LogUnreadable",
    "explain_file",
    "explain_for_magic",
    "explain_pasted",
    "main",
    "read_log",
]

USAGE = "python -m cudaassert_ipy explain LOG   (LOG: a saved log file, or - for stdin)"
NO_FILE = "{prefix} explain: cannot read {path}: {reason}. Give the path of a saved log, or - to read stdin."
PASTED = "the pasted text"
MAGIC_NO_FILE = (
    "Cannot read {path}: {reason}. Give the path of a saved log file, e.g. `%cudaassert explain --log train.log`; "
    "for text you copied, paste it into a cell under %%cudaassert_explain."
)
MAGIC_STDIN = (
    "`--log -` would wait for stdin, which a notebook does not have: paste the text under %%cudaassert_explain."
)
IS_DIR = "{prefix} explain: {path} is a directory. Give the path of a saved log file in it."


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, then status 2 (argparse's own status for usage errors)
        print(f"{PREFIX} explain: {message}. Usage: {USAGE}", file=sys.stderr)
        raise SystemExit(2)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m cudaassert_ipy explain",
        usage=USAGE,
        description="Explain every kernel assertion and CUDA error in a saved log, grouped by rank.",
    )
    p.add_argument(
        "log",
        help="a saved log: a Kaggle 'Save Version' log, a torchrun or SLURM log, text copied "
        "from a forum; - reads stdin",
    )
    return p


def read_log(path: str) -> str:
    """The log's text; undecodable bytes become U+FFFD so nothing stops the reading."""
    if path == "-":
        return sys.stdin.buffer.read().decode("utf-8", errors="replace")
    with open(path, "rb") as f:
        return f.read().decode("utf-8", errors="replace")


def explain_file(path: str) -> tuple[bool, str]:
    """Whether anything was found in the log at ``path``, and the explanation's text (OSError if unreadable)."""
    from cudaassert_ipy.logs.explain import explain_text
    from cudaassert_ipy.logs.render import render

    explanation = explain_text(read_log(path), source="stdin" if path == "-" else path)
    return explanation.found, render(explanation)


class LogUnreadable(ValueError):
    """The log named in the magic cannot be read; the message says what to do instead."""


def explain_for_magic(path: str) -> str:
    """``%cudaassert explain --log PATH``: the explanation's text, or LogUnreadable with a one-line fix."""
    if path == "-":
        raise LogUnreadable(MAGIC_STDIN)
    try:
        return explain_file(path)[1]
    except OSError as e:
        raise LogUnreadable(MAGIC_NO_FILE.format(path=path, reason=e.strerror or e)) from None


def explain_pasted(text: str) -> str:
    """The explanation of text pasted into a cell."""
    from cudaassert_ipy.logs.explain import explain_text
    from cudaassert_ipy.logs.render import render

    return render(explain_text(text, source=PASTED))


def main(argv: list[str]) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    try:
        found, text = explain_file(args.log)
    except IsADirectoryError:
        print(IS_DIR.format(prefix=PREFIX, path=args.log), file=sys.stderr)
        return 2
    except OSError as e:
        print(NO_FILE.format(prefix=PREFIX, path=args.log, reason=e.strerror or e), file=sys.stderr)
        return 2
    print(text)
    return 0 if found else 1
