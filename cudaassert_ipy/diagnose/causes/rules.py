"""Small rules per family: combine a cause with the evidence into one specific sentence.

A rule returns a :class:`Finding` (or None when it has nothing to add). It reads host facts and
CPU tensors only. Example output: "cross_entropy got class label 195, but the model's last
layer `fc.3` has out_features=195, so labels must be 0..194. `train_ds.classes` has 196
entries: set out_features=196."
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from cudaassert_ipy.diagnose.evidence import Evidence, LabelValues, ModuleFact

__all__ = ["Finding", "find"]


@dataclass
class Finding:
    sentences: list[str] = field(default_factory=list)
    facts: list[tuple[str, str]] = field(default_factory=list)
    op: str | None = None

    @property
    def specific(self) -> str | None:
        return " ".join(self.sentences) or None


_LABEL_WORDS = ("target", "label", "y", "mask", "gt", "cls")
_ID_WORDS = ("ids", "token", "input", "idx", "index", "x")


def _local(ev: Evidence, name: str) -> Any:
    return dict(ev.call_locals).get(name)


def _cpu(t: Any) -> bool:
    return t is not None and hasattr(t, "device") and t.device.type == "cpu"


def _pick(items: tuple, words: tuple[str, ...], source: str) -> list:
    """Order candidates: named in the cell first, then by name words."""
    def score(item: Any) -> tuple[int, int]:
        name = item.name.split(":")[-1]
        root = name.split(".")[0]
        return (root in source, any(w in name.lower() for w in words))
    return sorted(items, key=score, reverse=True)


def _last_linear(ev: Evidence) -> ModuleFact | None:
    if not ev.linears:
        return None
    roots: dict[str, list[ModuleFact]] = {}
    for lin in ev.linears:
        roots.setdefault(lin.name.split(".")[0], []).append(lin)
    named = [r for r in roots if r in ev.cell_source] or list(roots)
    return roots[named[0]][-1]


def _range_text(n: int) -> str:
    return f"0..{n - 1}" if n > 0 else "none (the dimension is empty)"


def class_target(ev: Evidence, value: int | None) -> Finding:
    f = Finding(op="cross_entropy")
    inp, target = _local(ev, "input"), _local(ev, "target")
    ignore = _local(ev, "ignore_index")
    n_classes: int | None = None
    source_of_c = ""
    if inp is not None and hasattr(inp, "shape") and len(inp.shape) >= 1:
        n_classes = int(inp.shape[1] if len(inp.shape) >= 2 else inp.shape[0])
        source_of_c = f"the input has {n_classes} classes (shape {tuple(inp.shape)})"
        f.facts.append(("input", f"shape {tuple(inp.shape)}, {inp.dtype}, {inp.device}"))
    lin = _last_linear(ev)
    if lin is not None:
        f.facts.append((f"{lin.name}", f"out_features={lin.get('out_features')}"))
        if n_classes is None or n_classes == lin.get("out_features"):
            n_classes = lin.get("out_features")
            source_of_c = f"the model's last layer `{lin.name}` has out_features={n_classes}"
    if ignore is None:
        for loss in _pick(ev.losses, ("loss", "criterion"), ev.cell_source):
            if loss.get("ignore_index") is not None:
                ignore = loss.get("ignore_index")
                f.facts.append((loss.name, f"{loss.type_name}(ignore_index={ignore})"))
                break
    labels = _label_candidates(ev, target)
    bad_count, examples, label_name = 0, [], None
    if n_classes is not None:
        for cand in labels:
            count, ex = cand.outside(0, n_classes, ignore)
            if count:
                bad_count, examples, label_name = count, ex, cand.name
                if value is None:
                    value = max(ex, key=lambda e: abs(e[1]))[1] if ex else None
                break
    if value is None and labels and n_classes is None:
        value = labels[0].maximum
    if value is not None and n_classes is not None:
        f.sentences.append(f"{f.op} got class label {value}, but {source_of_c}, so labels must be "
                           f"{_range_text(n_classes)}.")
    elif value is not None:
        f.sentences.append(f"{f.op} got class label {value}, outside 0..C-1.")
    if bad_count and label_name:
        shown = ", ".join(f"{v} at {list(p)}" for p, v in examples)
        f.sentences.append(f"{bad_count} value(s) of `{label_name}` are out of range (first: {shown}).")
        f.facts.append((label_name, f"{bad_count} bad value(s); first: {shown}"))
    dataset = _dataset_classes(ev, f)
    if value is not None:
        f.sentences.extend(_class_advice(value, n_classes, dataset, ignore, labels, target))
    return f


def _label_candidates(ev: Evidence, target: Any) -> list[LabelValues]:
    cands = list(_pick(ev.labels, _LABEL_WORDS, ev.cell_source))
    if target is not None and _cpu(target):
        cands = sorted(cands, key=lambda c: _same(c.tensor, target), reverse=True)
    return cands


def _same(a: Any, b: Any) -> bool:
    """Same values: the evidence keeps a detached view of the very tensor the call got."""
    try:
        return a.data_ptr() == b.data_ptr() and tuple(a.shape) == tuple(b.shape)
    except Exception:
        return False


def _dataset_classes(ev: Evidence, f: Finding) -> tuple[int, str] | None:
    """How many classes the data says there are, and where that number comes from."""
    for name, n in ev.datasets:
        f.facts.append((f"{name}.classes", f"{n} entries"))
        return n, f"`{name}.classes` has {n} entries"
    for cfg in ev.configs:
        if cfg.get("num_labels"):
            n = int(cfg.get("num_labels"))
            f.facts.append((cfg.name, f"num_labels={n}"))
            return n, f"`{cfg.name}.num_labels` is {n}"
    return None


def _class_advice(value: int, n_classes: int | None, dataset: tuple[int, str] | None, ignore: Any,
                  labels: list[LabelValues], target: Any) -> list[str]:
    out = []
    dense = target is not None and hasattr(target, "shape") and len(target.shape) >= 2
    if value == 255:
        out.append("255 is the 'void' label of VOC-style segmentation masks: pass ignore_index=255 to the loss.")
    elif value < 0:
        now = ignore if ignore is not None else -100
        out.append(f"Negative labels are only allowed as the loss's ignore_index (now {now}):"
                   f" if {value} marks padding, pass ignore_index={value}.")
    elif dataset is not None and n_classes is not None and dataset[0] > n_classes:
        out.append(f"{dataset[1]}: set out_features={dataset[0]}.")
    elif n_classes is not None and value == n_classes and any(c.minimum == 1 for c in labels):
        out.append(f"The labels look 1-based (1..{n_classes}): subtract 1 so they start at 0.")
    elif n_classes is not None and value >= n_classes:
        out.append(f"Either the model needs at least {value + 1} outputs, or the labels need remapping to "
                   f"0..{n_classes - 1}.")
    if dense and value != 255 and value >= 0:
        out.append("For masks, resize with nearest-neighbour interpolation so no in-between values appear.")
    return out


def embedding(ev: Evidence, value: int | None) -> Finding:
    f = Finding(op="embedding")
    weight = _local(ev, "weight")
    num: int | None = None
    where = ""
    if weight is not None and hasattr(weight, "shape") and len(weight.shape) == 2:
        num = int(weight.shape[0])
        where = f"the embedding table has {num} rows"
    emb = next(iter(_pick(ev.embeddings, ("word", "embed", "wte", "tok"), ev.cell_source)), None)
    if emb is not None:
        f.facts.append((emb.name, f"num_embeddings={emb.get('num_embeddings')}"))
        if num is None or num == emb.get("num_embeddings"):
            num = emb.get("num_embeddings")
            where = f"`{emb.name}` has num_embeddings={num}"
    ids = _pick(ev.labels, _ID_WORDS, ev.cell_source)
    if _cpu(_local(ev, "input")):
        ids = sorted(ids, key=lambda c: _same(c.tensor, _local(ev, "input")), reverse=True)
    if num is not None:
        for cand in ids:
            count, ex = cand.outside(0, num)
            if count:
                value = max(v for _, v in ex) if value is None else value
                shown = ", ".join(f"{v} at {list(p)}" for p, v in ex)
                f.facts.append((cand.name, f"{count} id(s) out of range; first: {shown}"))
                f.sentences.append(f"{count} id(s) in `{cand.name}` are out of range (first: {shown}).")
                break
        head = f"Token ids reach {value}" if value is not None else "An id is out of range"
        f.sentences.insert(0, f"{head}, but {where} (valid {_range_text(num)}).")
    for name, n in ev.tokenizers:
        f.facts.append((name, f"len = {n}"))
        if num is not None and n > num:
            f.sentences.append(f"The tokenizer `{name}` has {n} tokens: call "
                               f"model.resize_token_embeddings(len({name})).")
    for cfg in ev.configs:
        vocab = cfg.get("vocab_size")
        if vocab:
            f.facts.append((cfg.name, f"vocab_size={vocab}"))
            if value is not None and num is not None and value >= num and not ev.tokenizers:
                f.sentences.append(f"`{cfg.name}.vocab_size` is {vocab}: the ids come from a larger vocabulary "
                                   "than the model's (tokenizer and model from different checkpoints?); resize "
                                   "the embeddings with model.resize_token_embeddings(<tokenizer size>).")
    return f


def bce(ev: Evidence, which: str) -> Finding:
    f = Finding(op="binary_cross_entropy")
    t = _local(ev, which)
    if _cpu(t) and t.is_floating_point() and t.numel():
        t = t.detach()  # reading values must not warn about (or touch) autograd
        lo, hi, nan = float(t.min()), float(t.max()), bool(t.isnan().any())
        f.facts.append((which, f"shape {tuple(t.shape)}, min {lo:.4g}, max {hi:.4g}{', contains NaN' if nan else ''}"))
        if which == "input" and (lo < 0 or hi > 1):
            f.sentences.append(f"The input ranges from {lo:.4g} to {hi:.4g}: these look like raw logits. "
                               "Use nn.BCEWithLogitsLoss on them (or apply torch.sigmoid first).")
        elif nan:
            f.sentences.append(f"The {which} contains NaN: find where it starts (learning rate, fp16 overflow).")
        elif which == "target":
            f.sentences.append(f"The target ranges from {lo:.4g} to {hi:.4g}: scale it into [0, 1] "
                               "(e.g. mask / 255) or use CrossEntropyLoss for class ids.")
    return f


_RULES: dict[str, Callable[[Evidence, int | None], Finding]] = {
    "class_target_out_of_range": class_target,
    "embedding_or_index_select_out_of_range": embedding,
}


def find(ev: Evidence, cause_id: str, group: str | None, value: int | None) -> Finding | None:
    """The specific finding for a cause, or None when no rule applies."""
    if cause_id in ("bce_input_out_of_range", "thcunn_bce_input_out_of_range"):
        return bce(ev, "input")
    if cause_id == "bce_target_out_of_range":
        return bce(ev, "target")
    rule = _RULES.get(group or "")
    return rule(ev, value) if rule else None
