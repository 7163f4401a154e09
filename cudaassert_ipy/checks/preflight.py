"""Dataset preflight: find every out-of-range label or token id on the CPU, before training.

``check_labels`` / ``check_token_ids`` check one tensor (or list) and raise a
:class:`~cudaassert_ipy.checks.errors.ValidationIndexError` that names the bad values.
``preflight`` scans a whole dataset or ``DataLoader`` with a progress bar and returns a
:class:`PreflightReport` listing *every* offending sample index, with a summary to act on.

Why in checks/: it is the validators' check run earlier, over the whole dataset instead of in front of one call:
the same bad values, the same error classes and the same fix sentences (``diagnose/hints.py``). It shares
nothing with the DataLoader bookmark in data/, which records what ran instead of checking what will.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from cudaassert_ipy.base.wording import plural
from cudaassert_ipy.checks.common import bad_details
from cudaassert_ipy.checks.errors import ValidationIndexError, range_text
from cudaassert_ipy.checks.preflight_scan import IDS_KEYS, LABEL_KEYS, Key, Progress, batch_len, pick_field, samples
from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.hints import LabelFacts, TokenFacts
from cudaassert_ipy.frameworks import ClassHead, class_head_of
from cudaassert_ipy.frameworks.generic import declared_classes

__all__ = ["PreflightReport", "check_labels", "check_token_ids", "preflight"]

#: Offending sample indices printed in the summary (the report keeps them all).
SUMMARY_INDICES = 50
#: Distinct bad values kept per sample.
VALUES_PER_SAMPLE = 5


# ---------------------------------------------------------------- one tensor
def _as_cpu_tensor(values: Any) -> Tensor:
    if isinstance(values, Tensor):
        return values.detach().cpu()  # one copy, then host work only
    return torch.as_tensor(values)


def _bad_mask(t: Tensor, lo: int, hi: int, ignore_index: int | None) -> Tensor:
    """Values outside ``[lo, hi)`` (and not ``ignore_index``); non-integers and NaN count as bad."""
    if t.dtype is torch.bool:
        t = t.to(torch.int64)
    if t.is_floating_point() or t.is_complex():
        not_int = ~torch.isfinite(t) | (t != torch.round(t))
        bad = not_int | (t < lo) | (t >= hi)
    else:
        bad = (t < lo) | (t >= hi)
    if ignore_index is not None:
        bad &= t != ignore_index
    return bad


def _integers(values: list[Any]) -> list[int]:
    return [int(v) for v in values if isinstance(v, (int, bool)) or (isinstance(v, float) and v.is_integer())]


def _label_facts(
    num_classes: int,
    distinct: list[Any],
    ignore_index: int | None,
    segmentation: bool,
    declared: int | None = None,
    head: ClassHead | None = None,
) -> LabelFacts:
    return LabelFacts(
        bad=tuple(_integers(distinct)),
        n_classes=num_classes,
        ignore_index=ignore_index,
        dense=segmentation,
        declared=declared,
        non_integer=any(isinstance(v, float) and not v.is_integer() for v in distinct),
        head=head,
    )


def _declared_classes(data: Any) -> int | None:
    """How many classes the dataset lists (``dataset.classes``, as torchvision datasets have, or a Hugging Face
    ``ClassLabel`` feature), if it does."""
    declared = declared_classes(getattr(data, "dataset", data), "dataset")
    return declared[1] if declared is not None else None


def _tokenizer_size(tokenizer: Any) -> int | None:
    return None if tokenizer is None else len(tokenizer)


def check_labels(labels: Any, num_classes: int, ignore_index: int | None = None) -> None:
    """Raise ``ValidationIndexError`` if a label is outside ``0..num_classes-1``.

    Values equal to ``ignore_index`` are allowed. Accepts a tensor (any device: copied to the
    CPU once), a list or an array.
    """
    t = _as_cpu_tensor(labels)
    if t.numel() == 0:
        return
    bad = _bad_mask(t, 0, num_classes, ignore_index)
    if not bool(bad.any()):
        return
    n_bad, examples, distinct = bad_details(t, bad)
    valid = range_text(0, num_classes)
    if ignore_index is not None:
        valid += f" (or ignore_index={ignore_index})"
    facts = _label_facts(num_classes, distinct, ignore_index, segmentation=t.dim() >= 2)
    cause = "nll_loss2d_target_out_of_range" if t.dim() >= 2 else "nll_loss_target_out_of_range"
    raise ValidationIndexError.out_of_range(
        "check_labels",
        "labels",
        valid,
        n_bad,
        examples,
        cause_id=cause,
        hint=hints.class_labels(facts),
        facts=facts,
        found_on_cpu=True,
    )


def check_token_ids(ids: Any, vocab_size: int, *, tokenizer: Any = None) -> None:
    """Raise ``ValidationIndexError`` if a token id is outside ``0..vocab_size-1``.

    ``tokenizer``: the tokenizer the ids come from; when ``len(tokenizer)`` exceeds ``vocab_size`` the
    fix says to resize the embedding to it.
    """
    t = _as_cpu_tensor(ids)
    if t.numel() == 0:
        return
    bad = _bad_mask(t, 0, vocab_size, None)
    if not bool(bad.any()):
        return
    n_bad, examples, distinct = bad_details(t, bad)
    facts = TokenFacts(
        bad=tuple(_integers(distinct)), num_embeddings=vocab_size, tokenizer_size=_tokenizer_size(tokenizer)
    )
    raise ValidationIndexError.token_ids(
        "check_token_ids", "ids", n_bad, examples, facts, size_name="vocab_size", found_on_cpu=True
    )


# ---------------------------------------------------------------- the report
@dataclass
class PreflightReport:
    """What :func:`preflight` found. ``str(report)`` is the summary; every index is kept."""

    n_samples: int
    source: str
    num_classes: int | None = None
    vocab_size: int | None = None
    ignore_index: int | None = None
    #: sample index -> its distinct bad label values (first few)
    bad_labels: dict[int, list[Any]] = field(default_factory=dict)
    #: sample index -> its distinct bad token ids (first few)
    bad_ids: dict[int, list[Any]] = field(default_factory=dict)
    #: bad label value -> number of samples holding it
    label_value_counts: Counter[Any] = field(default_factory=Counter)
    id_value_counts: Counter[Any] = field(default_factory=Counter)
    segmentation: bool = False
    #: how many classes the dataset lists (``dataset.classes``), when it does
    declared_classes: int | None = None
    #: ``len(tokenizer)`` when a tokenizer was passed
    tokenizer_size: int | None = None
    #: where the model passed as ``model=`` sets its class count (an HF classifier's num_labels, ...)
    head: ClassHead | None = None

    @property
    def ok(self) -> bool:
        return not self.bad_labels and not self.bad_ids

    @property
    def bad_samples(self) -> list[int]:
        """Every offending sample index, sorted."""
        return sorted(set(self.bad_labels) | set(self.bad_ids))

    def _section(self, what: str, valid: str, bad: dict[int, list[Any]], counts: Counter[Any], hint: str) -> list[str]:
        if not bad:
            return [f"{what} (valid: {valid}): all in range."]
        indices = sorted(bad)
        shown = ", ".join(str(i) for i in indices[:SUMMARY_INDICES])
        if len(indices) > SUMMARY_INDICES:
            shown += f", ... ({len(indices) - SUMMARY_INDICES} more)"
        attr = "bad_labels" if what == "labels" else "bad_ids"
        top = ", ".join(f"{v!r} in {plural(n, 'sample')}" for v, n in counts.most_common(8))
        lines = [
            f"{what} (valid: {valid}): {plural(len(indices), 'sample')} with bad values.",
            f"  sample indices: {shown}   (all in report.{attr})",
            f"  bad values: {top}",
        ]
        if hint:
            lines.append(f"  Likely fix: {hint}")
        return lines

    @property
    def labels_fix(self) -> str:
        """The likely fix for the bad labels ("" when there are none or no num_classes was given)."""
        if self.num_classes is None or not self.bad_labels:
            return ""
        return hints.class_labels(
            _label_facts(
                self.num_classes,
                list(self.label_value_counts),
                self.ignore_index,
                self.segmentation,
                self.declared_classes,
                self.head,
            )
        )

    @property
    def ids_fix(self) -> str:
        """The likely fix for the bad token ids ("" when there are none or no vocab_size was given)."""
        if self.vocab_size is None or not self.bad_ids:
            return ""
        return hints.token_ids(
            TokenFacts(
                bad=tuple(_integers(list(self.id_value_counts))),
                num_embeddings=self.vocab_size,
                tokenizer_size=self.tokenizer_size,
            )
        )

    def summary(self) -> str:
        lines = [f"preflight: scanned {plural(self.n_samples, 'sample')} of {self.source}."]
        if self.num_classes is not None:
            valid = range_text(0, self.num_classes)
            if self.ignore_index is not None:
                valid += f" or ignore_index={self.ignore_index}"
            lines += self._section("labels", valid, self.bad_labels, self.label_value_counts, self.labels_fix)
        if self.vocab_size is not None:
            valid = range_text(0, self.vocab_size)
            lines += self._section("token ids", valid, self.bad_ids, self.id_value_counts, self.ids_fix)
        if self.ok:
            lines.append("Nothing out of range: these labels and ids cannot trigger an index device-side assert.")
        return "\n".join(lines)

    __str__ = summary

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.summary())

    def raise_if_bad(self) -> None:
        """Raise a ``ValidationIndexError`` naming the offending samples (nothing if :attr:`ok`)."""
        if self.ok:
            return
        labels = bool(self.bad_labels)
        bad = self.bad_labels if labels else self.bad_ids
        examples = [((i,), values[0]) for i, values in sorted(bad.items())[:5]]
        argument = "labels" if labels else "token ids"
        limit = self.num_classes if labels else self.vocab_size
        valid = range_text(0, limit or 0)
        if labels and self.ignore_index is not None:
            valid += f" (or ignore_index={self.ignore_index})"
        raise ValidationIndexError.bad_samples(
            "preflight",
            argument,
            valid,
            len(bad),
            examples,
            cause_id="nll_loss_target_out_of_range" if labels else "index_select_out_of_range",
            hint=self.labels_fix if labels else self.ids_fix,
        )


def _record(
    values: Any,
    lo: int,
    hi: int,
    ignore: int | None,
    first: int,
    batched: bool,
    store: dict[int, list[Any]],
    counts: Counter[Any],
) -> int:
    """Check one sample (or batch); returns the label tensor's dimension per sample."""
    t = _as_cpu_tensor(values)
    per_sample_dim = t.dim() - 1 if batched else t.dim()
    if t.numel() == 0:
        return per_sample_dim
    bad = _bad_mask(t, lo, hi, ignore)
    if not bool(bad.any()):
        return per_sample_dim
    rows = bad.reshape(t.shape[0], -1).any(1).nonzero().flatten().tolist() if batched and t.dim() else [None]
    for row in rows:
        sample_t, sample_bad = (t[row], bad[row]) if row is not None else (t, bad)
        distinct = torch.unique(sample_t[sample_bad]).tolist()
        index = first + (row or 0)
        store[index] = distinct[:VALUES_PER_SAMPLE]
        for v in distinct:
            counts[v] += 1
    return per_sample_dim


