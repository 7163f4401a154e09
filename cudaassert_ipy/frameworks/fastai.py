"""fastai v2: the callback prefix on the same exception, the Learner's facts, and the context exit's callbacks.

``Callback.__call__`` (``fastai/callback/core.py``) catches an error raised in a callback and re-raises the
same object with its message replaced (fastcore's ``modify_exception``): "Exception occured in `X` when
calling event `Y`:\\n\\t<the original message>". On a GPU the assert usually surfaces there, in
``ProgressCallback.after_batch`` (``smooth_loss.item()``). The Learner (every Learner frame's ``self``, a
callback's ``learn``) holds the facts: ``dls.c`` (the class count the DataBlock found, which
``vision_learner`` sizes the head with), ``dls.vocab``, ``loss_func``, the batch ``yb``, ``epoch``/``iter``.
``Learner.fit`` has no teardown; ``validate``/``get_preds`` run in ``with learn:``, whose ``__exit__`` calls
the ``after_epoch``/``after_fit`` callbacks while the first error unwinds: one touching the GPU fails again.
"""

from __future__ import annotations

import re
import types
from collections.abc import Sequence
from typing import Any

from cudaassert_ipy.frameworks.base import (
    Adapter,
    BatchIndices,
    ClassHead,
    Found,
    Reader,
    Stack,
    Step,
    class_names,
    frame_module,
    frame_self,
    in_packages,
    is_class,
    made_by,
)

__all__ = ["ADAPTER", "is_callback", "is_learner", "is_loader"]

PACKAGES = ("fastai",)
#: fastai's prefix (its spelling, "occured"), once per callback the error passed through.
_PREFIX = re.compile(r"\AException occured in `[^`\n]*` when calling event `[^`\n]*`:\n\t")
#: Labels shown from the vocab.
_VOCAB_SHOWN = 5


def is_learner(obj: Any) -> bool:
    return is_class(obj, "Learner", PACKAGES)


def is_callback(obj: Any) -> bool:
    return is_class(obj, "Callback", PACKAGES)


def _unwrap(exc: BaseException, text: str) -> str | None:
    """The message under fastai's "Exception occured in `X` when calling event `Y`" prefix(es), else None."""
    own, n = text, 0
    while True:
        stripped = _PREFIX.sub("", own, count=1)
        if stripped == own:
            break
        own, n = stripped, n + 1
    return own if n else None


def _learner(stack: Stack) -> Any:
    """The Learner of the failing call: a fastai frame's ``self`` (or a callback's ``learn``), else the one in
    the user's namespace."""
    for _, obj in stack.selves(*PACKAGES):
        if is_learner(obj):
            return obj
        if is_callback(obj):
            learn = getattr(obj, "learn", None)
            if is_learner(learn):
                return learn
    return next((v for k, v in list(stack.user_ns.items()) if not k.startswith("_") and is_learner(v)), None)


def _out_features(model: Any, read: Reader, name: str) -> int | None:
    """The last layer's ``out_features`` (duck-typed: the last submodule that has one)."""
    sizes = read.call(
        lambda: [m.out_features for m in model.modules() if isinstance(getattr(m, "out_features", None), int)],
        f"{name}.modules()",
    )
    return sizes[-1] if sizes else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _head(obj: Any, name: str, read: Reader) -> ClassHead | None:
    """A Learner: its head is built from ``dls.c``. When the model outputs ``dls.c`` classes the data is short
    of classes (the DataBlock's vocab or codes); when it outputs another count, the model was built apart."""
    if not is_learner(obj):
        return None
    c = _int(read.get(obj, "dls.c", name, needed=True))
    model = read.get(obj, "model", name)
    out = _out_features(model, read, f"{name}.model") if model is not None else None
    if out is not None and c is not None and out != c:
        return ClassHead("fastai_model", now=out, setting="n_out", owner=f"{name}.model")
    return ClassHead("fastai", now=c, setting="c", owner=f"{name}.dls")


def _labels(vocab: Any, read: Reader, name: str) -> list[Any] | None:
    """The label names of ``dls.vocab`` (a ``CategoryMap``; for a (x vocab, y vocab) pair, the last one)."""

    def items() -> list[Any]:
        items = list(vocab)
        if items and (isinstance(items[0], (list, tuple)) or type(items[0]).__name__ == "CategoryMap"):
            items = list(items[-1])
        return items

    found: list[Any] | None = read.call(items, name)
    return found


def _vocab_line(items: list[Any]) -> str:
    shown = ", ".join(repr(v) for v in items[:_VOCAB_SHOWN]) + (", ..." if len(items) > _VOCAB_SHOWN else "")
    return f"{len(items)} entries: [{shown}]"


def _loss_line(loss: Any, read: Reader, name: str) -> str:
    """``CrossEntropyLossFlat(ignore_index=-100, axis=-1)``: a fastai ``BaseLoss`` wraps a torch loss in ``func``."""
    parts = []
    inner = read.get(loss, "func", name)
    ignore = read.get(inner, "ignore_index", f"{name}.func") if inner is not None else None
    if isinstance(ignore, int):
        parts.append(f"ignore_index={ignore}")
    axis = read.get(loss, "axis", name)
    if isinstance(axis, int):
        parts.append(f"axis={axis}")
    return f"{type(loss).__name__}({', '.join(parts)})"


