"""Hugging Face transformers (models, ``Trainer``, PEFT): where the facts are when the Trainer's loss sync fails.

On a GPU the Trainer's traceback usually ends at ``torch.isnan(tr_loss_step)`` in the epoch loop
(``Trainer._inner_training_loop``; ``_run_epoch`` in 5.x), with no model frame: the facts are on the Trainer
there (``self.model`` and its ``config``, ``self.processing_class``, ``self.label_smoother``, the micro-batch
``inputs``).
A classification head's class count is ``config.num_labels``, set with ``from_pretrained(..., num_labels=N)``.
PEFT keeps the model at ``model.base_model.model``. The Trainer re-raises unchanged: no follow-on here.
"""

from __future__ import annotations

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
    class_names,
    is_class,
    made_by,
)
from cudaassert_ipy.frameworks.generic import declared_classes, unwrap_model

__all__ = ["ADAPTER", "hf_model", "is_trainer"]

PACKAGES = ("transformers", "peft")
#: The Trainer locals holding the failing micro-batch (``_inner_training_loop``, ``training_step``, ``compute_loss``).
_BATCH_LOCALS = ("inputs",)


def is_trainer(obj: Any) -> bool:
    """A ``transformers.Trainer`` (or a subclass such as ``Seq2SeqTrainer``, TRL's trainers)."""
    return is_class(obj, "Trainer", ("transformers",))


def hf_model(obj: Any) -> Any:
    """The transformers model in ``obj`` (through DDP/compile/DeepSpeed wrappers and PEFT), or None."""
    model = unwrap_model(obj)
    for _ in range(4):  # PeftModel.base_model (LoraModel).model
        if not made_by(model, ("peft",)):
            break
        inner = getattr(model, "base_model", None)
        inner = getattr(inner, "model", inner)
        if inner is None or inner is model:
            break
        model = unwrap_model(inner)
    if made_by(model, ("transformers",)) and hasattr(model, "config"):
        return model
    return None


def _classifier(model: Any) -> bool:
    """A head whose size is ``config.num_labels`` (``BertForSequenceClassification``, ``...ForTokenClassification``)."""
    return any("Classification" in name for name in class_names(model))


def _head(obj: Any, name: str, read: Reader) -> ClassHead | None:
    if is_trainer(obj):
        obj, name = read.get(obj, "model", "trainer"), "trainer.model"
    model = hf_model(obj) if obj is not None else None
    if model is None or not _classifier(model):
        return None
    n = read.get(model, "config.num_labels", name, needed=True)
    return ClassHead(
        "transformers", now=n if isinstance(n, int) else None, setting="num_labels", owner=f"{name}.config"
    )


def _config_line(model: Any, name: str, read: Reader) -> tuple[str, str] | None:
    """``num_labels=3, problem_type=single_label_classification, id2label: 3 entries`` for a classifier."""
    if not _classifier(model):
        return None
    config = read.get(model, "config", name)
    if config is None:
        return None
    parts = []
    n = read.get(config, "num_labels", f"{name}.config", needed=True)
    if isinstance(n, int):
        parts.append(f"num_labels={n}")
    problem = read.get(config, "problem_type", f"{name}.config")
    if isinstance(problem, str):
        parts.append(f"problem_type={problem}")
    labels = read.get(config, "id2label", f"{name}.config")
    if isinstance(labels, Mapping):
        parts.append(f"id2label: {len(labels)} entries")
    return (f"{name}.config", ", ".join(parts)) if parts else None


def _batch(frames: Sequence[types.FrameType]) -> list[tuple[str, Any]]:
    """The failing micro-batch's fields (``inputs['labels']``), from the innermost Trainer frame holding it."""
    for frame in reversed(frames):
        if not is_trainer(frame.f_locals.get("self")):
            continue
        for local in _BATCH_LOCALS:
            batch = frame.f_locals.get(local)
            if isinstance(batch, Mapping):
                return [(f"{local}[{key!r}]", value) for key, value in batch.items() if isinstance(key, str)]
    return []


