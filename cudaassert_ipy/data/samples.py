"""Post-mortem: which samples of the dataset hold the bad values, from the bookmarked batches.

Reads CPU tensors that the DataLoader yielded (kept by reference in the bookmark), never GPU
memory. CUDA reports late, so every recorded batch of each loader is checked and the message
says which batch holds the bad values. Example line: "batch 1,234 of epoch 3 from
`train_loader`: `train_ds[39817]` has class label 196 (position 15 of `targets`); 2 bad samples
in that batch, none in the 2 batches before it."
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cudaassert_ipy.base.wording import plural
from cudaassert_ipy.data.batch_record import BatchRecord
from cudaassert_ipy.data.loaders import float_labels, image_of
from cudaassert_ipy.data.valid_range import CLASS, IDS, UNIT, ValidRange

if TYPE_CHECKING:
    from cudaassert_ipy.frameworks.base import Ahead

__all__ = ["BAD_SAMPLE", "BadSample", "SampleCheck", "check_batches", "fields"]

BAD_SAMPLE = (
    "batch {batch:,} of epoch {epoch} from {loader}: {sample} has {kind} {value} "
    "(position {position} of `{field}`; valid: {valid}); {count} in that batch, {others}."
)
NOT_RECORDED_LINE = "batch {batch:,} of epoch {epoch} from {loader} was not recorded because {reason}."
NO_BAD = "{loader}: no {kind} outside {valid} in its {batches} recorded."
NONE_FOUND = (
    "No recorded batch holds the bad value: it came from elsewhere (a transform or a tensor made on "
    "the GPU, or an earlier batch than the ones kept)."
)
NO_FIELD = "{loader} yields {what}: none of its fields holds {kind}s to check."
NO_INDEX = "sample {row} of the batch ({why})"
AHEAD_ONE = (
    "{loader} had yielded {ahead} after the batch being processed at the error ({why}): that batch is "
    "batch {batch:,}{where}."
)
AHEAD_SOME = (
    "{loader} had yielded {low} to {high} batches after the batch being processed at the error ({why}): "
    "that batch is one of batches {first:,} to {last:,}{where}; the candidates' indices: {indices}."
)
NO_RECORDS = (
    "No DataLoader batch was recorded, so no sample can be named: the failing loop did not iterate a "
    "torch DataLoader (a generator, a list or a custom iterator is not recorded)."
)

_LABEL_WORDS = ("label", "target", "y", "cls", "class", "mask", "gt")
_ID_WORDS = ("input_ids", "ids", "token", "input", "x", "idx", "index")
_NOT_LABELS = ("attention_mask", "special_tokens_mask", "input_ids", "token_type_ids", "position_ids", "pixel")
_NOT_IDS = ("label", "target", "attention_mask", "token_type_ids", "position_ids", "special_tokens_mask")
_INT = ("torch.int64", "torch.int32", "torch.int16", "torch.int8", "torch.uint8")
_MAX_SHOWN = 5


@dataclass(frozen=True)
class BadSample:
    """One sample of the dataset with a value outside the valid range (:func:`cudaassert_ipy.bad_samples`)."""

    dataset_index: Any  # the index into the loader's dataset; None when the sampler gave none
    sample: str  # how to read it back: "train_ds[39817]" (or where it sat in the batch, without indices)
    field: str  # "targets", "batch['labels']"
    value: float
    valid: str  # "0..194 or ignore_index=-100"
    position: tuple[int, ...]  # the first bad value's position inside the field tensor
    loader: str | None
    epoch: int
    batch: int


@dataclass(frozen=True)
class SampleCheck:
    """The outcome: bad samples (latest batch first), the failing batch, and the report's lines."""

    samples: tuple[BadSample, ...] = ()
    lines: tuple[str, ...] = ()
    failing: BatchRecord | None = None


