"""Glue for one failure: the range the diagnosis knows, the bookmark's records, the notebook's names.

Why separate from :mod:`.samples`: naming (which DataLoader is ``train_loader``, which tensor the
cell called ``targets``) reads the user's namespace and cell source; the check itself does not.
"""

from __future__ import annotations

import dataclasses
import linecache
import re
import sys
from collections.abc import Mapping
from typing import Any

from cudaassert_ipy.base.wording import error_line, is_cell_filename
from cudaassert_ipy.data.batch_record import BatchRecord
from cudaassert_ipy.data.bookmark import Bookmark
from cudaassert_ipy.data.loaders import is_loader
from cudaassert_ipy.data.reproduce import plan_entry
from cudaassert_ipy.data.samples import SampleCheck, check_batches, fields, loop_names
from cudaassert_ipy.data.valid_range import ValidRange, kind_of, valid_range
from cudaassert_ipy.diagnose.diagnosis import Diagnosis
from cudaassert_ipy.diagnose.evidence import Evidence
from cudaassert_ipy.frameworks.base import Launch

__all__ = ["CHECK_FAILED", "CHILD_SAMPLES", "analyse", "annotate", "check_records", "launched", "loader_names"]

_LOOP = re.compile(r"\bfor\b[^\n]*\bin\b|\bnext\(")
CHILD_SAMPLES = "Checked by {process} against its own DataLoader bookmark's last batches, before it exited."
CHECK_FAILED = "The check of the recorded batches failed ({error}); the diagnosis above is unchanged."
REPRODUCE_ALIVE = (
    "Reproduce in one step: `cudaassert_ipy.failing_batch({loader})` is a DataLoader over exactly "
    "these {count} samples (same dataset, collate_fn and batch size)."
)
REPRODUCE_DEAD = (
    "After Restart & replay, run one training step on `cudaassert_ipy.failing_batch({loader})`, a "
    "DataLoader over exactly these {count} samples: the validators name the bad value in seconds."
)


def loader_names(user_ns: Mapping[str, Any]) -> tuple[dict[int, str], dict[int, str]]:
    """id(index sampler) -> loader name (and id(its dataset) -> loader name, for copies of the loader that
    frameworks iterate: Lightning under DDP re-builds it with a DistributedSampler), and id(dataset) -> dataset
    name, from the notebook's globals."""
    torch = sys.modules.get("torch")
    loaders: dict[int, str] = {}
    datasets: dict[int, str] = {}
    if torch is None:
        return loaders, datasets
    data = torch.utils.data
    owned: dict[int, str] = {}  # id(a loader's dataset) -> that loader's guess, until the dataset's own name is seen
    for name, value in list(user_ns.items()):
        if name.startswith("_"):
            continue
        try:
            if isinstance(value, data.DataLoader):
                loaders.setdefault(id(value._index_sampler), name)
                loaders.setdefault(id(value.dataset), name)  # a copy of it (Lightning's DDP re-builds it) iterates
                owned.setdefault(id(value.dataset), datasets.setdefault(id(value.dataset), f"{name}.dataset"))
            elif is_loader(value):  # its records are filed under the loader itself (data/loaders)
                loaders.setdefault(id(value), name)
                datasets.setdefault(id(value.dataset), f"{name}.dataset")
            elif isinstance(value, data.Dataset):
                datasets[id(value)] = name  # a dataset's own name beats "loader.dataset"
        except Exception:  # an odd object must not cost the check
            continue
    for name, value in list(user_ns.items()):  # a loader's dataset that is no torch Dataset (HF datasets) by its name
        if id(value) in owned and datasets.get(id(value)) == owned[id(value)] and not name.startswith("_"):
            datasets[id(value)] = name
    return loaders, datasets


def _cell_frames(ev: Evidence) -> list[Any]:
    """The traceback's frames in notebook cells: ``train_one_epoch`` defined in an earlier cell counts too."""
    out = []
    tb = ev.detection.exception.__traceback__
    while tb is not None:
        if is_cell_filename(tb.tb_frame.f_code.co_filename):
            out.append(tb.tb_frame)
        tb = tb.tb_next
    return out


