"""Evidence in, one frozen Diagnosis out: what happened, why, and what to do.

Renderers (report, panel) hold no logic: everything they show is decided here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.causes import (
    GENERIC_ID,
    Cause,
    get_cause,
    match_assert,
    match_file,
    unknown_site_sentence,
)
from cudaassert_ipy.diagnose.causes.rule_base import LIKELY_FIX
from cudaassert_ipy.diagnose.causes.rules import RULE_FAILED, RULES, Case, Finding, RuleEntry, find
from cudaassert_ipy.diagnose.causes.texts import (
    FOLLOW_ON,
    FRAME_LATE,
    STICKY_TEXTS,
    UNSURE,
    UNSURE_LEAD,
    UNSURE_LOOKUP_LEAD,
    UNSURE_POINT_LEAD,
    Text,
    no_line_text,
)
from cudaassert_ipy.diagnose.culprit import Culprit
from cudaassert_ipy.diagnose.detection import Kind
from cudaassert_ipy.diagnose.evidence import Evidence
from cudaassert_ipy.diagnose.validator_stop import ValidatorStop

if TYPE_CHECKING:  # the frame catalogue loads on the first report that has frames to read
    from cudaassert_ipy.diagnose.code_lines import Ranking
    from cudaassert_ipy.diagnose.frame_points import FrameFinding, Point

__all__ = ["DEAD_CONTEXT", "Diagnosis", "diagnose"]

DEAD_CONTEXT = (
    "The GPU context of this kernel is dead. Nothing on the GPU can be used again in this process; restart the kernel."
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
    #: what the cause rests on: "the kernel's assertion line", "the error text", "a frame: ...", "host facts"
    basis: str = ""
    #: when nothing decides: the likely causes, most common first, each with what to check
    candidates: tuple[str, ...] = ()
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
    basis = _basis(ev, which)
    op, specific, facts = _validator_facts(det.stop)
    likely_fix = specific
    notes = [ASYNC_NOTE[det.kind]] if det.kind in ASYNC_NOTE else []
    finding, rule_notes = _run_rules(ev, which, rules)
    point: FrameFinding | None = None
    guessed = which.id in _GENERIC_IDS  # nothing named the cause before the frames: a weak point only ranks it
    if finding is None or not finding.fix:  # host facts that decided the fix stand; else the frames may name more
        point, point_note = _guarded_point(ev, which)
        notes += [point_note] if point_note else []
    if point is not None:
        cause = get_cause(point.point.cause)
        # the kernel's own line named a catalogued cause; a lookup's check ("srcIndex < srcSelectDimSize") does not
        # say which table, so a point that names the table (positions, token types) may say what its index is
        named = (
            bool(ev.sites)
            and which.id not in _GENERIC_IDS
            and not (which.id in _LOOKUP_CAUSES and cause.id in _LOOKUP_TABLES)
            and not (point.frame is not None and cause.id in _INDEX_MEANINGS and which.id in point.point.refines)
        )
        if cause.id != which.id and not named:  # a named cause stands: the frame adds its words, not another cause
            which = _Cause(cause, _words(cause), which.value)
            finding, rule_notes = _run_rules(ev, which, rules)
        basis = f"a frame: {point.where}" if point.frame is not None else f"the error text ({point.point.id})"
    ranking = _guarded_ranking(ev, which, notes) if point is None and finding is None else None
    if ranking is not None:  # nothing decided: the user's own line ranks the likely causes, and names the first
        which = _Cause(get_cause(ranking.causes[0]), _words(get_cause(ranking.causes[0])), which.value)
        finding, rule_notes = _run_rules(ev, which, rules)
        basis = (RANKED_TEXT_BASIS if ranking.frame.line == 0 else RANKED_BASIS).format(
            where=ranking.where, code=ranking.frame.code
        )
    notes += rule_notes
    culprit = None
    if finding is not None and (det.stop is None or finding.fix):
        specific, likely_fix, culprit = finding.specific, finding.fix, finding.culprit
        op = op or finding.op
        facts += finding.facts
        if finding.fix and det.stop is None:
            basis = f"{basis}, and host facts" if basis else "host facts"
    if point is not None:
        own = point.point.size_in(det.message, ev.pasted)  # a bound the point's own line printed (a warning's)
        size = own if own is not None else det.twin.size if det.twin is not None else None
        said, fixed, late = _frame_words(point, det.message, size, "the error" if own is None else "the text")
        if not likely_fix and fixed and which.value is not None and which.id in _LABEL_CAUSES:
            fixed = f"{hints.label_value(which.value)}; {fixed}"  # the value the error named says the most
        if not likely_fix:
            specific = f"{said} {LIKELY_FIX.format(fix=fixed)}" if fixed else said
        likely_fix = likely_fix or fixed
        notes += [late] if late else []
    if not likely_fix and which.value is not None and which.id in _LABEL_CAUSES:
        likely_fix = hints.label_value(which.value)
        specific = f"{specific or VALUE_NAMED.format(value=which.value)} {LIKELY_FIX.format(fix=likely_fix)}"
    candidates = _candidates(ev, which, point, finding, guessed)
    if candidates[:1] == (UNSURE_POINT_LEAD,):
        op = None  # the headline says "likely", and names no op the text did not show
    basis = basis or (NOTHING_DECIDES if candidates else "")
    if ranking is not None and not likely_fix:
        specific = specific or RANKED.format(
            code=ranking.frame.code, where=ranking.where, op=ranking.rule.op, title=which.text.title
        )
        candidates = (RANKED_LEAD, *(hints.CODE_CHECKS[key] for key in ranking.checks))
        op = None  # a ranked guess names no op
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
        headline=f"{state} · {LIKELY if candidates[:1] in _GUESSES and which.id not in _GENERIC_IDS else ''}"
        f"{which.text.title}" + (f" in {op}" if op else ""),
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
        basis=basis,
        candidates=candidates,
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
        named = None if ev.sites else match_file(det.message)  # an old text names the kernel's file
        if named is not None:
            return _Cause(named, _words(named))
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
    facts = [("call", f"{stop.op}({stop.argument}=...)"), ("valid range", stop.valid), ("bad values", str(stop.n_bad))]
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


_GENERIC_IDS = (GENERIC_ID, None)
_LABEL_CAUSES = frozenset(k for k, v in hints.FAMILIES.items() if v is hints.LabelFacts)
VALUE_NAMED = "The error names the label value {value}."
LIKELY = "likely "  # a headline's cause that a weak failure point ranked first, not one the text decided
#: Which causes a failure point may name: a generic failure (no line, a generic index check), or its own cause.
_POINT_KINDS = (Kind.DEVICE_ASSERT, Kind.CPU_TWIN, Kind.FOLLOW_ON, Kind.STICKY)
_SIZE_IN_TEXT = re.compile(r"(?:with size|out of table with|table with|num_embeddings\s*=?)\s*(\d+)( rows)?")
#: A lookup's check, which names no table: the report ranks what the index may be (token ids, positions), and a
#: text point (a tokenizer's warning, a log line) may say which table, as a frame may.
_LOOKUP_CAUSES = frozenset({"index_select_out_of_range", "thc_index_select_out_of_range"})
#: The tables a lookup's index may be named into (the point's cause replaces the lookup's).
_LOOKUP_TABLES = frozenset({"position_ids_out_of_range", "token_type_ids_out_of_range"})
#: What an index op's index counts, which only a framework's frame can say: a kernel line names the op (a scatter, a
#: gather, a lookup), and a frame in a graph library's code says the index is a node id; the frame's cause replaces
#: the op's where the point refines it.
_INDEX_MEANINGS = frozenset({"graph_node_index_out_of_range"})
#: The UNSURE keys of a lookup that names its op but not its table (the others are weak points' causes, ranked).
_LOOKUP_UNSURE = frozenset({"lookup", "lookup_positions", "large_table", "lookup_boxes", "lookup_token_types"})
#: Gather/scatter: the kernel line or the CPU message names the op, not what its index counts (class labels in a
#: loss, node ids, ...): the report ranks what it may be, as for a lookup's table, in the order the dimension the
#: CPU message names makes likely (1: the class dimension of scores and one-hot targets; 0: rows, graph nodes).
_SCATTER_CAUSES = frozenset(
    {
        "scatter_gather_index_out_of_range_v1",
        "scatter_gather_index_out_of_range_v2",
        "thc_gather_index_out_of_range",
        "thc_scatter_index_out_of_range",
    }
)


def _basis(ev: Evidence, which: _Cause) -> str:
    """What the cause rests on, before frames and host facts are read."""
    det = ev.detection
    if det.stop is not None:
        return "a validator's check of the inputs"
    if ev.sites and which.id not in _GENERIC_IDS:
        return "the kernel's assertion line"
    if which.id not in _GENERIC_IDS and det.kind is Kind.DEVICE_ASSERT:
        return "the kernel file the error text names"
    if det.kind is Kind.CPU_TWIN:
        return "the error text"
    return ""


def _guarded_point(ev: Evidence, which: _Cause) -> tuple[FrameFinding | None, str | None]:
    """The frame point, or the one note that says reading the frames failed (the rest of the report stands)."""
    try:
        return _frame_point(ev, which), None
    except Exception as e:  # a broken catalogue entry or pattern costs one note, not the report
        return None, RULE_FAILED.format(rule="frame_points", error=f"{type(e).__name__}: {e}")


def _frame_point(ev: Evidence, which: _Cause) -> FrameFinding | None:
    """The failure point the traceback passes through, when it may name (or sharpen) the cause."""
    det = ev.detection
    if det.stop is not None or det.kind not in _POINT_KINDS:
        return None
    if ev.sites and which.id not in _GENERIC_IDS and not any(which.id in p.refines for p in _points()):
        return None
    from cudaassert_ipy.diagnose.frame_points import find_point

    found = find_point(ev.frames, det.message, ev.pasted)
    if found is None:
        return None
    cause = found.point.cause
    if found.frame is None and ev.sites and which.id not in _GENERIC_IDS and which.id not in _LOOKUP_CAUSES:
        return None  # the kernel's own line named its cause: only a frame, not the text around it, may sharpen it
    if which.id in _GENERIC_IDS or which.id == cause or which.id in found.point.refines:
        return found
    return None


#: What a cause ranked from the user's own line rests on, and what the report says of it (diagnose/code_lines.py).
RANKED_BASIS = "a code line: {where} (`{code}`), ranked, not decided"
RANKED_TEXT_BASIS = "a line of {where}: `{code}`, ranked, not decided"
RANKED = (
    "Nothing in the text decides the cause (no kernel assertion line, no framework frame that names one). The "
    "line `{code}` ({where}) is {op}, so the likely causes are ranked from it; the most likely, {title}, is "
    "named here."
)
NOTHING_DECIDES = (
    "nothing that decides: no catalogued kernel line, frame, host fact or code line names a cause; the "
    "likely causes are ranked by how common they are"
)
RANKED_LEAD = "Ranked from the line that calls the failing op; check them in this order:"
#: The leads of a cause ranked first, not decided: its headline says "likely" (a lookup's lead only asks which table).
_GUESSES = ((UNSURE_POINT_LEAD,), (RANKED_LEAD,))
#: The path parts of the serving engines' own code (vLLM, SGLang, TGI's server, LMDeploy).
_SERVING_PATHS = ("vllm/", "sglang/", "text_generation_server/", "lmdeploy/")
_RANKED_KINDS = (Kind.DEVICE_ASSERT, Kind.FOLLOW_ON, Kind.STICKY)


def _guarded_ranking(ev: Evidence, which: _Cause, notes: list[str]) -> Ranking | None:
    """The likely causes the user's own lines rank, when nothing (kernel line, frame point, validator) decided."""
    det = ev.detection
    if which.id not in _GENERIC_IDS or ev.sites or det.stop is not None or det.kind not in _RANKED_KINDS:
        return None
    try:
        from cudaassert_ipy.diagnose.code_lines import rank, rank_text

        # no user line a rule reads: a package's own loss or model line may, where no framework ranks the causes,
        # and then a line of the text itself (a printed config's class count, a model's embedding size)
        found = rank(ev.frames)
        if found is None and _framework_key(ev) == "any":
            found = rank(ev.frames, library=True) or rank_text(ev.pasted)
        return found
    except Exception as e:  # a broken rule costs one note, not the report
        notes.append(RULE_FAILED.format(rule="code_lines", error=f"{type(e).__name__}: {e}"))
        return None


