"""Synthetic pastes for the explain tests: a printed traceback built from frames, and the first diagnosis of a text."""

from __future__ import annotations

from typing import Any

ASSERT = "RuntimeError: CUDA error: device-side assert triggered\n"


def trace(*frames: tuple[str, int, str, str], error: str = ASSERT) -> str:
    """Python's printed traceback of ``frames`` (path, line, function, source line), ending in ``error``."""
    body = "".join(f'  File "{p}", line {n}, in {f}\n    {c}\n' for p, n, f, c in frames)
    return "Traceback (most recent call last):\n" + body + error


def first(text: str) -> Any:
    """The first diagnosis ``python -m cudaassert_ipy explain`` makes of ``text``."""
    from cudaassert_ipy.logs.explain import explain_text

    return explain_text(text).groups[0].diagnoses[0]
