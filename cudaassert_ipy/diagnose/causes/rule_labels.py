"""Rule for class labels out of range (cross_entropy, nll_loss, their 2-D forms, multi_margin_loss).

Example: "cross_entropy got class label 195, but the model's last layer `fc.3` has out_features=195,
so labels must be 0..194. Likely fix: the dataset lists 196 classes but the model outputs 195: set
out_features=196."
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.causes.rule_base import Case, Finding, last_linear, pick, range_text
from cudaassert_ipy.diagnose.culprit import CLASS_LABELS, Culprit
from cudaassert_ipy.diagnose.hints import LabelFacts

if TYPE_CHECKING:
    from cudaassert_ipy.diagnose.evidence import Evidence
    from cudaassert_ipy.diagnose.facts import LabelValues

__all__ = ["class_labels"]

GOT_LABEL = "{op} got class label {value}, but {source}, so labels must be {valid}."
GOT_LABEL_NO_CLASSES = "{op} got class label {value}, outside 0..C-1."
BAD_COUNT = "{count} value(s) of `{name}` are out of range (first: {shown})."
CLASSES_OF_INPUT = "the input has {n} classes (shape {shape})"
CLASSES_OF_LAYER = "the model's last layer `{name}` has out_features={n}"
CLASSES_OF_HEAD = "`{owner}` has {setting}={n}"
UINT8 = "The labels are uint8 (Byte), so the kernel checked only the upper bound."

_LABEL_WORDS = ("target", "label", "y", "mask", "gt", "cls")


def class_labels(case: Case) -> Finding | None:
    ev, call = case.ev, case.ev.call
    known = case.known if isinstance(case.known, LabelFacts) else None
    f = Finding(op=call.function if call is not None else "cross_entropy")
    n_classes, source = _n_classes(case, f)
    ignore = call.scalar("ignore_index") if call is not None else None
    if ignore is None and known is not None:
        ignore = known.ignore_index
    if ignore is None:
        for loss in pick(ev.losses, ("loss", "criterion"), ev.cell_source):
            if loss.get("ignore_index") is not None:
                ignore = loss.get("ignore_index")
                f.facts.append((loss.name, f"{loss.type_name}(ignore_index={ignore})"))
                break
    candidates = _candidates(ev)
    bad: tuple[int, ...] = known.bad if known is not None else ()
    value = case.value
    if n_classes is not None:
        for cand in candidates:
            count, examples = cand.outside(0, n_classes, ignore)
            if not count:
                continue
            bad = bad or cand.distinct_outside(0, n_classes, ignore)
            shown = ", ".join(f"{v} at {list(p)}" for p, v in examples)
            f.sentences.append(BAD_COUNT.format(count=count, name=cand.name, shown=shown))
            f.facts.append((cand.name, f"{count} bad value(s); first: {shown}"))
            break
    if value is None and bad:
        value = max(bad, key=abs)
    if value is None and candidates and n_classes is None:
        value = candidates[0].maximum
    if value is not None and n_classes is not None:
        f.sentences.insert(0, GOT_LABEL.format(op=f.op, value=value, source=source, valid=range_text(n_classes)))
    elif value is not None:
        f.sentences.insert(0, GOT_LABEL_NO_CLASSES.format(op=f.op, value=value))
    declared, declared_by = _declared(ev, f)
    if value is not None and not bad:
        bad = (value,)
    if n_classes is not None and bad:
        facts = LabelFacts(
            bad=bad,
            n_classes=n_classes,
            ignore_index=ignore,
            dense=_dense(case, candidates, known),
            declared=declared,
            declared_by=declared_by,
            head=ev.head,
        )
        f.fix = hints.class_labels(facts) or None
        f.culprit = _culprit(case, facts)
    if case.cause_id.endswith("_uint8"):  # the kernel printed the uint8 form of its check
        f.sentences.append(UINT8)
        f.fix = "; ".join(x for x in (f.fix, hints.UINT8_LABELS) if x)
    return f


def _culprit(case: Case, facts: LabelFacts) -> Culprit:
    """The head that bounds the labels (when its class count is the one that failed), the loss, the dataset."""
    ev = case.ev
    lin = last_linear(ev)
    head = lin if lin is not None and lin.get("out_features") == facts.n_classes else None
    loss = next(iter(pick(ev.losses, ("loss", "criterion"), ev.cell_source)), None)
    return Culprit(
        CLASS_LABELS,
        facts,
        module=head.name if head else None,
        module_type=head.type_name if head else None,
        loss=loss.name if loss else None,
        loss_type=loss.type_name if loss else None,
        op=ev.call.function if ev.call is not None else None,
        dataset=ev.datasets[0][0] if ev.datasets else None,
    )


def _n_classes(case: Case, f: Finding) -> tuple[int | None, str]:
    """The number of classes and the phrase saying where it comes from."""
    call, known = case.ev.call, case.known
    inp = call.tensor("input") if call is not None else None
    n: int | None = None
    source = ""
    if inp is not None and len(inp.shape) >= 1:
        n = int(inp.shape[1] if len(inp.shape) >= 2 else inp.shape[0])
        source = CLASSES_OF_INPUT.format(n=n, shape=inp.shape)
        f.facts.append(("input", f"shape {inp.shape}, {inp.dtype}, {inp.device}"))
    elif isinstance(known, LabelFacts):
        n = known.n_classes
        source = f"the input has {n} classes"
    lin = last_linear(case.ev)
    if lin is not None:
        f.facts.append((lin.name, f"out_features={lin.get('out_features')}"))
        if n is None or n == lin.get("out_features"):
            n = lin.get("out_features")
            source = CLASSES_OF_LAYER.format(name=lin.name, n=n)
    head = case.ev.head
    if n is None and head is not None and isinstance(head.now, int) and head.now > 0:
        n = head.now  # a framework's own layer (Keras' Dense): its adapter read the class count
        source = CLASSES_OF_HEAD.format(owner=head.owner, setting=head.setting, n=n)
    return n, source


def _candidates(ev: Evidence) -> list[LabelValues]:
    """The call's own target first, then the namespace's integer tensors by name."""
    own = ev.call.values("target") if ev.call is not None else None
    rest = [c for c in pick(ev.labels, _LABEL_WORDS, ev.cell_source) if c is not own]
    return ([own] if own is not None else []) + rest


def _dense(case: Case, candidates: list[LabelValues], known: LabelFacts | None) -> bool:
    if known is not None:
        return known.dense
    call = case.ev.call
    target = call.tensor("target") if call is not None else None
    if target is not None:
        return len(target.shape) >= 2
    return bool(candidates) and len(candidates[0].shape) >= 3


def _declared(ev: Evidence, f: Finding) -> tuple[int | None, str]:
    """How many classes the data says there are (a dataset's ``classes``, a config's ``num_labels``)."""
    for name, n in ev.datasets:
        f.facts.append((f"{name}.classes", f"{n} entries"))
        return n, "dataset"
    for cfg in ev.configs:
        if cfg.get("num_labels"):
            n = int(cfg.get("num_labels"))
            f.facts.append((cfg.name, f"num_labels={n}"))
            return n, "config"
    return None, "dataset"
