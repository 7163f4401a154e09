"""Explain a saved log: every assertion site and CUDA error in it, diagnosed and grouped by rank.

The same pieces as a live failure (``capture`` reads the lines, ``detection`` classifies the
printed errors, ``diagnosis`` explains), with no exception object and no host facts: what the
log says is all there is. Lines a launcher tagged (``[rank3]:``) are grouped by rank; the
CUDA runtime's own assertion lines usually carry no tag, and when exactly one rank reported a
device-side assert they are shown under it.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from cudaassert_ipy.capture.assert_lines import AssertSite, Orphan, scan_all
from cudaassert_ipy.capture.child_lines import first_failure, readable
from cudaassert_ipy.capture.tracebacks import Frame, frames_in_text
from cudaassert_ipy.diagnose.causes import GENERIC_ID, match_assert
from cudaassert_ipy.diagnose.causes.cpu_twins import bare_twin, match_cpu_twin
from cudaassert_ipy.diagnose.detection import (
    CUBLAS_NOT_INITIALIZED,
    Detection,
    Kind,
    classify_text,
    logged_exception,
)
from cudaassert_ipy.diagnose.diagnosis import ASYNC_NOTE, Diagnosis, diagnose
from cudaassert_ipy.diagnose.evidence import Evidence
from cudaassert_ipy.diagnose.recovered import recover
from cudaassert_ipy.logs.errors import LoggedError, find_errors
from cudaassert_ipy.logs.lines import interesting
from cudaassert_ipy.logs.paste import Repaired, repair
from cudaassert_ipy.logs.ranks import rank_label, sort_key, tag_end

__all__ = ["Explanation", "Group", "explain_text"]

#: An exception's repr inside another line: ``RuntimeError('probability tensor contains ...')``.
EXC_REPR = re.compile(r"\b(?P<type>[A-Za-z_]\w*(?:Error|Exception))\((?P<q>['\"])(?P<message>.+?)(?P=q)\)")
# Paste damage is repaired only up to this size of relevant lines: pasted text is never larger, and
# a 100 MB log was written by processes, not pasted (the repairs' scans would cost a second).
PASTE_LIMIT = 8_000_000
NO_EXCEPTION = "none printed in the log (only the kernel's assertion lines)"
#: A traceback whose error line the paste left out: read from its frames alone.
NO_ERROR_LINE = "none in the text (the traceback ends before its error line)"
CUT_MESSAGE = "device-side assert triggered (assumed: the text ends before the error line)"
CUT_NOTE = (
    "The text holds a traceback but not its error line. It is read from its frames as a device-side assert, "
    "the failure this tool explains; if the error was another one, this report does not apply."
)
#: A text with no error at all, only a warning that foretells one (a tokenizer's "will result in indexing errors") or
#: a printed value that does (a mask's unique values running to 255).
FORETOLD_MESSAGE = (
    "device-side assert triggered (assumed: the text holds only a warning or a printed value that foretells it)"
)
NO_ERROR = "none in the text (only a warning or a printed value that foretells an error)"
FORETOLD_NOTE = (
    "The text holds no error line, only a warning or a printed value that foretells one ({point}). It is read as "
    "the failure it predicts; if the error was another one, this report does not apply."
)
UNTAGGED_MOVED = (
    "The kernel's assertion lines carry no rank tag; {label} is the only rank that reported a device-side "
    "assert, so they are shown under it."
)
LOG_STATUS = (
    "The GPU context of the process that printed this died: nothing on the GPU could be used again in that "
    "process, so it had to be restarted."
)
SHARED_SITES = "The assertion lines carry no rank tag: they may come from any rank."
#: A launcher's own lines (torchrun's agent, its ChildFailedError table, mp.spawn, DeepSpeed's launcher) name the
#: process that failed first; the launcher then stopped the others.
LAUNCHER_FIRST = (
    "The launcher's own lines name {process} as the first process that failed; it stopped the other "
    "processes after that{killed}, so what they printed later is a consequence."
)
KILLED = ' (DeepSpeed\'s launcher: "Killing subprocess" {n}x)'
#: TGI: the router's cache clear after a failure touches the dead shard again.
CLEAR_CACHE = (
    "TGI's `Method ClearCache encountered an error.` is a follow-on: after the failure the router cleared "
    "the shard's cache, which touched the dead GPU again. Fix the first error; this one goes away with it."
)


@dataclass(frozen=True)
class Group:
    """What one rank (or the untagged part of the log) holds."""

    label: str | None
    diagnoses: tuple[Diagnosis, ...]


@dataclass(frozen=True)
class Explanation:
    """Everything found in one log, and what could not be read."""

    source: str
    groups: tuple[Group, ...]
    sites: int  # assertion sites, recovered ones included
    errors: int  # distinct CUDA error lines
    repairs: tuple[str, ...]  # paste damage read through
    spliced: tuple[Orphan, ...]  # fragments with no whole known condition
    unreadable: tuple[str, ...]  # lines with an assertion marker and no whole record
    folded: tuple[AssertSite, ...] = ()  # every site, recovered ones included (their counts are lines)
    repeats: int = 0  # spliced fragments of a condition also read whole: recognised, not counted in a site

    @property
    def found(self) -> bool:
        return any(g.diagnoses for g in self.groups)


def _dedupe(errors: list[LoggedError]) -> list[LoggedError]:
    seen: set[tuple[str | None, str, str]] = set()
    out = []
    for e in errors:
        key = (e.group, e.type_name.rsplit(".", 1)[-1], e.message)
        if key not in seen:
            seen.add(key)
            out.append(e)
    return out


def _detect(e: LoggedError, assert_seen: bool) -> Detection | None:
    found = classify_text(e.type_name, e.message, assert_seen=assert_seen)
    if found is None and CUBLAS_NOT_INITIALIZED.search(e.message):  # a pasted failure: read as a dead context's
        found = classify_text(e.type_name, e.message, context_dead=True)
    return found


def _cause_key(site: AssertSite) -> str:
    cause = match_assert(site.condition, site.file, site.function)
    return cause.id if cause is not None else f"{GENERIC_ID}:{site.condition}"


def _site_diagnoses(
    sites: list[AssertSite],
    detections: list[Detection],
    extra_notes: list[str],
    frames: tuple[Frame, ...] = (),
    text: str = "",
) -> list[Diagnosis]:
    """One diagnosis per cause; the first direct device-assert error is its exception, follow-ons are notes."""
    main = next((d for d in detections if d.kind is Kind.DEVICE_ASSERT and not d.follow_on), None)
    main = main or next((d for d in detections if d.kind is Kind.DEVICE_ASSERT), None)
    notes = [d.note for d in detections if d.note and d is not main]
    clusters: dict[str, list[AssertSite]] = {}
    for site in sites:
        clusters.setdefault(_cause_key(site), []).append(site)
    out = []
    for cluster in clusters.values():
        det = main or Detection(Kind.DEVICE_ASSERT, logged_exception("", cluster[0].first.raw), cluster[0].first.raw)
        d = diagnose(Evidence(detection=det, sites=tuple(cluster), frames=frames, pasted=text))
        all_notes = (*extra_notes, *((main.note,) if main and main.note else ()), *notes, *d.notes)
        if main is None:
            out.append(dataclasses.replace(d, notes=all_notes, exception_line=NO_EXCEPTION, exception_text=""))
        else:
            out.append(dataclasses.replace(d, notes=all_notes))
    return out


#: libtorch's own error text as a program outside Python prints it: a C++ ``what():`` line, a Rust binding's
#: ``Torch("...")`` error value, a ``c10::Error``; the message runs to libtorch's "Exception raised from".
_LIBTORCH_WRAPPED = re.compile(r"\bTorch\(\"|\bwhat\(\):\s+|\bc10::\w*Error:(?!:)\s*")
_LIBTORCH_END = re.compile(r"\\n|\n|\s*Exception raised from |\"\)")


def _libtorch_messages(line: str) -> list[str]:
    """The line, then each libtorch message wrapped in it (``...Err value: Torch("index out of range in self\\n``)."""
    found = [line]
    for m in _LIBTORCH_WRAPPED.finditer(line):
        rest = line[m.end() :]
        end = _LIBTORCH_END.search(rest)
        found.append(rest[: end.start()] if end is not None else rest)
    return found


def _repr_twin(line: str) -> tuple[str, str] | None:
    """A CPU twin's error printed as its repr inside another line (asyncio's "Future exception was never
    retrieved", Ray's ``RayTaskError(RuntimeError)(RuntimeError('...'))``): its type name and message."""
    for m in EXC_REPR.finditer(line):
        type_name, message = m.group("type"), m.group("message")
        if match_cpu_twin((type_name,), message) is not None:
            return type_name, message
    return None


def _bare_errors(text: str, limit: int = 2000) -> list[LoggedError]:
    """The first CPU twin message printed without its exception type (looked for in the first ``limit`` lines): on
    a line of its own, wrapped in a non-Python program's report of libtorch's error, or only as a repr inside
    another line."""
    offset = 0
    for line in text.splitlines()[:limit]:
        for message in _libtorch_messages(line):
            found = bare_twin(message)
            if found is not None:
                return [LoggedError(found[0], message.strip().strip("\"'`").strip(), line, None, offset)]
        wrapped = _repr_twin(line)
        if wrapped is not None:
            return [LoggedError(wrapped[0], wrapped[1], line, None, offset)]
        offset += len(line) + 1
    return []


def _error_diagnoses(detections: list[Detection], frames: tuple[Frame, ...] = (), text: str = "") -> list[Diagnosis]:
    return [diagnose(Evidence(detection=d, frames=frames, pasted=text)) for d in detections]


def _cut_traceback(frames: tuple[Frame, ...], text: str) -> Diagnosis | None:
    """A traceback pasted without its error line (cut off): read as the device-side assert this tool explains, when
    its frames (a framework's failure point, the user's own line) or the text around them (a failure point read
    from the paste: the inputs it shows) say something; None when they say nothing."""
    det = Detection(Kind.DEVICE_ASSERT, logged_exception("", CUT_MESSAGE), CUT_MESSAGE)
    d = diagnose(Evidence(detection=det, frames=frames, pasted=text))
    if not d.basis.startswith(("a frame", "a code line", "the error text (")):
        return None
    return dataclasses.replace(d, exception_line=NO_ERROR_LINE, exception_text="", notes=(CUT_NOTE, *d.notes))


def _foretold(text: str, frames: tuple[Frame, ...] = ()) -> Diagnosis | None:
    """A text with no error, no assertion line and no frames that name a cause, whose warning says the failure
    will come: read as that failure. None when no such warning is in it."""
    from cudaassert_ipy.diagnose.frame_points import foretold

    point = foretold(text)
    if point is None:
        return None
    det = Detection(Kind.DEVICE_ASSERT, logged_exception("", FORETOLD_MESSAGE), FORETOLD_MESSAGE)
    d = diagnose(Evidence(detection=det, frames=frames, pasted=text))
    note = FORETOLD_NOTE.format(point=point.id.replace("_", " "))
    rest = tuple(n for n in d.notes if n != ASYNC_NOTE[Kind.DEVICE_ASSERT])  # no traceback for it to speak of
    return dataclasses.replace(d, exception_line=NO_ERROR, exception_text="", notes=(note, *rest))


def _in_log_words(d: Diagnosis) -> Diagnosis:
    """A log's process is gone: say what happened to it, not 'restart the kernel'."""
    return dataclasses.replace(d, status=LOG_STATUS) if d.context_dead else d


def _launcher_notes(text: str) -> list[str]:
    """What launchers and servers say around the failure: the first failing process, TGI's cache clear."""
    notes = []
    process = first_failure(text)
    if process is not None:
        killed = text.count("] Killing subprocess ")
        notes.append(LAUNCHER_FIRST.format(process=process, killed=KILLED.format(n=killed) if killed else ""))
    if "Method ClearCache encountered an error" in text:
        notes.append(CLEAR_CACHE)
    return notes


def explain_text(text: str, source: str = "log") -> Explanation:
    """Read a whole log (or pasted text) and explain what it holds."""
    lines = readable(interesting(text))  # colour codes and JSON-escaped newlines of log shippers read through
    fixed = repair(lines) if len(lines) <= PASTE_LIMIT else Repaired(lines)
    scanned = scan_all(fixed.text, group=rank_label)
    errors = _dedupe(find_errors(fixed.text, rank_label, tag_end))
    if not errors and not scanned.groups:  # a paste that kept only a CPU error's message, without its type
        errors = _bare_errors(text)
    sites: dict[str | None, list[AssertSite]] = {k: list(v) for k, v in scanned.groups.items()}
    spliced: list[Orphan] = []
    repeats = 0
    for label in dict.fromkeys(o.group for o in scanned.orphans):  # first seen first: the same text each run
        found, unread, again = recover([o for o in scanned.orphans if o.group == label], sites.get(label, []))
        spliced += unread
        repeats += again
        if found:
            sites.setdefault(label, []).extend(found)
    labels = sorted({*sites, *(e.group for e in errors)}, key=sort_key)
    notes: dict[str | None, list[str]] = {label: [] for label in labels}
    untagged = sites.get(None, [])
    if untagged and not any(k is not None for k in sites):
        asserting = [
            lab
            for lab in labels
            if lab is not None
            and any(
                (d := _detect(e, True)) is not None and d.kind is Kind.DEVICE_ASSERT and not d.follow_on
                for e in errors
                if e.group == lab
            )
        ]
        if len(asserting) == 1:
            sites[asserting[0]] = sites.pop(None)
            notes[asserting[0]].append(UNTAGGED_MOVED.format(label=asserting[0]))
            untagged = []
    groups: list[Group] = []
    explained: set[tuple[str, str]] = set()
    frames = frames_in_text(text)  # a pasted report's evidence is often only its traceback
    for label in labels:
        own = sites.get(label, [])
        shared = own or (untagged if label is not None else [])
        dets = []
        for e in errors:
            if e.group == label and (d := _detect(e, bool(shared))) is not None:
                dets.append(d)
                explained.add((e.type_name.rsplit(".", 1)[-1], e.message))
        if own:
            diagnoses = _site_diagnoses(own, dets, notes[label], frames, text)
        elif shared and dets:
            diagnoses = _site_diagnoses(shared, dets, [SHARED_SITES], frames, text)
        else:
            diagnoses = _error_diagnoses(dets, frames, text)
        if diagnoses:
            if not groups:  # said once, under the first diagnosis
                extra = tuple(_launcher_notes(text))
                diagnoses[0] = dataclasses.replace(diagnoses[0], notes=(*diagnoses[0].notes, *extra))
            groups.append(Group(label, tuple(_in_log_words(d) for d in diagnoses)))
    if not groups and not errors and not sites and frames:
        cut = _cut_traceback(frames, text)
        groups += [Group(None, (_in_log_words(cut),))] if cut is not None else []
    if not groups and not errors and not sites:  # frames that said nothing, or none: a warning may still say
        ahead = _foretold(text, frames)
        groups += [Group(None, (_in_log_words(ahead),))] if ahead is not None else []
    return Explanation(
        source=source,
        groups=tuple(groups),
        sites=sum(len(v) for v in sites.values()),
        errors=len(explained),
        repairs=tuple(fixed.repairs),
        spliced=tuple(spliced),
        unreadable=tuple(line for _, line in scanned.unreadable),
        folded=tuple(site for group_sites in sites.values() for site in group_sites),
        repeats=repeats,
    )
