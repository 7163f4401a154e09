"""Evidence in, one frozen Diagnosis out: what happened, why, and what to do.

Renderers (report, panel) hold no logic: everything they show is decided here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.causes import GENERIC_ID, Cause, get_cause, match_assert, unknown_site_sentence
from cudaassert_ipy.diagnose.causes.rules import RULES, Case, Finding, RuleEntry, find
from cudaassert_ipy.diagnose.causes.texts import FOLLOW_ON, STICKY_TEXTS, Text, no_line_text
from cudaassert_ipy.diagnose.culprit import Culprit
from cudaassert_ipy.diagnose.detection import Kind
from cudaassert_ipy.diagnose.evidence import Evidence
from cudaassert_ipy.diagnose.validator_stop import ValidatorStop

__all__ = ["DEAD_CONTEXT", "Diagnosis", "diagnose"]

DEAD_CONTEXT = (
    "The GPU context of this kernel is dead. Nothing on the GPU can be used again in this process; "
    "restart the kernel."
)
ALIVE_AFTER_VALIDATOR = "A validator caught this input before any device-side assert: the GPU is still alive."
ALIVE_CPU = "This error was raised on the CPU, so no GPU context was harmed."


@dataclass(frozen=True)
class Diagnosis:
    kind: str  # a detection.Kind value
    context_dead: bool
    cause_id: str
    title: str  # "class label out of range"
    headline: str  # "GPU context dead · class label out of range in cross_entropy"
    status: str  # the first line of the report: dead context / GPU alive
    specific: str | None  # the sentence(s) built from the evidence, when there is any
    explanation: str
    fix: str
    op: str | None = None
    facts: tuple[tuple[str, str], ...] = ()
    assert_sites: tuple[str, ...] = ()  # folded: "Loss.cu:250 ...: `t >= 0 && t < n_classes` failed in 64 threads"
    assert_raw: tuple[str, ...] = ()  # the first raw line of each site
    exception_line: str = ""  # "AcceleratorError: CUDA error: device-side assert triggered"
    exception_text: str = ""  # the whole message
    user_line: tuple[str, int, str] | None = None
    cell: int | None = None
    error_code: int | None = None
    notes: tuple[str, ...] = ()
    cuda_device: int | None = None  # index of the device the failing tensors lived on, when known
    likely_fix: str | None = None  # the specific fix (diagnose.hints): the same string on every path
    samples: tuple[str, ...] = ()  # the DataLoader bookmark's lines: which dataset samples hold the bad values
    #: one line per later error that cleanup raised after the first one ("Lightning's teardown touched ...")
    follow_ons: tuple[str, ...] = ()
    #: the object a fix changes (head, loss, embedding) with the facts the fix was worded from; fix/ reads it
    culprit: Culprit | None = None


def _sticky_text(message: str) -> Text:
    for key, text in STICKY_TEXTS.items():
        if key in message:
            return text
    return STICKY_TEXTS["unspecified launch failure"]


#: A kernel failure's traceback points where it surfaced (device asserts, other sticky errors).
ASYNC_NOTE = {
    Kind.DEVICE_ASSERT: "CUDA reports kernel failures asynchronously: the traceback above points at the call where "
                        "the failure surfaced, not at the call that launched the failing kernel.",
    Kind.STICKY: "CUDA reports kernel failures asynchronously: the traceback may point at a later, innocent line.",
}
#: What the framework adapters could not read, in one line.
COULD_NOT_READ = "Could not read {what}; the rest of this report stands."


@dataclass(frozen=True)
class _Cause:
    """Step 1's answer: the catalogued cause (None for sticky/follow-on errors), its words, the value the
    error named (CPU twins)."""

    cause: Cause | None
    text: Text
    value: int | None = None

    @property
    def id(self) -> str | None:
        return self.cause.id if self.cause is not None else None


def diagnose(ev: Evidence, rules: Sequence[RuleEntry] = RULES) -> Diagnosis:
    """``rules``: the post-mortem rules to run, each under its own guard (a crash becomes a note).

    In steps: which cause (:func:`_which_cause`), what a validator already knew (:func:`_validator_facts`),
    what the rules find (:func:`_run_rules`), what the framework adapters add (:func:`_framework_facts`),
    and the status (:func:`_status`).
    """
    det = ev.detection
    which = _which_cause(ev)
    op, specific, facts = _validator_facts(det.stop)
    likely_fix = specific
    notes = [ASYNC_NOTE[det.kind]] if det.kind in ASYNC_NOTE else []
    finding, rule_notes = _run_rules(ev, which, rules)
    notes += rule_notes
    culprit = None
    if finding is not None and (det.stop is None or finding.fix):
        specific, likely_fix, culprit = finding.specific, finding.fix, finding.culprit
        op = op or finding.op
        facts += finding.facts
    if det.stop is not None:
        facts = _one_count(facts)
    facts = _framework_facts(facts, ev.framework_facts)
    notes += ev.notes
    notes += [hints.FRAMEWORK_ADVICE[key] for key in ev.advice if key in hints.FRAMEWORK_ADVICE]
    if ev.unread:
        notes.append(COULD_NOT_READ.format(what=", ".join(ev.unread)))
    if ev.sites and which.id == GENERIC_ID:
        site = ev.sites[0]
        specific = specific or unknown_site_sentence(site.condition, site.file or site.where, site.function)
    dead, status, state = _status(det.kind, det.kills_context)
    return Diagnosis(
        kind=det.kind.value,
        context_dead=dead,
        cause_id=which.id or det.kind.value,
        title=which.text.title,
        headline=f"{state} · {which.text.title}" + (f" in {op}" if op else ""),
        status=status,
        specific=specific,
        explanation=which.text.explanation,
        fix=which.text.fix,
        op=op,
        facts=tuple(facts),
        assert_sites=tuple(s.summary() for s in ev.sites),
        assert_raw=tuple(s.first.raw for s in ev.sites),
        exception_line=det.first_line,
        exception_text=det.message,
        user_line=ev.user_frame,
        cell=ev.execution_count,
        error_code=det.error_code,
        notes=tuple(notes),
        cuda_device=_cuda_device(ev),
        likely_fix=likely_fix,
        follow_ons=ev.follow_ons,
        culprit=culprit,
    )


def _which_cause(ev: Evidence) -> _Cause:
    """The catalogued cause: from the assertion lines (device asserts), the validator, or the CPU twin."""
    det = ev.detection
    if det.kind is Kind.DEVICE_ASSERT:
        for site in ev.sites:
            cause = match_assert(site.condition, site.file, site.function)
            if cause is not None:
                return _Cause(cause, _words(cause))
        generic = get_cause(GENERIC_ID)
        return _Cause(generic, (None if ev.sites else no_line_text(det.message)) or _words(generic))
    if det.kind is Kind.STICKY:
        return _Cause(None, (None if ev.sites else no_line_text(det.message, sticky=True)) or _sticky_text(det.message))
    if det.kind is Kind.FOLLOW_ON:
        return _Cause(None, FOLLOW_ON)
    if det.stop is not None:
        cause = get_cause(det.stop.cause_id)
        return _Cause(cause, _words(cause))
    if det.kind is Kind.CPU_TWIN and det.twin is not None:
        cause = get_cause(det.twin.cause_id)
        return _Cause(cause, _words(cause), det.twin.value)
    generic = get_cause(GENERIC_ID)
    return _Cause(generic, _words(generic))


def _words(cause: Cause) -> Text:
    return Text(cause.title, cause.explanation, cause.fix)


def _validator_facts(stop: ValidatorStop | None) -> tuple[str | None, str | None, list[tuple[str, str]]]:
    """What a validator said before any kernel ran: the op, its fix, and the call's evidence lines."""
    if stop is None:
        return None, None, []
    facts = [("call", f"{stop.op}({stop.argument}=...)"), ("valid range", stop.valid),
             ("bad values", str(stop.n_bad))]
    if stop.examples:
        facts.append(("first", ", ".join(f"{v} at {list(p)}" for p, v in stop.examples[:5])))
    return stop.op, stop.hint or None, facts


