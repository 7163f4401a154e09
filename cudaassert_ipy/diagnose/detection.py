"""Classify an exception: is it a CUDA failure we explain, and which kind?

Works from the exception's type names, message and ``error_code`` only (never imports torch,
never touches the GPU). Follows ``__cause__`` / ``__context__`` (also when ``__suppress_context__`` hides
it), since libraries often re-raise, and the first error wins: after a device-side assert, cleanup
(Lightning's teardown, ``.cpu()``, ``empty_cache``, a checkpoint on exception) touches the dead context and
raises again while the first error is handled, so the exception that reaches the top is often a later one.
The earliest CUDA error in the chain is the one diagnosed; the later ones are kept as follow-ons.
Out-of-memory and "invalid argument" are not sticky and are left alone. Texts are matched
case-insensitively. When a kernel assertion line arrived with the error (``assert_seen``), any
CUDA/cuDNN/cuBLAS/NCCL/Triton error is the assert's follow-on: the assert killed the context and
this call was merely the next to touch it. A saved log has no exception object:
:func:`classify_text` classifies ``TypeName: message`` read from text.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from dataclasses import dataclass
from typing import ClassVar

from cudaassert_ipy.base.wording import error_line
from cudaassert_ipy.diagnose.causes.cpu_twins import CpuTwin, match_cpu_twin
from cudaassert_ipy.diagnose.validator_stop import ValidatorStop, stop_of
from cudaassert_ipy.frameworks.base import Launch
from cudaassert_ipy.frameworks.registry import failure_notes, launch_of, own_text

__all__ = [
    "CUBLAS_NOT_INITIALIZED",
    "FOLLOW_ON_NOTE",
    "Detection",
    "Kind",
    "classify",
    "classify_text",
    "is_launched",
    "logged_exception",
]

FOLLOW_ON_NOTE = (
    "`{error}` is a follow-on error: the kernel assertion above killed the GPU context first, and this "
    "call was only the next one to touch it. Fix the assertion; this error goes away with it."
)


class Kind(str, enum.Enum):
    DEVICE_ASSERT = "device_assert"  # a kernel assertion fired: the context is dead
    STICKY = "sticky"  # another sticky CUDA error (illegal address, ...): the context is dead
    FOLLOW_ON = "follow_on"  # a library error caused by an earlier sticky failure
    VALIDATOR = "validator"  # our own validator stopped the call before launch: GPU alive
    CPU_TWIN = "cpu_twin"  # the CPU's readable form of a catalogued assertion


# cudaError_t values (CUDA >= 10.1 numbering, plus the old numbers seen in 0.x/1.x texts)
_ASSERT_CODES = {710, 59}
_STICKY_CODES = {
    700: "cudaErrorIllegalAddress",
    77: "cudaErrorIllegalAddress",
    716: "cudaErrorMisalignedAddress",
    719: "cudaErrorLaunchFailure",
    715: "cudaErrorIllegalInstruction",
}

_CUDA_PREFIX = (
    r"(?:CUDA error|cuda runtime error \(\d+\)|HIP error|CUDA driver error|failed to synchronize|"
    r"cudaError\w+|in future dtor)"
)
_ASSERT_RE = re.compile(r"device-side assert(?:ion)? triggered|cudaErrorAssert\b", re.IGNORECASE)
_STICKY_RE = re.compile(
    _CUDA_PREFIX + r"[^\n]*?(?P<what>an illegal memory access was encountered|misaligned address|"
    r"unspecified launch failure|an illegal instruction was encountered)",
    re.IGNORECASE,
)
_FOLLOW_ON_RE = re.compile(
    r"CUBLAS_STATUS_EXECUTION_FAILED|CUBLAS_STATUS_INTERNAL_ERROR|CUDNN_STATUS_EXECUTION_FAILED|"
    r"CUDNN_STATUS_MAPPING_ERROR|cublas runtime error : the GPU program failed to execute|"
    r"ncclUnhandledCudaError|NCCL error[^\n]*unhandled cuda error",
    re.IGNORECASE,
)
# Once the context is dead (or an assertion line came with the error), any CUDA-flavoured failure
# belongs to the cascade.
_ANY_CUDA_RE = re.compile(
    r"CUDA error|cuda runtime error|CUBLAS_STATUS|CUDNN_STATUS|cuDNN error|cublas|cusolver|cusparse|"
    r"NCCL error|nccl\w*Error|CUDA driver error|HIP error|CUDA call failed|failed to synchronize|Triton Error|"
    r"CUDA_ERROR_\w+|cudaError\w+",
    re.IGNORECASE,
)
# cuBLAS could not create its handle: on a context an earlier kernel killed (the well-known symptom of an embedding
# lookup past the vocabulary), or on a full GPU. Alone, live, it is not ours (a full GPU reads the same); in a
# pasted report of a failure it is read as a follow-on (logs/explain.py), and the frame points name its likely cause.
#: cuBLAS could not make its handle: after a device assert its context is dead (ALLOC_FAILED is how some versions
#: say the same at ``cublasCreate(handle)``).
CUBLAS_NOT_INITIALIZED = re.compile(
    r"CUBLAS_STATUS_NOT_INITIALIZED|cublas runtime error : library not initialized|"
    r"CUBLAS_STATUS_ALLOC_FAILED when calling .cublasCreate\(handle\)"
)
_NOT_STICKY_RE = re.compile(r"out of memory|invalid argument", re.IGNORECASE)
_CODE_IN_TEXT = re.compile(r"cuda runtime error \((\d+)\)|error=(\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class Detection:
    """What kind of failure an exception is, and the exception in the chain that says so."""

    kind: Kind
    exception: BaseException
    message: str  # the exception's message (all lines)
    error_code: int | None = None
    twin: CpuTwin | None = None
    follow_on: bool = False  # a library/CUDA error that only surfaced an assertion seen with it
    stop: ValidatorStop | None = None  # what the validator knew (Kind.VALIDATOR)
    top: BaseException | None = None  # the exception that reached the top, when it is a later one
    later: tuple[BaseException, ...] = ()  # CUDA errors raised after this one (cleanup), oldest first
    notes: tuple[str, ...] = ()  # "[internal]" notes of framework adapters that failed while classifying
    #: the failure happened in another process; ``top`` is the launcher's (engine's) wrapper (diagnose/launched.py)
    launch: Launch | None = None

    @property
    def note(self) -> str | None:
        """The sentence that says this error is a consequence, not the cause."""
        return FOLLOW_ON_NOTE.format(error=self.first_line) if self.follow_on else None

    @property
    def kills_context(self) -> bool:
        return self.kind in (Kind.DEVICE_ASSERT, Kind.STICKY, Kind.FOLLOW_ON)

    @property
    def first_line(self) -> str:
        """``TypeName: first line of the message``, as IPython prints it."""
        return error_line(self.exception, self.message)


_RANK = {Kind.DEVICE_ASSERT: 5, Kind.STICKY: 4, Kind.FOLLOW_ON: 3, Kind.VALIDATOR: 2, Kind.CPU_TWIN: 1}


def classify(exc: BaseException | None, context_dead: bool = False, assert_seen: bool = False) -> Detection | None:
    """The failure to explain in the exception's chain, or None when it is not ours.

    The first error wins: the earliest CUDA error (by its place in the chain) when there is one, else the
    strongest other kind (validator, CPU twin), earliest first. A library error that surfaced first while a
    later link says device-side assert counts as that assert's follow-on. CUDA errors raised after it are
    kept in ``later``. ``assert_seen``: a kernel assertion line arrived with this error (same cell, same log).
    """
    links = _chain(exc)
    found = [(i, d) for i, link in enumerate(links) if (d := _classify_one(link, context_dead, assert_seen))]
    if not found:
        return None
    cuda = [(i, d) for i, d in found if d.kills_context]
    if cuda:
        index, first = max(cuda, key=lambda x: x[0])
        if first.kind is Kind.FOLLOW_ON and any(d.kind is Kind.DEVICE_ASSERT for _, d in cuda):
            first = dataclasses.replace(first, kind=Kind.DEVICE_ASSERT, follow_on=True)
    else:
        strongest = max(_RANK[d.kind] for _, d in found)
        index, first = max(((i, d) for i, d in found if _RANK[d.kind] == strongest), key=lambda x: x[0])
    origin = _raised_in(first.exception)
    later = tuple(
        link
        for link in reversed(links[:index])
        if _classify_one(link, True, assert_seen) and not _same_place(_raised_in(link), origin)
    )
    notes = tuple(n for _, d in found for n in d.notes)
    return dataclasses.replace(first, top=exc if exc is not first.exception else None, later=later, notes=notes)


def is_launched(exc: BaseException) -> bool:
    """Whether ``exc`` (or a link of its chain) only wraps a failure in another process: a launcher's or an
    engine's wrapper (``ChildFailedError``, ``CalledProcessError``, ...), which the child's text may make ours
    (diagnose/launched.py)."""
    return launch_of(exc)[0] is not None


class _LoggedTypes:
    """One exception class per type name read from a log, so ``error_line`` prints that name."""

    made: ClassVar[dict[str, type[RuntimeError]]] = {}


def logged_exception(type_name: str, message: str) -> BaseException:
    """A stand-in for an exception printed in a log: ``torch.AcceleratorError`` → class ``AcceleratorError``."""
    name = type_name.rsplit(".", 1)[-1] or "RuntimeError"
    cls = _LoggedTypes.made.get(name)
    if cls is None:
        cls = _LoggedTypes.made.setdefault(name, type(name, (RuntimeError,), {"__module__": "logged"}))
    return cls(message)


def classify_text(
    type_name: str, message: str, context_dead: bool = False, assert_seen: bool = False
) -> Detection | None:
    """Classify an error read from text (a saved log, pasted output): ``TypeName`` and its message."""
    return _classify_one(logged_exception(type_name, message), context_dead, assert_seen)


def _chain(exc: BaseException | None, limit: int = 32) -> list[BaseException]:
    """Every link from the top down, newest first: a link's ``__cause__`` and ``__context__`` (set even when
    ``__suppress_context__`` hides it from the printed traceback) were raised before it."""
    seen: list[BaseException] = []
    todo = [exc] if exc is not None else []
    while todo and len(seen) < limit:
        link = todo.pop(0)
        if any(link is s for s in seen):
            continue
        seen.append(link)
        todo.extend(x for x in (link.__cause__, link.__context__) if x is not None)
    return seen


def _raised_in(exc: BaseException) -> tuple[object, int] | None:
    """Where an exception was raised: its traceback's innermost frame and line, or None. A framework that
    re-creates an error (Keras: ``e.__class__(message)`` re-raised with ``e``'s traceback) raises the copy from
    the same frame and line: the copy is that error again, not a later one."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return (tb.tb_frame, tb.tb_lineno) if tb is not None else None


def _same_place(a: tuple[object, int] | None, b: tuple[object, int] | None) -> bool:
    return a is not None and b is not None and a[0] is b[0] and a[1] == b[1]


def _message(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # a broken __str__ must not break the diagnosis
        return ""


def _error_code(exc: BaseException, text: str) -> int | None:
    code = getattr(exc, "error_code", None)
    if isinstance(code, int) and not isinstance(code, bool):
        return code
    m = _CODE_IN_TEXT.search(text)
    return int(m.group(1) or m.group(2)) if m else None


def _classify_one(exc: BaseException, context_dead: bool, assert_seen: bool = False) -> Detection | None:
    names = tuple(t.__name__ for t in type(exc).__mro__)
    text = _message(exc)
    stop = stop_of(exc)
    if stop is not None:
        return Detection(Kind.VALIDATOR, exc, text, stop=stop)
    own, failures = own_text(exc, text)  # a framework that rewrote the message (adapters' unwrap)
    notes = failure_notes(failures)
    if own is not None:
        text = own
    code = _error_code(exc, text)
    if code in _ASSERT_CODES or _ASSERT_RE.search(text):
        return Detection(
            Kind.DEVICE_ASSERT, exc, text, code, follow_on=assert_seen and _is_library_error(text), notes=notes
        )
    if assert_seen and _ANY_CUDA_RE.search(text):  # the assert came first: this only surfaced it
        return Detection(Kind.DEVICE_ASSERT, exc, text, code, follow_on=True, notes=notes)
    if code in _STICKY_CODES or _STICKY_RE.search(text):
        return Detection(Kind.STICKY, exc, text, code, notes=notes)
    if _FOLLOW_ON_RE.search(text) or (context_dead and _ANY_CUDA_RE.search(text)):
        return Detection(Kind.FOLLOW_ON, exc, text, code, notes=notes)
    if _NOT_STICKY_RE.search(text) and _ANY_CUDA_RE.search(text):
        return None
    twin = match_cpu_twin(names, text)
    if twin is not None:
        return Detection(Kind.CPU_TWIN, exc, text, None, twin, notes=notes)
    return None


_PLAIN_ASSERT_RE = re.compile(
    r"^\s*(?:CUDA error: |cuda runtime error \(\d+\) : )?device-side assert(?:ion)? triggered", re.IGNORECASE
)


def _is_library_error(text: str) -> bool:
    """Whether a device-assert text came through another layer (Triton, thrust, cuDNN, a dtor), not
    straight from PyTorch's CUDA check: ``Triton Error [CUDA]: device-side assert triggered``."""
    return not _PLAIN_ASSERT_RE.match(text)
