"""The range a failed op accepted, as plain numbers, from host-side facts only.

Why its own module: the bookmark's post-mortem check needs numbers (0..194, ignore -100), while
the diagnosis rules produce sentences. Sources, first found wins: the validator's own verdict,
the failing call's arguments (CPU twins), the model (last Linear's out_features, Embedding's
num_embeddings), Hugging Face configs (num_labels, vocab_size), tokenizers, dataset classes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from cudaassert_ipy.diagnose.causes import get_cause
from cudaassert_ipy.diagnose.evidence import Evidence

__all__ = ["ValidRange", "bounded", "kind_of", "valid_range"]

CLASS, IDS, UNIT = "class label", "token id", "target"
_CLASS_GROUP = "class_target_out_of_range"
_IDS_GROUP = "embedding_or_index_select_out_of_range"
_UNIT_CAUSES = ("bce_target_out_of_range",)
_VALID = re.compile(r"^(-?\d+)\.\.(-?\d+)")
_IGNORE = re.compile(r"ignore_index=(-?\d+)")


@dataclass(frozen=True)
class ValidRange:
    """Values in [low, high) are valid (plus ``ignore``); ``kind`` names them in messages."""

    kind: str
    low: float
    high: float  # exclusive for ids and labels; inclusive 1.0 for BCE targets
    ignore: int | None = None
    source: str = ""  # "`model.2` has out_features=195"

    def text(self) -> str:
        if self.kind == UNIT:
            return "[0, 1]"
        out = f"{int(self.low)}..{int(self.high) - 1}"
        return out + (f" or ignore_index={self.ignore}" if self.ignore is not None else "")


def kind_of(cause_id: str) -> str | None:
    """Which values this cause is about (:data:`CLASS`, :data:`IDS`, :data:`UNIT`), or None: not about data values."""
    if cause_id in _UNIT_CAUSES:
        return UNIT
    cause = get_cause(cause_id)
    group = cause.group if cause is not None else None
    return CLASS if group == _CLASS_GROUP else IDS if group == _IDS_GROUP else None


def bounded(ev: Evidence) -> tuple[ValidRange, ...]:
    """Every range the host facts bound, for a process that cannot know its cause (a launched child: the kernel's
    assertion lines went to its fd 2, read by the process that launched it). [0, 1] targets only with a BCE loss
    module, or when nothing else is bounded: any float field (the images) would be out of it."""
    found = [r for r in (_classes(ev), _vocab(ev)) if r is not None]
    if not found or any(loss.type_name.startswith("BCE") for loss in ev.losses):
        found.append(ValidRange(UNIT, 0.0, 1.0, source="binary_cross_entropy targets"))
    return tuple(found)


def valid_range(ev: Evidence, cause_id: str) -> ValidRange | None:
    """The range for this cause, or None when the cause is not about data values or nothing bounds it."""
    kind = kind_of(cause_id)
    if kind is None:
        return None
    if kind == UNIT:
        return ValidRange(UNIT, 0.0, 1.0, source="binary_cross_entropy targets")
    exc = ev.detection.exception
    verdict = _from_validator(exc, kind)
    if verdict is not None:
        return verdict
    return _classes(ev) if kind == CLASS else _vocab(ev)


def _from_validator(exc: BaseException, kind: str) -> ValidRange | None:
    valid = getattr(exc, "valid", None)
    if not isinstance(valid, str) or not type(exc).__module__.startswith("cudaassert_ipy."):
        return None
    m = _VALID.match(valid)
    if m is None:
        return None
    ignore = _IGNORE.search(valid)
    return ValidRange(
        kind,
        int(m.group(1)),
        int(m.group(2)) + 1,
        int(ignore.group(1)) if ignore else None,
        source=f"the validator of {getattr(exc, 'op', 'the call')}",
    )


def _scalar(ev: Evidence, name: str) -> Any:
    """A scalar argument of the failing ``torch.nn.functional`` call (``ignore_index``), when there is one."""
    call = getattr(ev, "call", None)
    if call is not None:
        return call.scalar(name)
    return dict(getattr(ev, "call_locals", ())).get(name)


def _shape(ev: Evidence, name: str) -> tuple[int, ...] | None:
    """The shape of a tensor argument of the failing call (``input``, ``weight``): host metadata only."""
    call = getattr(ev, "call", None)
    if call is not None:
        fact = call.tensor(name)
        return tuple(fact.shape) if fact is not None else None
    shape = getattr(dict(getattr(ev, "call_locals", ())).get(name), "shape", None)
    return tuple(shape) if shape is not None else None


def _classes(ev: Evidence) -> ValidRange | None:
    ignore = _scalar(ev, "ignore_index")
    if ignore is None:
        ignore = next((loss.get("ignore_index") for loss in ev.losses if loss.get("ignore_index") is not None), -100)
    shape = _shape(ev, "input")
    if shape is not None and len(shape) >= 1:
        n = int(shape[1] if len(shape) >= 2 else shape[0])
        return ValidRange(CLASS, 0, n, int(ignore), f"the input has {n} classes")
    if ev.linears:
        roots: dict[str, list[Any]] = {}
        for lin in ev.linears:
            roots.setdefault(lin.name.split(".")[0], []).append(lin)
        named = [r for r in roots if r in ev.cell_source] or list(roots)
        last = roots[named[0]][-1]
        n = int(last.get("out_features"))
        return ValidRange(CLASS, 0, n, int(ignore), f"`{last.name}` has out_features={n}")
    for cfg in ev.configs:
        if cfg.get("num_labels"):
            n = int(cfg.get("num_labels"))
            return ValidRange(CLASS, 0, n, int(ignore), f"`{cfg.name}.num_labels` is {n}")
    for name, n in ev.datasets:
        return ValidRange(CLASS, 0, n, int(ignore), f"`{name}.classes` has {n} entries")
    return None


def _vocab(ev: Evidence) -> ValidRange | None:
    shape = _shape(ev, "weight")
    if shape is not None and len(shape) == 2:
        return ValidRange(IDS, 0, int(shape[0]), source=f"the embedding table has {int(shape[0])} rows")
    words = ("word", "embed", "wte", "tok")
    embeddings = sorted(ev.embeddings, key=lambda e: any(w in e.name.lower() for w in words), reverse=True)
    for emb in embeddings:
        n = int(emb.get("num_embeddings"))
        return ValidRange(IDS, 0, n, source=f"`{emb.name}` has num_embeddings={n}")
    for cfg in ev.configs:
        if cfg.get("vocab_size"):
            n = int(cfg.get("vocab_size"))
            return ValidRange(IDS, 0, n, source=f"`{cfg.name}.vocab_size` is {n}")
    for name, n in ev.tokenizers:
        return ValidRange(IDS, 0, n, source=f"len({name}) is {n}")
    return None