def _aliases(records: list[BatchRecord], user_ns: Mapping[str, Any], ev: Evidence) -> dict[int, str]:
    """id(field tensor) -> the name the user gave it: a variable holding it, or the for-loop's target names."""
    torch = sys.modules.get("torch")
    out: dict[int, str] = {}
    frames = _cell_frames(ev)
    loops = loop_names(ev.cell_source)
    for frame in frames:  # the loop may sit in a function from another cell
        for loader, targets in loop_names("".join(linecache.getlines(frame.f_code.co_filename))).items():
            loops.setdefault(loader, targets)
    tensors: dict[int, str] = {}
    for ns in [user_ns, *(f.f_locals for f in reversed(frames))]:
        for k, v in list(ns.items()):
            if torch is not None and isinstance(v, torch.Tensor) and not k.startswith("_"):
                tensors.setdefault(id(v), k)
    for rec in records:
        names = loops.get(rec.loader or "")
        batch = rec.batch_object
        if names and isinstance(batch, (tuple, list)) and len(names) == len(batch):
            for name, part in zip(names, batch):
                for path, t, _ in fields(part, name):
                    out.setdefault(id(t), path)
        elif names and len(names) == 1:
            for path, t, _ in fields(batch, names[0]):
                out.setdefault(id(t), path)
        for _, t, _ in fields(batch):
            if id(t) in tensors:
                out[id(t)] = tensors[id(t)]
    return out


def _iterates(ev: Evidence) -> bool:
    """Whether the failing code loops or steps an iterator: then "no batch was recorded" says something."""
    sources = [ev.cell_source, *("".join(linecache.getlines(f.f_code.co_filename)) for f in _cell_frames(ev))]
    return any(_LOOP.search(source) for source in sources)


def analyse(bookmark: Bookmark, ev: Evidence, cause_id: str, user_ns: Mapping[str, Any]) -> SampleCheck | None:
    """The bad samples for this failure, or None when the cause is not about data values."""
    if ev.detection.launch is not None:  # the batches were a child's: what it checked and printed
        return launched(ev.detection.launch, cause_id)
    rng = valid_range(ev, cause_id)
    if rng is None:
        return None
    return check_records(bookmark, ev, rng, user_ns)


def check_records(bookmark: Bookmark, ev: Evidence, rng: ValidRange, user_ns: Mapping[str, Any]) -> SampleCheck:
    """The bookmark's records checked against ``rng``."""
    loaders, datasets = loader_names(user_ns)
    records = bookmark.records(loaders)
    if not records and not loaders and not _iterates(ev):
        return SampleCheck()  # no loader, no loop: nothing to say about samples
    check = check_batches(records, rng, datasets, _aliases(records, user_ns, ev))
    if bookmark.note:
        check = dataclasses.replace(check, lines=(*check.lines, bookmark.note + "."))
    return check


def launched(launch: Launch, cause_id: str) -> SampleCheck | None:
    """The lines of the failing child's own check (data/child_samples.py) against the kind of value ``cause_id`` is
    about; none when it printed none (a child that is no fork of this kernel runs no bookmark)."""
    kind = kind_of(cause_id)
    if kind is None:
        return None
    lines = tuple(line for k, line in launch.samples if k == kind)
    return SampleCheck(lines=(*lines, CHILD_SAMPLES.format(process=launch.process)) if lines else ())


def annotate(
    bookmark: Bookmark, diagnosis: Diagnosis, ev: Evidence, user_ns: Mapping[str, Any]
) -> tuple[Diagnosis, SampleCheck | None]:
    """The diagnosis with the bookmark's lines added; never raises (the report must still show)."""
    try:
        check = analyse(bookmark, ev, diagnosis.cause_id, user_ns)
    except Exception as e:
        return dataclasses.replace(diagnosis, samples=(CHECK_FAILED.format(error=error_line(e)),)), None
    if check is None or not check.lines:
        return diagnosis, check
    lines = check.lines
    entry = plan_entry(check)
    if entry is not None:
        template = REPRODUCE_DEAD if diagnosis.context_dead else REPRODUCE_ALIVE
        lines += (template.format(loader=entry[0], count=len(entry[1])),)
    return dataclasses.replace(diagnosis, samples=lines), check