def fields(obj: Any, path: str = "batch", depth: int = 0) -> Iterator[tuple[str, Any, tuple[Any, ...]]]:
    """(path, tensor, keys) for every tensor of a nested batch: tuples, lists, dicts, BatchEncoding."""
    if hasattr(obj, "dtype") and hasattr(obj, "shape") and hasattr(obj, "is_cpu"):
        yield path, obj, ()
        return
    if depth > 4:
        return
    if isinstance(obj, (tuple, list)):
        items: Any = enumerate(obj)
    elif isinstance(obj, Mapping) or (hasattr(obj, "keys") and hasattr(obj, "items")):
        items = obj.items()
    else:
        return
    for key, value in items:
        for p, t, keys in fields(value, f"{path}[{key!r}]", depth + 1):
            yield p, t, (key, *keys)


def _name_words(keys: tuple[Any, ...]) -> str:
    return ".".join(str(k).lower() for k in keys if isinstance(k, str))


def _candidates(batch: Any, rng: ValidRange) -> list[tuple[str, Any, tuple[Any, ...]]]:
    """The fields that hold the values this range is about, best guesses first."""
    all_fields = [f for f in fields(batch) if f[1].numel() and f[1].dim() >= 1]
    words: tuple[str, ...]
    avoid: tuple[str, ...]
    if rng.kind == UNIT:
        cands = [f for f in all_fields if f[1].is_floating_point()]
        words, avoid = _LABEL_WORDS, ("input", "pixel", "image")
    else:
        named_labels = float_labels() if rng.kind == CLASS else ()
        cands = [
            f
            for f in all_fields
            if str(f[1].dtype) in _INT or (named_labels and f[2][-1:] and str(f[2][-1]) in named_labels)
        ]
        words, avoid = (_LABEL_WORDS, _NOT_LABELS) if rng.kind == CLASS else (_ID_WORDS, _NOT_IDS)
    named = [f for f in cands if _name_words(f[2])]
    if named:
        cands = [f for f in cands if not any(a in _name_words(f[2]) for a in avoid)]
        liked = [f for f in cands if any(w in _name_words(f[2]).split(".")[-1] for w in words)]
        return liked or cands
    if len(cands) > 1 or rng.kind == UNIT:  # plain tuples: (inputs, targets, ...) puts inputs first
        first = [f for f in cands if f[2][:1] == (0,)]
        rest = [f for f in cands if f[2][:1] != (0,)]
        return (first + rest) if rng.kind == IDS else (rest or first)
    return cands


def _bad_mask(t: Any, rng: ValidRange) -> Any:
    t = t.detach()
    if rng.kind == UNIT:
        return (t < 0) | (t > 1) | t.isnan()
    bad = (t < int(rng.low)) | (t >= int(rng.high))
    if rng.ignore is not None:
        bad &= t != rng.ignore
    return bad


def _check_record(
    rec: BatchRecord, rng: ValidRange, names: Mapping[int, str], aliases: Mapping[int, str], loader: str
) -> list[BadSample]:
    out: list[BadSample] = []
    indices = rec.indices
    for path, t, _keys in _candidates(rec.batch_object, rng):
        bad = _bad_mask(t, rng)
        if not bool(bad.any()):
            continue
        rows = bad.reshape(bad.shape[0], -1).any(1).nonzero().flatten().tolist()
        field = aliases.get(id(t), path)
        for row in rows:
            pos = tuple(int(p) for p in bad[row].nonzero()[0].tolist()) if bad.dim() > 1 else ()
            value = t[row][pos].item() if pos else t[row].item()
            index = indices[row] if indices is not None and len(indices) == bad.shape[0] else None
            image = image_of(rec.batch_object, row, bad.shape[0]) if index is None else None
            if image is not None and indices is not None and 0 <= image[0] < len(indices):
                index = indices[image[0]]  # a per-box field: the box's image
            sample = (
                _sample_name(rec.dataset, index, names, loader)
                if index is not None
                else NO_INDEX.format(row=row, why=rec.note or "no sample indices were recorded")
            )
            if image is not None and image[1]:
                sample += f" ({image[1]})"
            out.append(
                BadSample(index, sample, field, value, rng.text(), (row, *pos), rec.loader, rec.epoch, rec.batch)
            )
        break  # the first field with bad values is the one the op got
    return out


