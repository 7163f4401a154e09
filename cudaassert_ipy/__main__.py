"""``python -m cudaassert_ipy``: ``explain LOG`` explains a saved log; anything else runs a script (the runner).

``explain`` is a subcommand word; any other first argument is a script (or ``-m module``) for the runner.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["explain"]:
        from cudaassert_ipy.logs.cli import main as explain_main

        return explain_main(args[1:])
    from cudaassert_ipy.run.cli import main as run_main

    return run_main(args)


if __name__ == "__main__":
    sys.exit(main())
