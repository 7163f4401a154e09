"""Rule for a gather/scatter index out of range under a label-smoothing loss: the class labels are the index.

``LabelSmoothingCrossEntropy`` (timm) and the HF Trainer's ``LabelSmoother`` take each label's log-probability
with ``gather``; Mixup builds soft targets with ``one_hot``'s ``scatter_`` for ``SoftTargetCrossEntropy``. A
label >= the number of classes then fails in ScatterGatherKernel.cu ("index out of bounds"), not in
``nll_loss``: the same cause as a class label out of range, worded the same (:func:`..hints.class_labels`).
Example: "LabelSmoothingCrossEntropy gathers each label's log-probability: class label 3 is outside 0..2
(the model has 3 classes). Likely fix: the labels reach 3 with 3 classes: ... timm.create_model(...,
num_classes=4) ..."
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.causes.rule_base import Case, Finding, last_linear, pick, range_text
from cudaassert_ipy.diagnose.culprit import CLASS_LABELS, Culprit
from cudaassert_ipy.diagnose.hints import LabelFacts

if TYPE_CHECKING:
    from cudaassert_ipy.diagnose.evidence import Evidence

__all__ = ["LABEL_INDEX_OWNERS", "SMOOTHING_LOSSES", "label_smoothing"]

#: Losses whose labels become a gather or scatter index (timm's, by class name).
SMOOTHING_LOSSES = ("LabelSmoothingCrossEntropy", "SoftTargetCrossEntropy", "JsdCrossEntropy")
#: Objects whose method turns class labels into a gather/scatter index (by class name): the losses above, the HF
#: Trainer's ``LabelSmoother`` and timm's ``Mixup`` (its ``one_hot``). The validators look for them on the stack.
LABEL_INDEX_OWNERS = (*SMOOTHING_LOSSES, "LabelSmoother", "Mixup", "FastCollateMixup")
#: The HF Trainer's label smoother, as the transformers adapter names it.
HF_SMOOTHER = "trainer.label_smoother"
GATHERS = "{loss} gathers each label's log-probability, so the labels are the gather's index"
SOFT_TARGETS = "{loss} takes one-hot (Mixup) targets, so the labels are one_hot's scatter index"
OUTSIDE = ": class label {value} is outside {valid} (the model has {n} classes)."
COUNT = "{count} value(s) of `{name}` are out of range (first: {shown})."
_LABEL_WORDS = ("target", "label", "y", "cls")


def _loss(ev: Evidence) -> tuple[str, str] | None:
    """(the loss's class name, how it uses the labels), or None when no label-smoothing loss is around."""
    for loss in ev.losses:
        if loss.type_name in SMOOTHING_LOSSES:
            words = SOFT_TARGETS if loss.type_name == "SoftTargetCrossEntropy" else GATHERS
            return loss.type_name, words.format(loss=f"`{loss.name}` ({loss.type_name})")
    if any(key == HF_SMOOTHER for key, _ in ev.framework_facts):
        return "LabelSmoother", GATHERS.format(loss="The Trainer's LabelSmoother")
    return None


def _classes(ev: Evidence) -> int | None:
    if ev.head is not None and isinstance(ev.head.now, int) and ev.head.now > 0:
        return ev.head.now
    lin = last_linear(ev)
    n = lin.get("out_features") if lin is not None else None
    return n if isinstance(n, int) and n > 0 else None


def label_smoothing(case: Case) -> Finding | None:
    ev = case.ev
    loss = _loss(ev)
    n = _classes(ev)
    if loss is None or n is None:
        return None
    f = Finding(op=loss[0])
    bad: tuple[int, ...] = ()
    for cand in pick(
        [v for v in ev.labels if any(w in v.name.lower() for w in _LABEL_WORDS)], _LABEL_WORDS, ev.cell_source
    ):
        count, examples = cand.outside(0, n)
        if count:
            bad = cand.distinct_outside(0, n)
            shown = ", ".join(f"{v} at {list(p)}" for p, v in examples)
            f.facts.append((cand.name, f"{count} bad value(s); first: {shown}"))
            f.sentences.append(COUNT.format(count=count, name=cand.name, shown=shown))
            break
    value = case.value if case.value is not None else (max(bad, key=abs) if bad else None)
    if value is None:
        return None
    f.sentences.insert(0, loss[1] + OUTSIDE.format(value=value, valid=range_text(n), n=n))
    facts = LabelFacts(bad=bad or (value,), n_classes=n, head=ev.head)
    f.fix = hints.class_labels(facts) or None
    lin = last_linear(ev)
    head = lin if lin is not None and lin.get("out_features") == n else None
    # the head (or the framework's class-count setting, ev.head) is what a patch widens; the loss takes no
    # ignore_index, so it is left out of the culprit
    f.culprit = Culprit(
        CLASS_LABELS,
        facts,
        module=head.name if head else None,
        module_type=head.type_name if head else None,
        dataset=ev.datasets[0][0] if ev.datasets else None,
    )
    return f