def _sample_name(dataset: Any, index: Any, names: Mapping[int, str], loader: str) -> str:
    base = names.get(id(dataset)) or (f"{loader.strip('`')}.dataset" if loader.startswith("`") else "dataset")
    inner = getattr(dataset, "indices", None)  # torch.utils.data.Subset: name the sample in the full dataset too
    parent = getattr(dataset, "dataset", None)
    if inner is not None and parent is not None and isinstance(index, int) and 0 <= index < len(inner):
        return f"{base}[{index}] (= {names.get(id(parent), base + '.dataset')}[{int(inner[index])}])"
    return f"{base}[{index!r}]" if isinstance(index, str) else f"{base}[{index}]"


def check_batches(
    records: Sequence[BatchRecord],
    rng: ValidRange,
    names: Mapping[int, str] | None = None,
    aliases: Mapping[int, str] | None = None,
) -> SampleCheck:
    """Check every recorded batch (latest first) against ``rng``; ``names`` maps id(dataset) to its name."""
    names = names or {}
    aliases = aliases or {}
    if not records:
        return SampleCheck(lines=(NO_RECORDS,))
    lines: list[str] = []
    found: list[BadSample] = []
    failing: BatchRecord | None = None
    clean = False  # some loader's batches were checked and held nothing bad
    for key, recs in _by_loader(records):
        loader = f"`{recs[0].loader}`" if recs[0].loader else "an unnamed DataLoader"
        checked, bad_per_batch = 0, []
        skipped: list[str] = []
        for rec in recs:  # latest first
            if rec.batch_object is None:
                skipped.append(
                    NOT_RECORDED_LINE.format(
                        batch=rec.batch, epoch=rec.epoch, loader=loader, reason=rec.note or "it was not kept"
                    )
                )
                continue
            checked += 1
            bad = _check_record(rec, rng, names, aliases, loader)
            if bad:
                bad_per_batch.append((rec, bad))
        if bad_per_batch:
            bad_per_batch = _processed_first(bad_per_batch, recs)
            rec, bad = bad_per_batch[0]
            failing = failing or rec
            found += [b for _, b_list in bad_per_batch for b in b_list]
            first = bad[0]
            earlier = [r for r in recs if r.batch_object is not None and r.order < rec.order]
            others_bad = [(r, b) for r, b in bad_per_batch[1:]]
            if others_bad:
                others = "; ".join(f"{plural(len(b), 'bad sample')} in batch {r.batch:,}" for r, b in others_bad)
            else:
                others = (
                    f"none in the {_batches(len(earlier))} before it" if earlier else "no earlier batch was recorded"
                )
            later = [r for r in recs if r.batch_object is not None and r.order > rec.order]
            if later:
                why = (
                    "fetched ahead"
                    if rec.ahead is not None and len(later) <= rec.ahead.high
                    else "CUDA reported it late"
                )
                others += f" and none in the {_batches(len(later))} after it ({why})"
            lines.append(
                BAD_SAMPLE.format(
                    batch=rec.batch,
                    epoch=rec.epoch,
                    loader=loader,
                    sample=_quoted(first),
                    kind=rng.kind,
                    value=_num(first.value),
                    position=_pos(first.position),
                    field=first.field,
                    valid=rng.text(),
                    count=plural(len(bad), "bad sample"),
                    others=others,
                )
            )
            if len(bad) > 1:
                shown = ", ".join(f"{_quoted(b)} = {_num(b.value)}" for b in bad[1:_MAX_SHOWN])
                lines.append(f"Also in that batch: {shown}{' ...' if len(bad) > _MAX_SHOWN else ''}.")
        elif checked:
            what = type(recs[0].batch_object).__name__
            if not any(True for _ in fields(recs[0].batch_object)):
                lines.append(NO_FIELD.format(loader=loader, what=f"a {what}", kind=rng.kind))
            else:
                clean = True
                lines.append(NO_BAD.format(batches=_batches(checked), loader=loader, kind=rng.kind, valid=rng.text()))
        ahead = _ahead_line(recs, loader)
        if ahead is not None:
            lines.append(ahead[0])
            if failing is None and ahead[1] is not None:
                failing = ahead[1]
        lines += skipped[:1]
        del key
    if not found and clean:
        lines.append(NONE_FOUND)
    return SampleCheck(tuple(found), tuple(lines), failing)


