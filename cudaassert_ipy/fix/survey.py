"""The data's evidence for a decision: every label of the training set, read with preflight's reader.

A scan of the dataset (not only the failing batch) says whether label C is a class of its own, a
handful of stray rows, a 'void' 255, or 1-based labels; the alternatives are ranked from it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from cudaassert_ipy.checks.preflight_scan import LABEL_KEYS, batch_len, pick_field, samples
from cudaassert_ipy.fix.model import LabelSurvey

__all__ = ["survey_from", "survey_labels"]

MAX_SAMPLES = 1_000_000  # a larger dataset is surveyed up to here


class OutOfTime(Exception):
    """The scan ran past its budget: no evidence rather than a partial one."""


def survey_labels(
    name: str, data: Any, n_classes: int, ignore_index: int | None = None, budget_s: float | None = None
) -> LabelSurvey:
    """Every label value and the rows outside ``0..n_classes-1`` (``ignore_index`` excepted) of ``data``.

    ``budget_s``: raise :class:`OutOfTime` past it (the panel must not wait on a dataset that decodes images)."""
    import time

    import torch

    deadline = time.monotonic() + budget_s if budget_s is not None else None

    items, _, _ = samples(data)
    counts: Counter[int] = Counter()
    bad: list[int] = []
    n = 0
    for first, item, batched in items:
        if first >= MAX_SAMPLES:
            break
        if deadline is not None and time.monotonic() > deadline:
            raise OutOfTime(name)
        t = torch.as_tensor(pick_field(item, None, LABEL_KEYS, -1)).detach().cpu()
        rows = [t[i] for i in range(batch_len(item))] if batched else [t]
        for i, row in enumerate(rows):
            values = [int(v) for v in torch.unique(row).tolist()] if row.numel() else []
            counts.update(values)
            if any((v < 0 or v >= n_classes) and v != ignore_index for v in values):
                bad.append(first + i)
        n += len(rows)
    dataset = getattr(data, "dataset", data)
    return LabelSurvey(
        name,
        n,
        tuple(sorted(counts.items())),
        tuple(bad),
        has_select=callable(getattr(dataset, "select", None)) and hasattr(dataset, "features"),
    )


def survey_from(
    ns: Mapping[str, Any],
    candidates: Sequence[str],
    n_classes: int,
    ignore_index: int | None = None,
    budget_s: float | None = None,
) -> LabelSurvey | None:
    """The first of ``candidates`` (dotted names: the failing loader, the dataset that declared the classes) that
    is a dataset of ``ns`` (a DataLoader stands for its dataset), scanned whole; None when none can be read."""
    for name in candidates:
        obj: Any = ns.get(name.split(".")[0])
        for part in name.split(".")[1:]:
            obj = getattr(obj, part, None)
        obj = getattr(obj, "dataset", obj) if type(obj).__name__ == "DataLoader" else obj
        source = next((k for k, v in ns.items() if v is obj and not k.startswith("_")), None)
        if obj is None or source is None:
            continue
        try:
            return survey_labels(source, obj, n_classes, ignore_index, budget_s)
        except OutOfTime:
            return None
        except Exception:  # a dataset preflight cannot read: no evidence from the data, no default
            continue
    return None