def _points() -> tuple[Point, ...]:
    from cudaassert_ipy.diagnose.frame_points import points

    return points()


def _frame_words(
    found: FrameFinding, message: str, size: int | None, who: str = "the error"
) -> tuple[str, str | None, str | None]:
    """The point's sentence, its fix in its framework's words, and the note when the frame is a late one."""
    point = found.point
    if size is None:
        m = _SIZE_IN_TEXT.search(message)
        # 1.x's CPU lookup printed the last row's index ("out of table with 511 rows": 512 rows)
        size = int(m.group(1)) + (1 if m.group(2) else 0) if m else None
    named = f" ({who} names a size of {size}: {point.bound}={size}?)" if size is not None and point.bound else ""
    if found.frame is None:
        said = f"{point.says[0].upper()}{point.says[1:]}{named}."
    else:
        code = f" (`{found.frame.code}`)" if found.frame.code else ""
        said = f"The traceback passes through {found.where}{code}: {point.says}{named}."
    fixed = hints.frame_fix(point.fix, size) if point.fix else None
    late = None
    if found.late_frame is not None:
        frame = found.late_frame
        where = f"{frame.func}: `{frame.code}`" if frame.code else frame.func
        earlier = point.says.split(":", 1)[0]
        late = FRAME_LATE.format(where=where, earlier=earlier)
    return said, fixed, late


