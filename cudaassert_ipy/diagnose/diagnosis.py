"""Evidence in, one frozen Diagnosis out: what happened, why, and what to do.

Renderers (report, panel) hold no logic: everything they show is decided here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from cudaassert_ipy.diagnose.causes import GENERIC_ID, Cause, get_cause, match_assert, unknown_site_sentence
from cudaassert_ipy.diagnose.causes.rules import RULES, Case, RuleEntry, find
from cudaassert_ipy.diagnose.causes.texts import FOLLOW_ON, STICKY_TEXTS, Text, no_line_text
from cudaassert_ipy.diagnose.detection import Kind
from cudaassert_ipy.diagnose.evidence import Evidence

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


def _sticky_text(message: str) -> Text:
    for key, text in STICKY_TEXTS.items():
        if key in message:
            return text
    return STICKY_TEXTS["unspecified launch failure"]


def diagnose(ev: Evidence, rules: Sequence[RuleEntry] = RULES) -> Diagnosis:
    """``rules``: the post-mortem rules to run, each under its own guard (a crash becomes a note)."""
    det = ev.detection
    cause: Cause | None = None
    text: Text | None = None
    value: int | None = None
    notes: list[str] = []
    if det.kind is Kind.DEVICE_ASSERT:
        for site in ev.sites:
            cause = match_assert(site.condition, site.file, site.function)
            if cause is not None:
                break
        if cause is None:
            cause = get_cause(GENERIC_ID)
            if not ev.sites:
                text = no_line_text(det.message)
        notes.append("CUDA reports kernel failures asynchronously: the traceback above points at the call where "
                     "the failure surfaced, not at the call that launched the failing kernel.")
    elif det.kind is Kind.STICKY:
        text = (None if ev.sites else no_line_text(det.message, sticky=True)) or _sticky_text(det.message)
        notes.append("CUDA reports kernel failures asynchronously: the traceback may point at a later, innocent line.")
    elif det.kind is Kind.FOLLOW_ON:
        text = FOLLOW_ON
    elif det.kind is Kind.VALIDATOR:
        cause = get_cause(getattr(det.exception, "cause_id", GENERIC_ID))
    elif det.kind is Kind.CPU_TWIN and det.twin is not None:
        cause = get_cause(det.twin.cause_id)
        value = det.twin.value

    if text is None and cause is not None:
        text = Text(cause.title, cause.explanation, cause.fix)
    assert text is not None
    cause_id = cause.id if cause is not None else f"{det.kind.value}"

    facts: list[tuple[str, str]] = []
    specific: str | None = None
    likely_fix: str | None = None
    op: str | None = None
    if det.kind is Kind.VALIDATOR:
        exc = det.exception
        op = getattr(exc, "op", None)
        specific = likely_fix = getattr(exc, "hint", None) or None
        facts += [("call", f"{op}({getattr(exc, 'argument', '?')}=...)"),
                  ("valid range", str(getattr(exc, "valid", "?"))),
                  ("bad values", str(getattr(exc, "n_bad", "?")))]
        examples = getattr(exc, "examples", None) or []
        if examples:
            facts.append(("first", ", ".join(f"{v} at {list(p)}" for p, v in examples[:5])))
    if cause is not None and cause.id != GENERIC_ID:
        known = getattr(det.exception, "facts", None) if det.kind is Kind.VALIDATOR else None
        finding, rule_notes = find(Case(ev, cause.id, cause.group, value, known), rules)
        notes += rule_notes
        if finding is not None and (det.kind is not Kind.VALIDATOR or finding.fix):
            specific, likely_fix = finding.specific, finding.fix
            op = op or finding.op
            facts += finding.facts
    if det.kind is Kind.VALIDATOR:
        facts = _one_count(facts)

    dead = det.kills_context
    if dead:
        status = DEAD_CONTEXT
    elif det.kind is Kind.VALIDATOR:
        status = ALIVE_AFTER_VALIDATOR
    else:
        status = ALIVE_CPU
    headline_parts = ["GPU context dead" if dead else ("GPU alive" if det.kind is Kind.VALIDATOR else "CPU error")]
    headline_parts.append(text.title + (f" in {op}" if op else ""))
    if ev.sites and cause is not None and cause.id == GENERIC_ID:
        site = ev.sites[0]
        specific = specific or unknown_site_sentence(site.condition, site.file or site.where, site.function)
    return Diagnosis(
        kind=det.kind.value,
        context_dead=dead,
        cause_id=cause_id,
        title=text.title,
        headline=" · ".join(headline_parts),
        status=status,
        specific=specific,
        explanation=text.explanation,
        fix=text.fix,
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
    )


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
