"""Ultralytics YOLO: the class count ``nc`` and its ``names``, the batch's image files.

On one GPU the error reaches the cell unchanged, from ``self.model(batch)`` in ``BaseTrainer._do_train``
(``ultralytics/engine/trainer.py``) or from the loss inside it (``tal.py``, ``v8ClassificationLoss``). The
class count is ``nc``: the data YAML's (``trainer.data["nc"]``, ``trainer.data["names"]``), given to the model
(``model.nc``, ``model.yaml["nc"]``, ``model.names``). The batch is a dict whose ``im_file`` names the images.
In the first epoch ``_do_train`` retries a ``RuntimeError`` whose text says "out of memory" (or a cuBLAS/cuDNN
allocation failure) with half the batch, emptying the cache first (``_clear_memory``); a device-side assert's
text never says so, so no step is named here (a later error there is named by the generic adapter's
``empty_cache``).
"""

from __future__ import annotations

import os
import types
from collections.abc import Mapping, Sequence
from typing import Any

from cudaassert_ipy.frameworks.base import (
    BAD_LABEL,
    Adapter,
    ClassHead,
    Found,
    Reader,
    Stack,
    frame_module,
    in_packages,
    is_class,
)
from cudaassert_ipy.frameworks.generic import unwrap_model

__all__ = ["ADAPTER", "FLOAT_LABELS", "bad_label", "image_of", "is_trainer", "label_file", "yolo_model"]

PACKAGES = ("ultralytics",)
#: Image files shown from a batch's ``im_file``.
_FILES_SHOWN = 4


def _is(obj: Any, name: str) -> bool:
    return is_class(obj, name, PACKAGES)


def is_trainer(obj: Any) -> bool:
    return _is(obj, "BaseTrainer")


def yolo_model(obj: Any) -> Any:
    """The Ultralytics ``nn.Module`` (``DetectionModel``, ``ClassificationModel``, ...) in ``obj``: the
    ``YOLO(...)`` wrapper's ``model``, through DDP/compile wrappers; None otherwise."""
    if _is(obj, "Model") and not _is(obj, "BaseModel"):  # the YOLO(...) wrapper
        obj = getattr(obj, "model", None)
    model = unwrap_model(obj)
    return model if _is(model, "BaseModel") else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _model_nc(model: Any, read: Reader, name: str) -> int | None:
    """``model.nc`` (the trainer sets it), else the model YAML's ``nc``."""
    nc = _int(read.get(model, "nc", name))
    if nc is None:
        spec = read.get(model, "yaml", name)
        nc = _int(spec.get("nc")) if isinstance(spec, Mapping) else None
    return nc


def _data_yaml(trainer: Any, read: Reader, name: str) -> str:
    """The data YAML the trainer read its ``nc`` from (``trainer.data["yaml_file"]``, else ``trainer.args.data``),
    when it is a file: the fix patches its ``nc:``. A dataset folder (classification) has none."""
    data = read.get(trainer, "data", name)
    path = data.get("yaml_file") if isinstance(data, Mapping) else None
    if not isinstance(path, str):
        path = read.get(trainer, "args.data", name)
    return _yaml_file(path)


def _yaml_file(path: Any) -> str:
    return path if isinstance(path, str) and path.endswith((".yaml", ".yml")) and os.path.isfile(path) else ""


def _head(obj: Any, name: str, read: Reader) -> ClassHead | None:
    file = ""
    if is_trainer(obj):
        file = _data_yaml(obj, read, name)
        obj, name = read.get(obj, "model", name), f"{name}.model"
    model = yolo_model(obj) if obj is not None else None
    if model is None:
        return None
    if not file:  # the trainer gives the model its args (``self.model.args = self.args``), the data YAML's path too
        file = _yaml_file(read.get(model, "args.data", name))
    return ClassHead("ultralytics", now=_model_nc(model, read, name), setting="nc", owner=name, file=file)


