"""Lightning 2.x (``lightning.pytorch`` and ``pytorch_lightning``): the teardown's second error, and its facts.

``_call_and_handle_interrupt`` catches the first error, runs the callbacks' ``on_exception`` (a checkpoint
on exception), then ``Trainer._teardown`` → ``Strategy.teardown``: the optimizer state and the module are
moved to the CPU and the CUDA cache is emptied. After a device-side assert each of these touches the dead
context and raises a second CUDA error; the first one is only in ``__context__``. The LightningModule is
``trainer.lightning_module``; its class count is usually an hparam (``self.hparams.num_classes``).
"""

from __future__ import annotations

import functools
import types
from collections.abc import Mapping, Sequence
from typing import Any

from cudaassert_ipy.frameworks.base import (
    Adapter,
    Ahead,
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

__all__ = ["ADAPTER", "is_lightning_module", "is_trainer"]

PACKAGES = ("lightning", "pytorch_lightning")
#: hparams that size a classifier's last layer, in the order they are tried.
CLASS_HPARAMS = ("num_classes", "num_labels", "n_classes", "num_class")
#: Innermost teardown work -> how the follow-on line says it.
_TEARDOWN_PARTS = {
    "_optimizers_to_device": "moving the optimizer state to the CPU",
    "cpu": "moving the model to the CPU",
    "_clear_cuda_memory": "emptying the CUDA cache",
    "empty_cache": "emptying the CUDA cache",
}


def is_trainer(obj: Any) -> bool:
    return is_class(obj, "Trainer", PACKAGES)


def is_lightning_module(obj: Any) -> bool:
    return is_class(obj, "LightningModule", PACKAGES)


def _trainer(stack: Stack) -> Any:
    """The Lightning Trainer of the failing call: a Lightning frame's ``self`` or its ``trainer`` argument (a
    trainer merely sitting in the namespace says nothing about this failure)."""
    for frame in reversed(stack.frames):
        if not in_packages(frame_module(frame), PACKAGES):
            continue
        obj = frame_self(frame)
        if is_trainer(obj):
            return obj
        local = frame.f_locals.get("trainer")
        if is_trainer(local):
            return local
    return None


def _hparam(module: Any, read: Reader, name: str) -> tuple[str, int] | None:
    hparams = read.get(module, "hparams", name)
    if hparams is None:
        return None
    for key in CLASS_HPARAMS:  # an odd hparams container that raises: one "could not read" entry (the same text)
        value = read.call(functools.partial(_hparam_value, hparams, key), f"{name}.hparams")
        if isinstance(value, int) and not isinstance(value, bool):
            return key, value
    return None


def _hparam_value(hparams: Any, key: str) -> Any:
    return hparams.get(key) if hasattr(hparams, "get") else getattr(hparams, key, None)


def _out_features(module: Any, read: Reader, name: str) -> set[int]:
    """Every ``out_features`` of the module's layers (duck-typed: any submodule with that attribute)."""
    sizes = read.call(
        lambda: {m.out_features for m in module.modules() if isinstance(getattr(m, "out_features", None), int)},
        f"{name}.modules()",
    )
    return sizes if isinstance(sizes, set) else set()


def _head(obj: Any, name: str, read: Reader) -> ClassHead | None:
    if is_trainer(obj):
        obj, name = read.get(obj, "lightning_module", name), f"{name}.lightning_module"
    if obj is None or not is_lightning_module(obj):
        return None
    found = _hparam(obj, read, name)
    if found is None:
        return None
    key, n = found
    if n not in _out_features(obj, read, name):  # the hparam does not size any layer: the generic words fit better
        return None
    return ClassHead("lightning", now=n, setting=key, owner=type(obj).__name__)


def _found(stack: Stack, read: Reader) -> Found | None:
    trainer = _trainer(stack)
    module = read.get(trainer, "lightning_module", "trainer") if trainer is not None else None
    if module is None:
        module = next((obj for _, obj in stack.selves(*PACKAGES) if is_lightning_module(obj)), None)
    if module is None:
        module = next((v for v in list(stack.user_ns.values()) if is_lightning_module(v)), None)
    if trainer is None and module is None:
        return None
    objects: list[tuple[str, Any]] = []
    facts: list[tuple[str, str]] = []
    name = stack.name_of(module, "trainer.lightning_module") if module is not None else ""
    if module is not None:
        objects.append((name, module))
        found = _hparam(module, read, name)
        if found is not None:
            facts.append((f"{name}.hparams", f"{found[0]}={found[1]}"))
    if trainer is not None:
        line = _where(trainer, read)
        if line:
            facts.append(("trainer", line))
    objects += _batch(stack.frames)
    return Found(objects=tuple(objects), facts=tuple(facts))


def _batch(frames: Sequence[types.FrameType]) -> list[tuple[str, Any]]:
    """The batch of the failing step, from the innermost Lightning loop frame holding one (``batch`` in
    ``_TrainingEpochLoop.advance``): there even when the user's ``training_step`` is not on the stack."""
    for frame in reversed(frames):
        if not in_packages(frame_module(frame), PACKAGES) or "batch" not in frame.f_code.co_varnames:
            continue
        batch = frame.f_locals.get("batch")
        if isinstance(batch, (tuple, list)):
            return [(f"batch[{i}]", part) for i, part in enumerate(batch)]
        if isinstance(batch, Mapping):
            return [(f"batch[{key!r}]", part) for key, part in batch.items() if isinstance(key, str)]
        if batch is not None:
            return [("batch", batch)]
    return []


def _where(trainer: Any, read: Reader) -> str:
    """``epoch 0, global step 3`` or ``the sanity check (the first validation batches)``."""
    if read.get(trainer, "sanity_checking", "trainer") is True:
        return "failed in the sanity check (the first validation batches, before training)"
    parts = []
    epoch, step = read.get(trainer, "current_epoch", "trainer"), read.get(trainer, "global_step", "trainer")
    if isinstance(epoch, int):
        parts.append(f"epoch {epoch}")
    if isinstance(step, int):
        parts.append(f"global step {step}")
    stage = read.get(trainer, "state.stage", "trainer")
    if stage is not None:
        parts.append(f"stage {getattr(stage, 'value', stage)}")
    return ", ".join(parts)


def _step(frames: Sequence[types.FrameType]) -> Step | None:
    names = [(frame_module(f), f.f_code.co_name, f) for f in frames]
    ours = [(m, fn) for m, fn, _ in names if in_packages(m, PACKAGES)]
    functions = {fn for _, fn in ours}
    if "on_exception" in functions or ("_interrupt" in functions and "save_checkpoint" in functions):
        callback = next(
            (type(frame_self(f)).__name__ for m, fn, f in names if fn == "on_exception" and frame_self(f) is not None),
            "",
        )
        label = "Lightning's checkpoint on exception" + (f" (`{callback}.on_exception`)" if callback else "")
        if "save_checkpoint" in functions or "OnExceptionCheckpoint" in label or "ModelCheckpoint" in label:
            return Step(label, lost="the checkpoint")
        return Step(f"Lightning's exception hook{f' (`{callback}.on_exception`)' if callback else ''}")
    if "_interrupt" in functions and "finalize" in functions:
        return Step("Lightning's logger finalize")
    if "_teardown" in functions or ("teardown" in functions and any("strategies" in m for m, _ in ours)):
        part = next((_TEARDOWN_PARTS[fn] for _, fn, _ in reversed(names) if fn in _TEARDOWN_PARTS), "")
        return Step("Lightning's teardown" + (f" ({part})" if part else ""))
    return None


# -- the DataLoader bookmark (data/loaders): for a loader of unknown length, the training loop's
#    ``_PrefetchDataFetcher`` fetches ``prefetch_batches`` (default 1) batches ahead to know when the epoch ends;
#    for a sized loader it fetches none.
PREFETCH = "Lightning's data fetcher fetches {n} ahead for a loader of unknown length"


def _ahead(obj: Any, frame: types.FrameType) -> Ahead | None:
    """How far ahead when ``obj`` is Lightning's prefetching data fetcher over an unsized loader; else None."""
    if not made_by(obj, PACKAGES) or "_PrefetchDataFetcher" not in class_names(obj):
        return None
    if getattr(obj, "length", None) is not None:
        return None  # sized: Lightning skips the prefetch
    n = getattr(obj, "prefetch_batches", 1)
    if not isinstance(n, int) or n <= 0:
        return None
    return Ahead(n, n, (PREFETCH.format(n="the next batch" if n == 1 else f"{n} batches"),))


#: How a LightningModule's class count is set (hints.py composes the fix from it).
HEAD_WORDS = {
    "lightning": "build `{owner}` with {setting}={n} (its hparams.{setting}={now} sizes the last layer)",
}

ADAPTER = Adapter(
    name="lightning", packages=PACKAGES, found=_found, head=_head, step=_step, head_words=HEAD_WORDS, ahead=_ahead
)
