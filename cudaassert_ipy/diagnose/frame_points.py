"""Frames are evidence: a traceback's frames mapped to the failure point they pass through, and so to a cause.

Most reports hold a traceback and no kernel assertion line, or only a generic check ("index out of bounds").
A person reading it still knows a lot: the frame in ``BertEmbeddings.forward`` at ``position_embeddings(...)``
means a sequence longer than ``max_position_embeddings``; a frame in a YOLO loss means a class id >= ``nc``. The
catalogue of such failure points is data (``causes/frame_points.json``), loaded on the first report that needs it;
this module only matches. Each point names: where (path parts, function names, a pattern over the printed source
line), the cause it means, what the index is ("position id"), the knob that bounds it, and its fix's key in
:data:`cudaassert_ipy.diagnose.hints.FRAME_FIXES` (the words of the framework the frame is in).

Without ``CUDA_LAUNCH_BLOCKING`` a kernel failure surfaces at a later call: a point found only at such a call
(``backward()``, ``.item()``, a cuBLAS call) says so, and names the earlier op that is the likely one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

from cudaassert_ipy.capture.tracebacks import Frame

__all__ = ["FrameFinding", "Point", "find_point", "foretold", "is_late_frame", "points"]

# Calls that only use a result: a failure seen there happened in an earlier kernel.
_LATE_CODE = re.compile(
    r"\.backward\(|\.item\(\)|\.cpu\(\)|\.tolist\(\)|\.numpy\(\)|synchronize\(|optimizer\.step\(|\.step\(\)|"
    r"scaler\.scale\(|\bprint\(|torch\.isnan\(|\.to\(|\bclip_grad|accelerator\.backward\(|manual_backward\("
)
_LATE_FUNCS = frozenset(
    {
        "backward",
        "_engine_run_backward",
        "step",
        "synchronize",
        "clip_grad_norm_",
        "item",
        "_call_impl_late",
        "optimizer_step",
        "_wrapped_call_impl",
        "wrapper",
    }
)
_SURFACED_ONLY = frozenset({"backward", "_engine_run_backward", "synchronize", "clip_grad_norm_", "step"})


@dataclass(frozen=True)
class Point:
    """One failure point of the catalogue."""

    id: str
    framework: str  # whose code the frame is in ("" for the user's own lines)
    cause: str  # a cause id of the catalogue (or of EXTRA_TEXTS)
    paths: tuple[str, ...] = ()  # parts of the file path, any of them ("" / none: any file)
    funcs: tuple[str, ...] = ()  # function names, any of them (the last part of ``Class.method``)
    code: str | None = None  # a pattern searched in the printed source line
    message: str | None = None  # a pattern searched in the error's message (with no frame parts: the text alone)
    context: str | None = None  # a pattern searched in the whole pasted text (a framework's object repr, its path)
    index: str = ""  # what the bad index is: "position id", "class id", "node id"
    bound: str = ""  # the knob that bounds it: "max_position_embeddings", "nc"
    fix: str = ""  # key of hints.FRAME_FIXES
    says: str = ""  # what the point means, for the report
    rank: int = 0  # a higher rank wins over a lower one (framework internals over the user's own line)
    refines: tuple[str, ...] = ()  # causes the point may replace: a generic index error becomes a named one
    unsure: str = ""  # a key of texts.UNSURE: a weak point (ranks its cause with others) or a lookup (which table)
    #: a warning that says the failure will come (a tokenizer's "will result in indexing errors"): a text that
    #: holds it and no error line is still read, as the failure the warning foretells
    foretells: bool = False

    @cached_property
    def _code(self) -> re.Pattern[str] | None:
        return re.compile(self.code) if self.code is not None else None

    @cached_property
    def _paths(self) -> tuple[str, ...]:
        return tuple(p.replace("\\", "/") for p in self.paths)

    def matches(self, frame: Frame) -> bool:
        if self._paths:
            path = frame.norm_path
            if not any(p in path for p in self._paths):
                return False
        if self.funcs and frame.func.rsplit(".", 1)[-1] not in self.funcs:
            return False
        if self._code is not None and not (frame.code and self._code.search(frame.code)):
            return False
        return bool(self.paths or self.funcs or self.code)

    @property
    def frameless(self) -> bool:
        """A point read from the error text alone (a message that means one failure wherever it is raised)."""
        return (self.message is not None or self.context is not None) and not (self.paths or self.funcs or self.code)

    def matches_message(self, message: str, context: str = "") -> bool:
        """Both patterns found; when both read a ``size``, the same one: a size the error names that a printed
        config also names (``with size 512`` beside ``max_position_embeddings: 512``) says which table it is."""
        pattern = self.message or ""
        said = re.search(pattern, message) if self.message is not None else None
        if self.message is not None and said is None:
            return False
        if self.context is None:
            return True
        if said is not None and "(?P<size>" in pattern and "(?P<size>" in self.context:
            return any(m.group("size") == said.group("size") for m in re.finditer(self.context, context))
        return re.search(self.context, context) is not None

    def size_in(self, message: str, context: str = "") -> int | None:
        """The bound the point's own pattern read (its ``(?P<size>...)`` group: a tokenizer's "(603 > 512)")."""
        for pattern, text in ((self.message, message), (self.context, context)):
            m = re.search(pattern, text) if pattern is not None and "(?P<size>" in pattern else None
            if m is not None and m.group("size") is not None:
                return int(m.group("size"))
        return None


@dataclass(frozen=True)
class FrameFinding:
    """The failure point the traceback passes through, the frame that shows it, and whether it surfaced late."""

    point: Point
    frame: Frame | None  # None: the point was read from the error's text alone
    late_frame: Frame | None = None  # the later call where the failure surfaced, when that is where it was seen

    @property
    def where(self) -> str:
        """``modeling_bert.py:202 in forward``: the frame as a person would cite it."""
        if self.frame is None:
            return "the error's text"
        name = self.frame.norm_path.rsplit("/", 1)[-1]
        if not name:  # the paste cut the frame's file off
            return f"line {self.frame.line} in {self.frame.func}"
        return f"{name}:{self.frame.line} in {self.frame.func}" if self.frame.line else f"{name} in {self.frame.func}"


def _point(entry: dict[str, object]) -> Point:
    def strings(key: str) -> tuple[str, ...]:
        value = entry.get(key) or ()
        return tuple(str(v) for v in value) if isinstance(value, (list, tuple)) else ()

    code, message, context = entry.get("code"), entry.get("message"), entry.get("context")
    return Point(
        id=str(entry["id"]),
        framework=str(entry.get("framework") or ""),
        cause=str(entry["cause"]),
        paths=strings("paths"),
        funcs=strings("funcs"),
        code=str(code) if code else None,
        message=str(message) if message else None,
        context=str(context) if context else None,
        index=str(entry.get("index") or ""),
        bound=str(entry.get("bound") or ""),
        fix=str(entry.get("fix") or ""),
        says=str(entry.get("says") or ""),
        rank=int(str(entry.get("rank") or 0)),
        refines=strings("refines"),
        unsure=str(entry.get("unsure") or ""),
        foretells=entry.get("foretells") is True,
    )


@lru_cache(maxsize=1)
def points() -> tuple[Point, ...]:
    """The catalogue, loaded on first use (``%load_ext`` never reads it)."""
    raw = json.loads((Path(__file__).parent / "causes" / "frame_points.json").read_text(encoding="utf-8"))
    return tuple(_point(e) for e in raw)


def is_late_frame(frame: Frame) -> bool:
    """A call that only consumes an earlier kernel's result (``loss.backward()``, ``.item()``, a sync)."""
    return bool(frame.code and _LATE_CODE.search(frame.code)) or frame.func.rsplit(".", 1)[-1] in _SURFACED_ONLY