def _found(stack: Stack, read: Reader) -> Found | None:
    learn = _learner(stack)
    if learn is None:
        return None
    name = stack.name_of(learn, "learn")
    objects: list[tuple[str, Any]] = []
    facts: list[tuple[str, str]] = []
    declared: list[tuple[str, int]] = []
    model = read.get(learn, "model", name, needed=True)
    if model is not None:
        objects.append((stack.name_of(model, f"{name}.model"), model))
    c = _int(read.get(learn, "dls.c", name))
    vocab = read.get(learn, "dls.vocab", name)
    if c is not None:
        facts.append((f"{name}.dls", f"c={c}"))
    labels = _labels(vocab, read, f"{name}.dls.vocab") if vocab is not None else None
    if labels:
        facts.append((f"{name}.dls.vocab", _vocab_line(labels)))
        declared.append((f"{name}.dls.vocab", len(labels)))
    loss = read.get(learn, "loss_func", name)
    if loss is not None:
        facts.append((f"{name}.loss_func", _loss_line(loss, read, f"{name}.loss_func")))
        inner = read.get(loss, "func", f"{name}.loss_func")
        if inner is not None:
            objects.append((f"{name}.loss_func.func", inner))
    yb = read.get(learn, "yb", name)
    if isinstance(yb, (tuple, list)):
        objects += [(f"{name}.yb[{i}]", part) for i, part in enumerate(yb) if part is not None]
    line = _where(learn, read, name)
    if line:
        facts.append((name, line))
    return Found(objects=tuple(objects), facts=tuple(facts), declared=tuple(declared))


def _where(learn: Any, read: Reader, name: str) -> str:
    """``epoch 0, batch 1 of 2 (training)``."""
    parts = []
    epoch, it, n = read.get(learn, "epoch", name), read.get(learn, "iter", name), read.get(learn, "n_iter", name)
    if isinstance(epoch, int):
        parts.append(f"epoch {epoch}")
    if isinstance(it, int):
        parts.append(f"batch {it}" + (f" of {n}" if isinstance(n, int) else ""))
    training = read.get(learn, "training", name)
    if isinstance(training, bool) and parts:
        parts[-1] += " (training)" if training else " (validation)"
    return ", ".join(parts)


def _step(frames: Sequence[types.FrameType]) -> Step | None:
    """``Learner.__exit__`` (``validate``, ``get_preds``, ``with learn:``) ran the after_epoch/after_fit
    callbacks while the first error unwound, and one of them touched the GPU."""
    ours = [f for f in frames if in_packages(frame_module(f), PACKAGES)]
    if not any(f.f_code.co_name == "__exit__" and is_learner(frame_self(f)) for f in ours):
        return None
    for frame in reversed(ours):
        obj = frame_self(frame)
        if frame.f_code.co_name == "__call__" and is_callback(obj):
            event = frame.f_locals.get("event_name")
            what = f"`{type(obj).__name__}.{event}`" if isinstance(event, str) else f"`{type(obj).__name__}`"
            return Step(f"fastai's {what} callback (run by `Learner.__exit__` as the failure unwound)")
    return Step("fastai's after_epoch/after_fit callbacks (run by `Learner.__exit__` as the failure unwound)")


# -- the DataLoader bookmark (data/loaders): fastai's ``DataLoader`` runs torch's iterator classes over a
#    ``_FakeLoader`` whose "sampler" is a counter (``Inf.count``): torch's indices are batch numbers. The dataset
#    indices of an epoch are the list its ``__iter__`` drew (``self.__idxs``, name-mangled ``_DataLoader__idxs``)
#    before it made the iterator; batch k holds ``idxs[k*bs:(k+1)*bs]`` (with workers too: batch k comes from
#    worker k % n and torch yields them in order).
def _batches(fake: Any) -> BatchIndices | None:
    """(batch number -> dataset indices, the dataset, the fastai DataLoader) for a fastai iteration; else None."""
    if fake is None or "_FakeLoader" not in class_names(fake) or not made_by(fake, PACKAGES):
        return None
    dl = getattr(fake, "d", None)
    idxs = getattr(dl, "_DataLoader__idxs", None)  # this epoch's list: the next epoch draws a new one
    bs = getattr(dl, "bs", None) or 1
    if idxs is None or not getattr(dl, "indexed", True) or getattr(dl, "prebatched", False):
        return None

    def of(k: int) -> Sequence[Any] | None:
        chunk = idxs[k * bs : (k + 1) * bs]
        return list(chunk) if len(chunk) else None

    return of, getattr(dl, "dataset", None), dl


def is_loader(obj: Any) -> bool:
    """A fastai ``DataLoader`` (not a torch one): the records of its iterations are filed under it."""
    return made_by(obj, PACKAGES) and "DataLoader" in class_names(obj) and hasattr(obj, "fake_l")


#: How the class count is set: by the DataBlock (the Learner's head is built from ``dls.c``), or by a model built
#: apart from it (hints.py composes the fix from these).
HEAD_WORDS = {
    "fastai": (
        "give the DataBlock all {n} classes (the CategoryBlock's vocab, or the MaskBlock's codes for masks; "
        "dls.c is {now} and the Learner's head is built from it)"
    ),
    "fastai_model": (
        "build the Learner's model with {n} outputs ({owner} outputs {now}; vision_learner(dls, ...) sizes the "
        "head from dls.c, or pass n_out={n})"
    ),
}

ADAPTER = Adapter(
    name="fastai",
    packages=PACKAGES,
    unwrap=_unwrap,
    found=_found,
    head=_head,
    step=_step,
    head_words=HEAD_WORDS,
    batches=_batches,
    is_loader=is_loader,
)
