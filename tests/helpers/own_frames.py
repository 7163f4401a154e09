"""Python 3.10 keeps our wrappers' frames in some tracebacks: that failure, told apart from every other.

3.10 re-raises a bare ``raise`` with the traceback saved when the handler was entered, our entry included: in
process and in IPython (which prints "[... skipping hidden 1 frame]" for it) the frame stays; the runner and
``auto`` hide it (``hide_own_frames``). The tests that say "no frame of ours" are strict xfails there, and only
this failure (``OurFrameShown``) is the expected one: a crash, a wrong exception or another assertion still fails.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import pytest

__all__ = ["OURS", "PY310_KEEPS_OUR_FRAME", "OurFrameShown", "no_frame_of_ours"]

OURS = "cudaassert_ipy"
_HIDDEN = "skipping hidden"  # IPython's "[... skipping hidden 1 frame]" for a frame it hides (one of ours)


class OurFrameShown(AssertionError):
    """A traceback the user sees holds a frame of ours (or IPython's mark for one it hid)."""


PY310_KEEPS_OUR_FRAME = pytest.mark.xfail(
    sys.version_info < (3, 11),
    strict=True,
    raises=OurFrameShown,
    reason="Python 3.10's bare raise restores the wrapper's traceback entry",
)


def no_frame_of_ours(shown: str | Sequence[str], plain: str | Sequence[str] = "", ours: str = OURS) -> None:
    """Raise OurFrameShown if ``shown`` names ``ours``, or says IPython hid a frame where ``plain`` does not."""
    text = shown if isinstance(shown, str) else "\n".join(shown)
    plain_text = plain if isinstance(plain, str) else "\n".join(plain)
    if ours in text or (_HIDDEN in text and _HIDDEN not in plain_text):
        raise OurFrameShown(f"a frame of ours is shown:\n{text}")