def _names_line(names: Any) -> str | None:
    if isinstance(names, Mapping):
        names = list(names.values())
    if not isinstance(names, (list, tuple)):
        return None
    shown = ", ".join(repr(n) for n in names[:_FILES_SHOWN]) + (", ..." if len(names) > _FILES_SHOWN else "")
    return f"{len(names)} entries: [{shown}]"


def _trainer(stack: Stack) -> Any:
    """The trainer that was running (a frame's ``self``); a trainer merely in the namespace says nothing."""
    return next((obj for _, obj in stack.selves(*PACKAGES) if is_trainer(obj)), None)


def _batch(frames: Sequence[types.FrameType]) -> Mapping[str, Any] | None:
    """The failing batch: the innermost Ultralytics frame's ``batch`` dict (the trainer loop, the loss), or the
    dict given to the model's ``forward``/``loss``."""
    for frame in reversed(frames):
        if not in_packages(frame_module(frame), PACKAGES):
            continue
        for local in ("batch", "x"):
            if local in frame.f_code.co_varnames:
                value = frame.f_locals.get(local)
                if isinstance(value, Mapping) and ("cls" in value or "im_file" in value):
                    return value
    return None


def _files_line(batch: Mapping[str, Any]) -> str | None:
    files = batch.get("im_file")
    if not isinstance(files, (list, tuple)) or not files:
        return None
    shown = ", ".join(str(f) for f in files[:_FILES_SHOWN]) + (", ..." if len(files) > _FILES_SHOWN else "")
    return f"{len(files)} image(s): {shown}"


def _found(stack: Stack, read: Reader) -> Found | None:
    trainer = _trainer(stack)
    model = None
    name = "model"
    if trainer is not None:
        model = yolo_model(read.get(trainer, "model", "trainer", needed=True))
        name = stack.name_of(model, "trainer.model")
    if model is None:
        model = next((m for _, obj in stack.selves(*PACKAGES) if (m := yolo_model(obj)) is not None), None)
    if model is None:
        model = next(
            (m for k, v in list(stack.user_ns.items()) if not k.startswith("_") and (m := yolo_model(v)) is not None),
            None,
        )
    batch = _batch(stack.frames)
    if trainer is None and model is None and batch is None:
        return None
    objects: list[tuple[str, Any]] = []
    facts: list[tuple[str, str]] = []
    declared: list[tuple[str, int]] = []
    if model is not None:
        name = stack.name_of(model, name) if trainer is None else name
        objects.append((name, model))
        nc = _model_nc(model, read, name)
        names = _names_line(read.get(model, "names", name))
        parts = ([f"nc={nc}"] if nc is not None else []) + ([f"names: {names}"] if names else [])
        if parts:
            facts.append((name, ", ".join(parts)))
    if trainer is not None:
        data = read.get(trainer, "data", "trainer", needed=True)
        if isinstance(data, Mapping):
            nc = _int(data.get("nc"))
            names = _names_line(data.get("names"))
            parts = ([f"nc={nc}"] if nc is not None else []) + ([f"names: {names}"] if names else [])
            if parts:
                facts.append(("trainer.data", ", ".join(parts)))
            if nc:
                declared.append(("trainer.data['names']", nc))
        epoch = read.get(trainer, "epoch", "trainer")
        if isinstance(epoch, int):
            facts.append(("trainer", f"epoch {epoch}"))
    if batch is not None:
        objects += [(f"batch[{key!r}]", value) for key, value in batch.items() if isinstance(key, str)]
        files = _files_line(batch)
        if files is not None:
            facts.append(("batch['im_file']", files))
        nc = _model_nc(model, read, name) if model is not None else None
        bad = bad_label(batch, nc) if nc else None  # the one box, its image and label file line
        if bad is not None:
            facts.append(bad)
    return Found(objects=tuple(objects), facts=tuple(facts), declared=tuple(declared))


# -- the DataLoader bookmark's sample lookup (data/samples.py): a detection batch is a dict whose per-box fields
#    (``cls``, ``bboxes``) have one row per box; ``batch_idx`` says which image of the batch each box belongs to and
#    ``im_file`` names that image's file. Its class labels are float tensors (``cls``), so they are checked as
#    labels by name.
FLOAT_LABELS = ("cls",)  # float fields holding whole-number class labels


