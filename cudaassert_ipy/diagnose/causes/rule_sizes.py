"""Rule for a generic index error that states a size: say which named quantity has that size, and what the
index therefore is.

``index 2 is out of bounds for dimension 2 with size 2`` names no op and no tensor: it comes from advanced
indexing deep inside a library (Ultralytics' ``TaskAlignedAssigner`` indexes the class scores with the boxes'
class ids). When a host fact has exactly that size (a YOLO model's ``nc``, a config's ``num_labels``,
``max_position_embeddings``, ``type_vocab_size``, a graph's ``num_nodes``, a head's ``out_features``) it says
what the index is: a class id, a position, a token type id, a node id. When a framework named the one bad
sample (Ultralytics: the box's image, its label file and line), that sample is the sentence.
Example: "class id 2 in data/labels/train/b.txt line 1 (image data/images/train/b.jpg), but `nc: 2` allows
0..1."
"""

from __future__ import annotations

import re

from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.causes.rule_base import Case, Finding
from cudaassert_ipy.diagnose.culprit import CLASS_LABELS, Culprit
from cudaassert_ipy.diagnose.hints import LabelFacts
from cudaassert_ipy.frameworks.base import BAD_LABEL

__all__ = ["sized_index"]

SIZED = "The index {index} is a {what}: {fact}, so {what}s must be 0..{last}."
BAD_SAMPLE = "{sample}, but `nc: {nc}` allows 0..{last}."
_NC = re.compile(r"\bnc=(\d+)")
_CLASS_ID = re.compile(r"^class id (-?\d+)")
#: a host fact's attribute -> what an index checked against it is
_WHAT = (
    ("num_labels", "class id"),
    ("max_position_embeddings", "position"),
    ("type_vocab_size", "token type id"),
    ("num_nodes", "node id"),
    ("vocab_size", "token id"),
)


def _size(case: Case) -> int | None:
    twin = case.ev.detection.twin
    return twin.size if twin is not None else None


def _nc(case: Case) -> tuple[str, int] | None:
    """The class count an Ultralytics adapter read: (where, nc)."""
    for name, line in case.ev.framework_facts:
        m = _NC.search(line)
        if m is not None:
            return name, int(m.group(1))
    return None


def _named(case: Case, n: int) -> tuple[str, str, str] | None:
    """(evidence name, the fact in words, what the index is) for the first host fact of size ``n``."""
    ev = case.ev
    found = _nc(case)
    if found is not None and found[1] == n:
        return found[0], f"`{found[0]}` has nc={n}", "class id"
    for cfg in ev.configs:
        for attr, what in _WHAT:
            if cfg.get(attr) == n:
                return cfg.name, f"`{cfg.name}.{attr}` is {n}", what
    for lin in ev.linears:
        if lin.get("out_features") == n:
            return lin.name, f"`{lin.name}` has out_features={n}", "class id"
    return None


def sized_index(case: Case) -> Finding | None:
    bad = next((line for name, line in case.ev.framework_facts if name == BAD_LABEL), None)
    nc = _nc(case)
    if bad is not None and nc is not None:  # the framework named the one box: that is the cause
        f = Finding(op="indexing by class id")
        f.sentences.append(BAD_SAMPLE.format(sample=bad, nc=nc[1], last=nc[1] - 1))
        m = _CLASS_ID.match(bad)
        class_id = int(m.group(1)) if m is not None else nc[1]
        f.fix = hints.yolo_class_id(nc[1], class_id)
        # what a patch widens: the class count, where the adapter found it set (the data YAML's nc:)
        f.culprit = Culprit(CLASS_LABELS, LabelFacts(bad=(class_id,), n_classes=nc[1], head=case.ev.head), module=nc[0])
        return f
    size = _size(case)
    if size is None or case.value is None:
        return None
    named = _named(case, size)
    if named is None:
        return None
    _, fact, what = named
    f = Finding()
    f.sentences.append(SIZED.format(index=case.value, what=what, fact=fact, last=size - 1))
    f.fix = hints.sized_index(what, size, case.value)
    return f
