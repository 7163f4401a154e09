"""Ultralytics: a detection batch is a dict whose per-box fields (``cls``, ``bboxes``) have one row per box;
``batch_idx`` says which image of the batch each box belongs to and ``im_file`` names that image's file.
Its class labels are float tensors (``cls``), so they are checked as labels by name."""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["FLOAT_LABELS", "image_of"]

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
