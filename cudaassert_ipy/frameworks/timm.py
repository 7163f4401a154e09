"""timm (PyTorch Image Models): the model's ``num_classes``, and the losses that turn a bad label into a gather.

timm's training loop re-raises unchanged (``train.py`` catches only KeyboardInterrupt); the assert surfaces at
``loss.item()`` each step. One cause, three assertion lines: a label >= ``num_classes`` fails in ``nll_loss``
under ``nn.CrossEntropyLoss``, in ``gather`` (ScatterGatherKernel.cu, "index out of bounds") under
``LabelSmoothingCrossEntropy`` (``timm/loss/cross_entropy.py``), and in ``one_hot``'s ``scatter_`` under
``Mixup`` / ``mixup_target`` (``timm/data/mixup.py``), whose soft targets go to ``SoftTargetCrossEntropy``.
A timm model knows its class count (``model.num_classes``, ``model.get_classifier()``), set with
``timm.create_model(..., num_classes=N)``.
"""

from __future__ import annotations

import types
from typing import Any

from cudaassert_ipy.frameworks.base import Adapter, Ahead, ClassHead, Found, Reader, Stack, class_names, made_by
from cudaassert_ipy.frameworks.generic import unwrap_model

__all__ = ["ADAPTER", "LABEL_LOSSES", "timm_model"]

PACKAGES = ("timm",)
#: timm's objects that index or one-hot the labels by class (a label >= num_classes fails in gather or scatter).
LABEL_LOSSES = ("LabelSmoothingCrossEntropy", "SoftTargetCrossEntropy", "JsdCrossEntropy", "Mixup", "FastCollateMixup")


def timm_model(obj: Any) -> Any:
    """The timm model in ``obj`` (through DDP/compile wrappers), or None: it has ``num_classes`` and
    ``get_classifier``."""
    model = unwrap_model(obj)
    if made_by(model, PACKAGES) and hasattr(model, "get_classifier") and hasattr(model, "num_classes"):
        return model
    return None


def _classes(model: Any, read: Reader, name: str) -> int | None:
    n = read.get(model, "num_classes", name, needed=True)
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None


def _head(obj: Any, name: str, read: Reader) -> ClassHead | None:
    model = timm_model(obj)
    if model is None:
        return None
    n = _classes(model, read, name)
    if n is None:
        return None
    return ClassHead("timm", now=n, setting="num_classes", owner=name)


def _classifier_line(model: Any, read: Reader, name: str) -> str:
    """``num_classes=3, classifier `fc`: Linear(out_features=3)``."""
    parts = []
    n = _classes(model, read, name)
    if n is not None:
        parts.append(f"num_classes={n}")
    head = read.call(lambda: model.get_classifier(), f"{name}.get_classifier()")
    out = getattr(head, "out_features", None)
    if head is not None:
        where = _child_name(model, head, read, name)
        parts.append(
            f"classifier{f' `{where}`' if where else ''}: {type(head).__name__}"
            + (f"(out_features={out})" if isinstance(out, int) else "")
        )
    return ", ".join(parts)


def _child_name(model: Any, child: Any, read: Reader, name: str) -> str:
    found = read.call(lambda: next((n for n, m in model.named_modules() if m is child), ""), f"{name}.named_modules()")
    return found if isinstance(found, str) else ""


def _loss_line(obj: Any, read: Reader, name: str) -> str:
    kind = type(obj).__name__
    if kind == "LabelSmoothingCrossEntropy":
        eps = read.get(obj, "smoothing", name)
        return f"LabelSmoothingCrossEntropy(smoothing={eps}): labels >= num_classes fail in gather"
    n = read.get(obj, "num_classes", name)
    if kind in ("Mixup", "FastCollateMixup"):
        return f"{kind}(num_classes={n}): labels >= num_classes fail in one_hot's scatter"
    return f"{kind}: takes soft targets (Mixup's one_hot, where labels >= num_classes fail)"


def _label_objects(stack: Stack) -> list[tuple[str, Any]]:
    """timm's losses and Mixup running on the stack (innermost first), then those in the namespace."""
    running = [obj for _, obj in stack.selves(*PACKAGES) if type(obj).__name__ in LABEL_LOSSES]
    named = [
        v
        for k, v in list(stack.user_ns.items())
        if not k.startswith("_") and type(v).__name__ in LABEL_LOSSES and made_by(v, PACKAGES)
    ]
    out: list[tuple[str, Any]] = []
    for obj in [*running, *named]:
        if all(obj is not o for _, o in out):
            out.append((stack.name_of(obj, type(obj).__name__), obj))
    return out


def _found(stack: Stack, read: Reader) -> Found | None:
    running = [obj for _, obj in stack.selves(*PACKAGES) if timm_model(obj) is not None]
    named = [v for k, v in list(stack.user_ns.items()) if not k.startswith("_") and timm_model(v) is not None]
    model = timm_model(running[0]) if running else (timm_model(named[0]) if named else None)
    losses = _label_objects(stack)
    if model is None and not losses:
        return None
    objects: list[tuple[str, Any]] = []
    facts: list[tuple[str, str]] = []
    if model is not None:
        name = stack.name_of(model, "model")
        objects.append((name, model))
        line = _classifier_line(model, read, name)
        if line:
            facts.append((name, line))
    for name, obj in losses:
        objects.append((name, obj))
        facts.append((name, _loss_line(obj, read, name)))
    return Found(objects=tuple(objects), facts=tuple(facts))


# -- the DataLoader bookmark (data/loaders): ``PrefetchLoader`` moves batch k+1 to the device on a side stream before
#    it yields batch k.
PREFETCH = "timm's PrefetchLoader fetches the next batch before it yields one"


def _ahead(obj: Any, frame: types.FrameType) -> Ahead | None:
    if made_by(obj, PACKAGES) and "PrefetchLoader" in class_names(obj):
        return Ahead(1, 1, (PREFETCH,))
    return None


#: How a timm model's class count is set (hints.py composes the fix from it).
HEAD_WORDS = {"timm": "create the model with timm.create_model(..., num_classes={n})"}

ADAPTER = Adapter(name="timm", packages=PACKAGES, found=_found, head=_head, head_words=HEAD_WORDS, ahead=_ahead)