def image_of(batch: Any, row: int, rows: int) -> tuple[int, str | None] | None:
    """(the image's position in the batch, its file) for box ``row`` of a per-box field with ``rows`` rows."""
    if not isinstance(batch, Mapping) or "batch_idx" not in batch:
        return None
    owner = batch["batch_idx"]
    if getattr(owner, "shape", (None,))[:1] != (rows,):
        return None
    image = int(owner.reshape(-1)[row].item())
    files = batch.get("im_file")
    name = str(files[image]) if isinstance(files, (list, tuple)) and 0 <= image < len(files) else None
    return image, name


#: How a YOLO model's class count is set (hints.py composes the fix from it).
HEAD_WORDS = {"ultralytics": "set nc: {n} in the data YAML and list {n} names"}


# ---- the one box whose class id is out of range, named by its image, its label file and the line.
# A detection batch holds one row per box: ``cls`` (float class ids), ``batch_idx`` (which image of the batch),
# ``im_file`` (that image's path). Ultralytics finds an image's labels by its path: the last ``/images/`` becomes
# ``/labels/`` and the extension ``.txt`` (``img2label_paths`` in ``ultralytics/data/utils.py``); each line is
# ``class x y w h``. 8.0.x checked ``max_cls <= num_cls`` while caching labels (off by one), so a class id equal to
# ``nc`` reached the loss; later releases drop such a label with a warning. Standard library only.

_MAX_BYTES = 1 << 20  # a label file is a few lines; a bigger one is not read


def label_file(image: str) -> str:
    """The label file Ultralytics reads for ``image``."""
    images, labels = f"{os.sep}images{os.sep}", f"{os.sep}labels{os.sep}"
    return labels.join(image.rsplit(images, 1)).rsplit(".", 1)[0] + ".txt"


def _values(tensor: Any) -> list[float] | None:
    try:
        values = tensor.detach().reshape(-1).cpu().tolist()
    except Exception:
        return None
    return values if isinstance(values, list) else None


def _line(path: str, class_id: int) -> int | None:
    """The first line of ``path`` labelling a box with ``class_id`` (1-based), None when it cannot be read."""
    try:
        if os.path.getsize(path) > _MAX_BYTES:
            return None
        with open(path, encoding="utf-8", errors="replace") as f:
            for number, text in enumerate(f, 1):
                head = text.split(maxsplit=1)[:1]
                try:
                    if head and float(head[0]) == class_id:
                        return number
                except ValueError:
                    continue
    except OSError:
        return None
    return None


def bad_label(batch: Mapping[str, Any], nc: int) -> tuple[str, str] | None:
    """``(BAD_LABEL, "class id 2 in .../labels/b.txt line 1 (image .../images/b.jpg)")`` for the batch's first box
    whose class id is outside ``0..nc-1``; None when every box is in range or the batch does not say."""
    classes = _values(batch.get("cls"))
    if not classes:
        return None
    row = next((i for i, v in enumerate(classes) if v >= nc or v < 0), None)
    if row is None:
        return None
    class_id = int(classes[row])
    owners = _values(batch.get("batch_idx"))
    files = batch.get("im_file")
    if owners is None or len(owners) != len(classes) or not isinstance(files, (list, tuple)):
        return BAD_LABEL, f"class id {class_id} (box {row} of the batch)"
    image_index = int(owners[row])
    if not 0 <= image_index < len(files):
        return BAD_LABEL, f"class id {class_id} (box {row} of the batch)"
    image = str(files[image_index])
    path = label_file(image)
    line = _line(path, class_id)
    where = f"{path} line {line}" if line is not None else path
    return BAD_LABEL, f"class id {class_id} in {where} (image {image})"


ADAPTER = Adapter(
    name="ultralytics",
    packages=PACKAGES,
    found=_found,
    head=_head,
    head_words=HEAD_WORDS,
    image_of=image_of,
    float_labels=FLOAT_LABELS,
)