def _candidates(
    ev: Evidence, which: _Cause, point: FrameFinding | None, finding: Finding | None, guessed: bool
) -> tuple[str, ...]:
    """Honest when unsure: two or three likely causes with what to check, when nothing decided the cause; for a
    lookup whose table nothing named (a kernel line, a bare ``index out of range in self``, F.embedding's frame),
    what the index may count."""
    if ev.detection.stop is not None or (finding is not None and finding.fix):
        return ()
    if point is not None:
        key = point.point.unsure
        if key in _LOOKUP_UNSURE:
            return (UNSURE_LOOKUP_LEAD, *UNSURE[key])
        # a weak point ranks its cause first only where nothing named a cause before it
        return (UNSURE_POINT_LEAD, *UNSURE[key]) if key in UNSURE and guessed else ()
    if which.id in _LOOKUP_CAUSES:
        return (UNSURE_LOOKUP_LEAD, *UNSURE["lookup"])
    if which.id in _SCATTER_CAUSES:
        twin = ev.detection.twin
        dim = twin.dim if twin is not None else None
        key = "scatter_gather_rows" if dim == 0 else "class_dim" if dim == 1 else "scatter_gather"
        return (UNSURE_LOOKUP_LEAD, *UNSURE[key])
    if finding is not None or which.id not in _GENERIC_IDS or ev.detection.kind is Kind.CPU_TWIN:
        return ()
    if ev.sites and which.cause is not None and which.cause.id != GENERIC_ID:
        return ()
    return (UNSURE_LEAD, *UNSURE[_framework_key(ev)])


def _framework_key(ev: Evidence) -> str:
    """The UNSURE key of the framework the frames' module paths name ("any": none that ranks its own causes)."""
    paths = " ".join(f.norm_path for f in ev.frames)
    if "transformers/" in paths or "peft/" in paths or "trl/" in paths:
        key = "transformers"
    elif any(p in paths for p in ("ultralytics/", "yolov5", "detection/", "mmdet/", "detectron2/")):
        key = "detection"
    elif any(p in paths for p in ("torch_geometric/", "dgl/", "torch_scatter/")):
        key = "graph"
    else:
        key = "any"
    if any(p in paths for p in _SERVING_PATHS):  # an inference server computes no loss: prompts, positions, sampling
        key = "serving"
    return key
