"""Ultralytics: the one box whose class id is out of range, named by its image, its label file and the line.

A detection batch holds one row per box: ``cls`` (float class ids), ``batch_idx`` (which image of the batch),
``im_file`` (that image's path). Ultralytics finds an image's labels by its path: the last ``/images/`` becomes
``/labels/`` and the extension ``.txt`` (``img2label_paths`` in ``ultralytics/data/utils.py``); each line is
``class x y w h``. 8.0.x checked ``max_cls <= num_cls`` while caching labels (off by one), so a class id equal to
``nc`` reached the loss; later releases drop such a label with a warning. Standard library only.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional

__all__ = ["BAD_LABEL", "bad_label", "label_file"]

#: The evidence line's name: diagnose/causes/rule_sizes.py words the cause from it.
BAD_LABEL = "batch's bad label"
_MAX_BYTES = 1 << 20  # a label file is a few lines; a bigger one is not read


def label_file(image: str) -> str:
    """The label file Ultralytics reads for ``image``."""
    images, labels = f"{os.sep}images{os.sep}", f"{os.sep}labels{os.sep}"
    return labels.join(image.rsplit(images, 1)).rsplit(".", 1)[0] + ".txt"


def _values(tensor: Any) -> Optional[list[float]]:
    try:
        values = tensor.detach().reshape(-1).cpu().tolist()
    except Exception:
        return None
    return values if isinstance(values, list) else None


def _line(path: str, class_id: int) -> Optional[int]:
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


def bad_label(batch: Mapping[str, Any], nc: int) -> Optional[tuple[str, str]]:
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
