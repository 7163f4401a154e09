"""The first error wins: its frames, where it happened, and one line for each later error cleanup raised.

After a device-side assert every later CUDA call fails too. A framework that cleans up while the first
error is handled (Lightning's teardown, a checkpoint on exception, ``empty_cache``, a destructor) raises a
second error, and that is the one that reaches the top. :func:`first_error_frames` gives the first error's
frames (with the frames around the handler that caught it, so the user's cell is there too);
:func:`follow_on_lines` names each later error's step in one line.
"""

from __future__ import annotations

import types
from collections.abc import Container, Sequence

from cudaassert_ipy.base.wording import error_line, is_cell_filename
from cudaassert_ipy.diagnose.detection import Detection
from cudaassert_ipy.frameworks import Adapter, cleanup_step
from cudaassert_ipy.frameworks.base import frame_module, in_packages
from cudaassert_ipy.frameworks.registry import ADAPTERS, failure_notes

__all__ = [
    "FOLLOW_ON_STEP",
    "FOLLOW_ON_UNNAMED",
    "LOST",
    "failure_place",
    "first_error_frames",
    "follow_on_lines",
    "frames_of",
]

#: One later error, raised by a step a framework adapter named.
FOLLOW_ON_STEP = "{step} touched the dead GPU{lost}; the failure was in `{where}`."
#: What that step could not write: a checkpoint on exception.
LOST = ", so {what} was not written and is missing"
#: One later error no adapter could name.
FOLLOW_ON_UNNAMED = "The later `{error}` (in `{function}`) touched the dead GPU too; the failure was in `{where}`."
#: Frames that are never where the user's failure "was": torch internals.
_NOT_A_PLACE = ("torch",)


def frames_of(tb: types.TracebackType | None) -> list[types.FrameType]:
    """A traceback's frames, outermost first."""
    out = []
    while tb is not None:
        out.append(tb.tb_frame)
        tb = tb.tb_next
    return out


def first_error_frames(det: Detection) -> tuple[types.FrameType, ...]:
    """The first error's frames, outermost first. When a later error reached the top, the frames above the
    handler that caught the first one come from the top's traceback (the cell that called ``trainer.fit``)."""
    inner = frames_of(det.exception.__traceback__)
    if det.top is None or not inner:
        return tuple(inner)
    outer = frames_of(det.top.__traceback__)
    for i, frame in enumerate(outer):
        if frame is inner[0]:
            return (*outer[:i], *inner)
    return tuple(inner)


def failure_place(frames: Sequence[types.FrameType], user_files: Container[str] = ()) -> str:
    """The function the first error happened in, as the user knows it: their own function (``training_step``),
    else the innermost framework function (``_inner_training_loop``)."""
    for frame in reversed(frames):
        name = frame.f_code.co_name
        if is_cell_filename(frame.f_code.co_filename, user_files) and not name.startswith("<"):
            return name
    for frame in reversed(frames):
        name = frame.f_code.co_name
        if not in_packages(frame_module(frame), _NOT_A_PLACE) and not name.startswith(("<", "__torch_")):
            return name
    return code_name(frames[-1]) if frames else "?"


def code_name(frame: types.FrameType) -> str:
    """The frame's function name; a cell's top level is ``<module>`` on every IPython (7.x and 8.x name it
    ``<cell line: N>``)."""
    name = frame.f_code.co_name
    return "<module>" if name.startswith("<cell line") else name


def follow_on_lines(
    det: Detection, where: str, adapters: Sequence[Adapter] = ADAPTERS
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """One line per later error (the step that raised it, what is missing), and adapter failure notes."""
    lines: list[str] = []
    notes: list[str] = []
    for later in det.later:
        frames = frames_of(later.__traceback__)
        step, failures = cleanup_step(frames, adapters)
        notes += failure_notes(failures)
        if step is not None:
            lost = LOST.format(what=step.lost) if step.lost else ""
            line = FOLLOW_ON_STEP.format(step=step.label, lost=lost, where=where)
        else:
            function = code_name(frames[-1]) if frames else "?"
            line = FOLLOW_ON_UNNAMED.format(error=error_line(later), function=function, where=where)
        if line not in lines:
            lines.append(line)
    return tuple(lines), tuple(notes)