def preflight(
    dataset_or_loader: Any,
    num_classes: int | None = None,
    vocab_size: int | None = None,
    ignore_index: int | None = None,
    *,
    label_key: Key = None,
    ids_key: Key = None,
    limit: int | None = None,
    progress: bool = True,
    tokenizer: Any = None,
    model: Any = None,
) -> PreflightReport:
    """Scan a dataset (or ``DataLoader``) on the CPU for labels/ids that would trigger a device assert.

    ``num_classes``: check labels against ``0..num_classes-1`` (``ignore_index`` allowed).
    ``vocab_size``: check token ids against ``0..vocab_size-1``.
    ``label_key`` / ``ids_key``: where each sample keeps them (a dict key, a tuple position or a
    function of the sample); by default ``labels``/``label``/``target``... and ``input_ids``
    for dict samples, the last and first element for ``(x, y)`` tuples.
    ``tokenizer``: where the ids come from; the fix names it when it has more tokens than ``vocab_size``.
    A dataset with a ``classes`` list (torchvision style) is compared with ``num_classes`` in the fix.
    A ``DataLoader`` over a map-style dataset is scanned through ``loader.dataset``, so the
    reported indices are dataset indices. ``limit`` stops after that many samples.

    ``model``: the model the data is for (a Hugging Face classifier, a LightningModule with a ``num_classes``
    hparam, ...): ``num_classes`` defaults to its class count, and the fix says how its framework sets it.

    Returns a :class:`PreflightReport`; ``report.raise_if_bad()`` turns problems into an error.
    """
    head = class_head_of(model) if model is not None else None
    if num_classes is None and head is not None:
        num_classes = head.now
    if num_classes is None and vocab_size is None:
        raise ValueError("preflight needs num_classes=..., vocab_size=..., or both")
    items, total, source = samples(dataset_or_loader)
    if limit is not None:
        total = min(total, limit) if total is not None else limit
    report = PreflightReport(
        n_samples=0,
        source=source,
        num_classes=num_classes,
        vocab_size=vocab_size,
        ignore_index=ignore_index,
        declared_classes=_declared_classes(dataset_or_loader),
        tokenizer_size=_tokenizer_size(tokenizer),
        head=head,
    )
    bar = Progress(total, progress)
    try:
        for first, item, batched in items:
            if limit is not None and first >= limit:
                break
            if num_classes is not None:
                labels = pick_field(item, label_key, LABEL_KEYS, -1)
                dim = _record(
                    labels, 0, num_classes, ignore_index, first, batched, report.bad_labels, report.label_value_counts
                )
                report.segmentation = report.segmentation or dim >= 2
            if vocab_size is not None:
                ids = pick_field(item, ids_key, IDS_KEYS, 0)
                _record(ids, 0, vocab_size, None, first, batched, report.bad_ids, report.id_value_counts)
            n = batch_len(item) if batched else 1
            report.n_samples += n
            bar.update(n)
    finally:
        bar.close()
    return report
