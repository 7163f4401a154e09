"""Small wording helpers every layer shares, so each exists once: the prefix, plurals, one-line errors.

Standard library only: the startup path, the script runner and the log explainer import it bare.
"""

from __future__ import annotations

from collections.abc import Container

__all__ = ["PREFIX", "error_line", "is_cell_filename", "plural"]

PREFIX = "[cudaassert]"


def plural(n: int, noun: str) -> str:
    """``1 thread``, ``64 threads``."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


def error_line(error: BaseException, message: str | None = None) -> str:
    """``TypeName: first line of the message``, as IPython prints it (no trailing ``: `` when empty)."""
    text = str(error) if message is None else message
    head = (text.strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: {head}".rstrip(": ")


def is_cell_filename(filename: str, cell_files: Container[str] = ()) -> bool:
    """Whether ``filename`` names a notebook cell: IPython 7 ``<ipython-input-..>``, IPython 8+ ``<cell ..>``,
    ipykernel's ``/tmp/ipykernel_<pid>/<hash>.py``, or a name IPython's compiler registered (``cell_files``)."""
    if filename.startswith(("<ipython-input-", "<cell")):
        return True
    if cell_files and filename in cell_files:
        return True
    return "/ipykernel_" in filename.replace("\\", "/")