def _ahead_line(recs: Sequence[BatchRecord], loader: str) -> tuple[str, BatchRecord | None] | None:
    """Which batch was being processed at the error, when the loader's framework fetches ahead (latest first)."""
    ahead: Ahead | None = recs[0].ahead if recs else None
    if ahead is None:
        return None
    latest = recs[0].batch
    first, last = max(0, latest - ahead.high), latest - ahead.low
    if last < 0:
        return None
    why = "; ".join(ahead.why)
    by_batch = {r.batch: r for r in recs}
    where = f" of epoch {recs[0].epoch}"
    if first == last:
        rec = by_batch.get(last)
        return AHEAD_ONE.format(loader=loader, ahead=_batches(ahead.low), why=why, batch=last, where=where), rec
    shown = "; ".join(f"batch {b:,}: {_short(by_batch[b].indices)}" for b in range(first, last + 1) if b in by_batch)
    return AHEAD_SOME.format(
        loader=loader,
        low=ahead.low,
        high=ahead.high,
        why=why,
        first=first,
        last=last,
        where=where,
        indices=shown or "not recorded",
    ), None


def _processed_first(
    bad: list[tuple[BatchRecord, list[BadSample]]], recs: Sequence[BatchRecord]
) -> list[tuple[BatchRecord, list[BadSample]]]:
    """With a framework fetching ahead, the failing batch is the earliest bad one among those that could have been
    processed (micro-batches run in order, and the first bad one fails); batches only fetched ahead come last."""
    ahead = recs[0].ahead if recs else None
    if ahead is None:
        return bad
    first, last = recs[0].batch - ahead.high, recs[0].batch - ahead.low
    window = [b for b in bad if first <= b[0].batch <= last]
    if not window:
        return bad
    window.sort(key=lambda b: b[0].batch)
    return window[:1] + [b for b in bad if b is not window[0]]


def _short(indices: tuple[Any, ...] | None) -> str:
    if indices is None:
        return "not recorded"
    text = ", ".join(str(i) for i in indices[:8])
    return f"[{text}{', ...' if len(indices) > 8 else ''}]"


def _by_loader(records: Sequence[BatchRecord]) -> list[tuple[int, list[BatchRecord]]]:
    """Records grouped by loader (its sampler), the loader that yielded last first; one iteration each."""
    groups: dict[int, list[BatchRecord]] = {}
    for rec in sorted(records, key=lambda r: r.order, reverse=True):
        group = groups.setdefault(id(rec.sampler), [])
        if not group or group[0].epoch == rec.epoch:
            group.append(rec)
    return list(groups.items())


def _batches(n: int) -> str:
    return f"{n} batch" if n == 1 else f"{n} batches"


def _quoted(b: BadSample) -> str:
    return f"`{b.sample}`" if b.dataset_index is not None else b.sample


def _num(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _pos(p: tuple[int, ...]) -> str:
    return str(p[0]) if len(p) == 1 else str(list(p))


_FOR = re.compile(r"\bfor\s+([\w\s,()]+?)\s+in\s+(enumerate\(\s*)?(?:tqdm\(\s*)?(\w+)")


def loop_names(cell_source: str) -> dict[str, list[str]]:
    """``for i, (images, targets) in enumerate(train_loader)`` -> {"train_loader": ["images", "targets"]}."""
    out: dict[str, list[str]] = {}
    for m in _FOR.finditer(cell_source):
        names = [n.strip() for n in m.group(1).replace("(", " ").replace(")", " ").split(",") if n.strip()]
        out.setdefault(m.group(3), names[1:] if m.group(2) else names)
    return out
