"""Rule for binary_cross_entropy's input or target outside [0, 1].

Example: "The input ranges from -2.5 to 4: these look like raw logits. Likely fix: the input must
be probabilities in [0, 1], not logits: pass the raw logits to nn.BCEWithLogitsLoss ..."
"""

from __future__ import annotations

from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.causes.rule_base import Case, Finding, pick
from cudaassert_ipy.diagnose.culprit import BCE, Culprit
from cudaassert_ipy.diagnose.hints import BceFacts

__all__ = ["bce"]

LOGITS = "The input ranges from {lo:.4g} to {hi:.4g}: these look like raw logits."
HAS_NAN = "The {which} contains NaN."
TARGET_RANGE = "The target ranges from {lo:.4g} to {hi:.4g}."


def bce(case: Case) -> Finding | None:
    which = "target" if "target" in case.cause_id else "input"
    f = Finding(op="binary_cross_entropy")
    values = case.ev.call.float_values(which) if case.ev.call is not None else None
    facts = case.known if isinstance(case.known, BceFacts) else None
    if values is not None:
        nan = ", contains NaN" if values.has_nan else ""
        f.facts.append((which, f"shape {values.shape}, min {values.lo:.4g}, max {values.hi:.4g}{nan}"))
        facts = facts or BceFacts(which, values.lo, values.hi, values.has_nan, values.whole_outside(0, 1))
    if facts is None:
        return f  # the op alone: no values were readable (a CUDA tensor)
    outside = facts.lo < 0 or facts.hi > 1
    if which == "input" and outside:
        f.sentences.append(LOGITS.format(lo=facts.lo, hi=facts.hi))
    elif outside:
        f.sentences.append(TARGET_RANGE.format(lo=facts.lo, hi=facts.hi))
    if facts.has_nan:
        f.sentences.append(HAS_NAN.format(which=which))
    f.fix = hints.bce(facts) or None
    losses = [
        m for m in pick(case.ev.losses, ("loss", "criterion"), case.ev.cell_source) if m.type_name.startswith("BCE")
    ]
    f.culprit = Culprit(
        BCE, facts, loss=losses[0].name if losses else None, loss_type=losses[0].type_name if losses else None, op=f.op
    )
    return f