_CONTEXT = 200_000  # characters of a paste searched for a framework's marks
_MAX_FRAMES = 400  # a log with thousands of tracebacks: the first and last frames are the ones that tell


def find_point(
    frames: Sequence[Frame], message: str = "", context: str = "", catalogue: Iterable[Point] | None = None
) -> FrameFinding | None:
    """The best failure point the frames (and the error's message) show: the highest rank, then the innermost
    frame of the first traceback printed (a chained error's later tracebacks are cleanup). None when none does."""
    if len(frames) > _MAX_FRAMES:
        frames = (*frames[: _MAX_FRAMES // 2], *frames[-_MAX_FRAMES // 2 :])
    return _find(tuple(frames), message, context[:_CONTEXT], tuple(points() if catalogue is None else catalogue))


@lru_cache(maxsize=8)  # a log's diagnoses (one per rank and cause) read the same frames
def _find(frames: tuple[Frame, ...], message: str, context: str, catalogue: tuple[Point, ...]) -> FrameFinding | None:
    first_block = min((f.block for f in frames), default=0)
    ordered = [f for f in frames if f.block == first_block] + [f for f in frames if f.block != first_block]
    best: tuple[int, int, Point, Frame | None] | None = None
    for point in catalogue:
        if (
            point.frameless
            and point.matches_message(message, context)
            and (best is None or (point.rank, -1) > best[:2])
        ):
            best = (point.rank, -1, point, None)
    for depth, frame in enumerate(ordered):
        for point in catalogue:
            if not point.frameless and point.matches(frame) and point.matches_message(message, context):
                key = (point.rank, depth if frame.block == first_block else -1)
                if best is None or key > best[:2]:
                    best = (*key, point, frame)
    if best is None:
        return None
    point, found = best[2], best[3]
    if found is None:
        return FrameFinding(point, None)
    n_first = len([f for f in frames if f.block == first_block])
    innermost = ordered[n_first - 1] if n_first else found
    late = innermost if innermost is not found and is_late_frame(innermost) else None
    if late is None and is_late_frame(found) and found.code:
        late = found
    return FrameFinding(point, found, late)


def foretold(text: str) -> Point | None:
    """The warning in ``text`` that foretells an index failure (a catalogue point marked ``foretells``), if any."""
    found = find_point((), "", text)
    return found.point if found is not None and found.point.foretells else None