def _run_rules(ev: Evidence, which: _Cause, rules: Sequence[RuleEntry]) -> tuple[Finding | None, tuple[str, ...]]:
    """The first rule finding for a catalogued cause (each rule under its own guard)."""
    cause = which.cause
    if cause is None or cause.id == GENERIC_ID:
        return None, ()
    stop = ev.detection.stop
    return find(Case(ev, cause.id, cause.group, which.value, stop.facts if stop is not None else None), rules)


def _framework_facts(facts: list[tuple[str, str]], extra: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The rules' evidence lines, with the framework adapters' lines: an adapter's richer line replaces the
    rule's line of the same name (``model.config``), the others follow."""
    richer = dict(extra)
    out = [(k, richer.pop(k, v)) for k, v in facts]
    return out + [(k, v) for k, v in extra if k in richer]


def _status(kind: Kind, kills_context: bool) -> tuple[bool, str, str]:
    """Whether the context is dead, the status line, and the headline's first words."""
    if kills_context:
        return True, DEAD_CONTEXT, "GPU context dead"
    if kind is Kind.VALIDATOR:
        return False, ALIVE_AFTER_VALIDATOR, "GPU alive"
    return False, ALIVE_CPU, "CPU error"


def _cuda_device(ev: Evidence) -> int | None:
    for t in ev.tensors:
        if t.device.startswith("cuda"):
            return int(t.device.partition(":")[2] or 0)
    return None


def _one_count(facts: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """A validator's count and a rule's line on the same tensor say the same: keep one, naming the tensor."""
    found = dict(facts)
    if "bad values" not in found or "first" not in found:
        return facts
    same = f"{found['bad values']} bad value(s); first: {found['first']}"
    names = [k for k, v in facts if v == same]
    if not names:
        return facts
    return [(k, f"{v} (in `{names[0]}`)" if k == "bad values" else v) for k, v in facts if v != same]