def _step_line(trainer: Any, frames: Sequence[types.FrameType], read: Reader) -> tuple[str, str] | None:
    """Where the Trainer was: epoch, optimizer step, micro-batch of the gradient-accumulation group."""
    parts = []
    epoch = read.get(trainer, "state.epoch", "trainer")
    step = read.get(trainer, "state.global_step", "trainer")
    if isinstance(epoch, (int, float)):
        parts.append(f"epoch {int(epoch)}")
    if isinstance(step, int):
        parts.append(f"optimizer step {step}")
    for frame in reversed(frames):  # the epoch loop (``_inner_training_loop``; ``_run_epoch`` in 5.x)
        if "batch_samples" in frame.f_code.co_varnames and is_trainer(frame.f_locals.get("self")):
            i, group = frame.f_locals.get("i"), frame.f_locals.get("batch_samples")
            if isinstance(i, int) and isinstance(group, list):
                parts.append(f"micro-batch {i + 1} of {len(group)} (gradient accumulation)")
            break
    return ("trainer.state", ", ".join(parts)) if parts else None


def _found(stack: Stack, read: Reader) -> Found | None:
    # the Trainer that was running (a trainer merely sitting in the namespace says nothing about this failure)
    trainer = next((obj for _, obj in stack.selves("transformers") if is_trainer(obj)), None)
    objects: list[tuple[str, Any]] = []
    facts: list[tuple[str, str]] = []
    declared: list[tuple[str, int]] = []
    if trainer is not None:
        model = read.get(trainer, "model", "trainer", needed=True)
        if model is not None:
            model = hf_model(model) or unwrap_model(model)
            objects.append((stack.name_of(model, "trainer.model"), model))
        tokenizer = read.get(trainer, "processing_class", "trainer")
        if tokenizer is not None and hasattr(tokenizer, "__len__"):
            objects.append(("trainer.processing_class", tokenizer))
        smoother = read.get(trainer, "label_smoother", "trainer")
        if smoother is not None:
            eps = read.get(smoother, "epsilon", "trainer.label_smoother")
            facts.append(
                (
                    "trainer.label_smoother",
                    f"LabelSmoother(epsilon={eps}): negative labels become 0, labels >= num_labels fail in gather",
                )
            )
        line = _step_line(trainer, stack.frames, read)
        if line is not None:
            facts.append(line)
        dataset = read.get(trainer, "train_dataset", "trainer", needed=True)
        found = (
            declared_classes(dataset, stack.name_of(dataset, "trainer.train_dataset"), read)
            if dataset is not None
            else None
        )
        declared += [found] if found is not None else []
        objects += _batch(stack.frames)
    known = {id(obj): name for name, obj in reversed(objects)}
    running = [(stack.name_of(obj, known.get(id(obj), type(obj).__name__)), obj) for _, obj in stack.selves(*PACKAGES)]
    for name, obj in [*running, *objects, *stack.user_ns.items()]:
        model = hf_model(obj) if not name.startswith("_") else None
        line = _config_line(model, stack.name_of(model, name), read) if model is not None else None
        if line is not None:
            facts.append(line)
            break
    if not (objects or facts or declared):
        return None
    return Found(objects=tuple(objects), facts=tuple(facts), declared=tuple(declared))


# -- the DataLoader bookmark (data/loaders): the Trainer pulls all ``gradient_accumulation_steps`` micro-batches of
#    an optimizer step (``get_batch_samples``) before the first forward; when micro-batch i of N fails, N-1-i more
#    were fetched.
MICRO = "the Trainer fetches its {n} gradient-accumulation micro-batches together before the first forward"


def _ahead(obj: Any, frame: types.FrameType) -> Ahead | None:
    if frame.f_code.co_name != "get_batch_samples" or not made_by(obj, ("transformers",)):
        return None
    n = getattr(getattr(obj, "args", None), "gradient_accumulation_steps", 1)
    if not isinstance(n, int) or n <= 1:
        return None
    return Ahead(0, n - 1, (MICRO.format(n=n),))


#: How a transformers model's class count is set (hints.py composes the fix from it).
HEAD_WORDS = {
    "transformers": (
        "load the model with from_pretrained(..., num_labels={n}, ignore_mismatched_sizes=True) and give it "
        "id2label/label2id with {n} entries"
    ),
}

ADAPTER = Adapter(name="transformers", packages=PACKAGES, found=_found, head=_head, head_words=HEAD_WORDS, ahead=_ahead)
