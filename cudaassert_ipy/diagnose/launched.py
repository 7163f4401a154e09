"""A failure in another process, seen here only as a launcher's or an engine's wrapper.

accelerate's ``notebook_launcher`` and torchrun raise ``ChildFailedError``, ``mp.spawn`` raises
``ProcessRaisedException``, Ultralytics' multi-GPU DDP and ``accelerate launch`` end in
``CalledProcessError``, vLLM raises ``EngineDeadError``, a TGI client relays the server's error. The CUDA
error happened in a child (a rank, the engine core, a model shard): its context died, this process's did
not. The diagnosis is built from the child's own error (carried by the wrapper, else read from the
captured output of the children, which inherit fd 1/2) and the kernel's assertion lines it wrote, read
through launcher prefixes (capture/child_lines.py); the report names the first process that failed and
says to launch again, not to restart this kernel. Adapters say what a wrapper is (``Adapter.launch``).
"""

from __future__ import annotations

import dataclasses
import re

from cudaassert_ipy.capture.child_lines import SAMPLES_LINE, child_error, child_samples, error_process, first_failure
from cudaassert_ipy.diagnose.detection import Detection, Kind, classify, classify_text, logged_exception
from cudaassert_ipy.diagnose.diagnosis import ASYNC_NOTE, Diagnosis
from cudaassert_ipy.frameworks.registry import failure_notes, launch_of

__all__ = [
    "AGAIN",
    "CHILD_STATUS",
    "LAUNCHED_NOTE",
    "NO_CHILD_ERROR",
    "PEER_LOST_NOTE",
    "SAMPLES_LINE",
    "read_launched",
    "relabel",
]

#: The first note of a launched failure: what the cell got, and where the failure really was.
LAUNCHED_NOTE = (
    "What reached this process is {wrapper}: it only says that {process} failed. This report "
    "is built from that process's own error and kernel assertion lines ({source}); the traceback above "
    "is the launcher's, in this process."
)
SOURCE_CARRIED = "carried by the wrapper"
SOURCE_CAPTURED = "read from its output, which the fd tap captured"
#: The status line: the child's context died, this one did not.
CHILD_STATUS = (
    "The GPU context that died was in {process}, which is gone; this process's own GPU context was not "
    "touched by it, so no restart is needed here: fix the cause, then {again}."
)
#: What to do after the fix, by what runs the child (``Launch.relaunch``).
AGAIN = {
    "launcher": "launch it again",
    "engine": "create the engine (vLLM's `LLM(...)`) again",
    "server": "restart the server",
}
#: A child killed before Python could print its error (its NCCL watchdog's SIGABRT): only the kernel lines.
NO_CHILD_ERROR = "device-side assert triggered (the kernel's assertion lines; the process printed no Python error)"
DEFAULT_PROCESS = "a child process"
#: The launcher's root cause only lost its connection to a rank that was dying (gloo's pair.cc "Connection closed by
#: peer" / "Read error ...: Connection reset by peer" / "Broken pipe", NCCL's ncclRemoteError): that rank is the one.
PEER_LOST = re.compile(
    r"Connection (?:closed|reset) by peer|Broken pipe|remote process exited or there was a network "
    r"error"
)
#: The first note then: the wrapper's root cause and the process that really failed.
PEER_LOST_NOTE = (
    "What reached this process is {wrapper}: its root cause, {root}, failed with a connection error "
    '("{words}"): it lost its connection to {process}, which was dying of a CUDA error, so that '
    "connection error is a consequence. This report is built from the CUDA error and kernel assertion "
    "lines of {process} ({source}); the traceback above is the launcher's, in this process."
)
#: the rank that really failed, when no failure record names it
OTHER_RANK = "a rank other than {root}"


def _other_cuda_error(error: BaseException, link: BaseException, context_dead: bool) -> bool:
    """Whether this process raised a CUDA error of its own in ``error``'s chain (not the wrapper's text)."""
    det = classify(error, context_dead=context_dead)
    return det is not None and det.kills_context and det.exception is not link


def read_launched(
    error: BaseException, text: str, context_dead: bool = False, sites_seen: bool = False
) -> tuple[Detection | None, str] | None:
    """None when ``error`` is no launcher's wrapper. Else the child's failure as a Detection (None: the child's
    failure was no CUDA error of ours) and the child's text to read assertion sites from (what the wrapper
    carries, then the captured ``text``). ``sites_seen``: assertion lines are in that text."""
    found, failures = launch_of(error)
    if found is None:
        return None
    link, launch = found
    if _other_cuda_error(error, link, context_dead):
        return None
    child_text = "\n".join(t for t in (launch.text, text) if t)
    carried = launch.error or child_error(launch.text)
    lost = PEER_LOST.search(carried[1]) if carried is not None else None
    peer = ""  # the process the root cause lost its connection to, when a failure record names it
    if lost is not None:  # the root cause is a rank that lost its peer: the first other rank with a CUDA error
        peer, carried = next(((p, e) for p, e in launch.others if _kills(e)), ("", None))
        if carried is None:
            child_text = text  # the root cause's traceback holds no CUDA error: only what the ranks wrote
    child = carried or child_error(text)
    if child is not None:
        det = classify_text(child[0], child[1], assert_seen=sites_seen)
    elif sites_seen:
        det = Detection(Kind.DEVICE_ASSERT, logged_exception("", NO_CHILD_ERROR), NO_CHILD_ERROR)
    else:
        det = None
    if det is None or not det.kills_context:
        return None, child_text
    # a vLLM worker's tag on the error's own line names the process better than "the engine"
    worker = error_process(launch.text) or error_process(text) if carried is None else None
    root = launch.process or first_failure(launch.text) or first_failure(text) or DEFAULT_PROCESS
    process = worker or root
    source = SOURCE_CARRIED if carried is not None else SOURCE_CAPTURED
    if lost is not None:
        rank = root.split(" (", 1)[0]
        process = peer or worker or OTHER_RANK.format(root=rank)
        note = PEER_LOST_NOTE.format(
            wrapper=launch.wrapper, root=root, words=lost.group(0), process=process, source=source
        )
    else:
        note = LAUNCHED_NOTE.format(wrapper=launch.wrapper, process=process, source=source)
    launch = dataclasses.replace(launch, process=process, samples=child_samples(child_text))
    exception = det.exception.with_traceback(error.__traceback__)  # the launcher's frames: the user's cell
    return dataclasses.replace(
        det, exception=exception, launch=launch, notes=(note, *det.notes, *failure_notes(failures))
    ), child_text


def _kills(error: tuple[str, str]) -> bool:
    det = classify_text(error[0], error[1])
    return det is not None and det.kills_context


def relabel(diagnosis: Diagnosis, detection: Detection) -> Diagnosis:
    """The child's context died, not this one: the status, the headline's first words, the launch note first."""
    launch = detection.launch
    if launch is None:
        return diagnosis
    first = detection.notes[:1]  # read_launched puts the launch note first
    # the traceback above is the launcher's, not the child's: the async note about it does not apply
    notes = (*first, *(n for n in diagnosis.notes if n not in first and n not in ASYNC_NOTE.values()))
    _, sep, rest = diagnosis.headline.partition(" · ")
    headline = f"GPU context dead in {launch.process} · {rest}" if sep else diagnosis.headline
    return dataclasses.replace(
        diagnosis,
        context_dead=False,
        headline=headline,
        notes=notes,
        status=CHILD_STATUS.format(process=launch.process, again=AGAIN.get(launch.relaunch, AGAIN["launcher"])),
    )
