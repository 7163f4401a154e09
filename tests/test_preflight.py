"""Dataset preflight: check_labels, check_token_ids and preflight report every bad sample."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset, TensorDataset

from cudaassert_ipy.checks import ValidationIndexError
from cudaassert_ipy.checks.preflight import PreflightReport, check_labels, check_token_ids, preflight


def labelled_dataset() -> TensorDataset:
    y = torch.arange(100) % 10
    y[[3, 17, 55]] = 10
    y[80] = -1
    return TensorDataset(torch.randn(100, 3), y)


class TokenStream(IterableDataset):
    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        for i in range(50):
            bad = 1000 if i % 7 == 0 else 3
            yield {"input_ids": torch.tensor([1, 2, bad]), "labels": torch.tensor([1, -100, 2])}


def test_check_labels_accepts_valid_labels_and_ignore_index() -> None:
    """Valid labels pass without a word: in range, equal to ignore_index (255, itself out of range), a list,
    or none at all; the labels are read, not changed."""
    labels = torch.tensor([0, 4, 255])
    assert check_labels(labels, 5, ignore_index=255) is None
    assert labels.tolist() == [0, 4, 255]
    assert check_labels([0, 1, 2], 3) is None
    assert check_labels(torch.tensor([], dtype=torch.long), 3) is None


def test_check_labels_names_every_kind_of_bad_value_and_the_fix() -> None:
    with pytest.raises(IndexError) as info:
        check_labels(torch.tensor([[0, 255], [4, 7]]), 5)
    error = info.value
    assert isinstance(error, ValidationIndexError)
    assert (error.op, error.argument, error.valid, error.n_bad) == ("check_labels", "labels", "0..4", 2)
    assert error.examples == [((0, 1), 255), ((1, 1), 7)]
    assert error.cause_id == "nll_loss2d_target_out_of_range"
    assert "255 is the 'void' label of VOC-style segmentation masks: pass ignore_index=255 to the loss" in error.hint
    assert "the labels reach 7 with 5 classes" in error.hint
    assert str(error).startswith("check_labels: labels has 2 bad values; valid: 0..4. First bad: labels[0, 1]=255")
    assert str(error).endswith("(Found by cudaassert on the CPU, before anything ran on the GPU.)")


def test_check_labels_flags_fractional_and_nan_float_labels() -> None:
    with pytest.raises(ValidationIndexError) as info:
        check_labels(torch.tensor([0.0, 1.5, float("nan"), 2.0]), 3)
    assert info.value.n_bad == 2
    assert info.value.hint.startswith("labels must be whole class ids, not fractions, NaN or inf")


def test_check_token_ids_suggests_resizing_the_embedding() -> None:
    check_token_ids(torch.tensor([[0, 50256]]), 50257)
    with pytest.raises(ValidationIndexError) as info:
        check_token_ids([1, 2, 50257], 50257)
    error = info.value
    assert (error.op, error.argument, error.valid) == ("check_token_ids", "ids", "0..50256 (vocab_size=50257)")
    assert "model.resize_token_embeddings(len(tokenizer))" in error.hint
    assert error.cause_id == "index_select_out_of_range"


def test_preflight_of_a_shuffled_loader_reports_every_bad_dataset_index() -> None:
    loader = DataLoader(labelled_dataset(), batch_size=16, shuffle=True)
    report = preflight(loader, num_classes=10, progress=False)
    assert isinstance(report, PreflightReport)
    assert not report.ok
    assert report.n_samples == 100
    assert report.bad_samples == [3, 17, 55, 80]
    assert report.bad_labels == {3: [10], 17: [10], 55: [10], 80: [-1]}
    assert report.label_value_counts == {10: 3, -1: 1}
    summary = str(report)
    assert summary.splitlines()[:4] == [
        "preflight: scanned 100 samples of loader.dataset (TensorDataset, by dataset index).",
        "labels (valid: 0..9): 4 samples with bad values.",
        "  sample indices: 3, 17, 55, 80   (all in report.bad_labels)",
        "  bad values: 10 in 3 samples, -1 in 1 sample",
    ]
    assert "  Likely fix: the labels reach 10 with 10 classes: if you have 11 classes" in summary
    assert "if -1 marks padding or unlabelled items, pass ignore_index=-1" in summary


def test_preflight_of_an_iterable_loader_counts_samples_across_batches() -> None:
    loader = DataLoader(TokenStream(), batch_size=8)
    report = preflight(loader, num_classes=5, vocab_size=1000, ignore_index=-100, progress=False)
    assert report.n_samples == 50
    assert report.bad_labels == {}
    assert sorted(report.bad_ids) == [0, 7, 14, 21, 28, 35, 42, 49]
    summary = report.summary()
    assert "labels (valid: 0..4 or ignore_index=-100): all in range." in summary
    assert "token ids (valid: 0..999): 8 samples with bad values." in summary
    assert "resize the embedding (model.resize_token_embeddings(len(tokenizer)))" in summary


def test_preflight_lists_more_than_fifty_indices_in_the_report_and_truncates_the_summary() -> None:
    data = [(torch.zeros(1), 7 if i % 2 else 0) for i in range(200)]
    report = preflight(data, num_classes=5, progress=False)
    assert len(report.bad_labels) == 100
    assert "... (50 more)" in report.summary()


def test_preflight_of_a_clean_dataset_says_nothing_can_assert() -> None:
    report = preflight([{"label": 1}, {"label": 0}], num_classes=2, progress=False)
    assert report.ok
    assert report.summary().endswith(
        "Nothing out of range: these labels and ids cannot trigger an index device-side assert."
    )
    report.raise_if_bad()


def test_preflight_segmentation_masks_with_void_255() -> None:
    masks = torch.zeros(4, 8, 8, dtype=torch.long)
    masks[2, 0, 0] = 255
    report = preflight(TensorDataset(torch.randn(4, 3, 8, 8), masks), num_classes=21, progress=False)
    assert report.bad_labels == {2: [255]}
    assert "pass ignore_index=255" in report.summary()
    assert preflight(TensorDataset(torch.randn(4, 3, 8, 8), masks), num_classes=21, ignore_index=255, progress=False).ok


def test_raise_if_bad_names_the_samples() -> None:
    report = preflight(labelled_dataset(), num_classes=10, progress=False)
    with pytest.raises(IndexError) as info:
        report.raise_if_bad()
    error = info.value
    assert isinstance(error, ValidationIndexError)
    assert str(error).startswith(
        "preflight: 4 samples with bad labels; valid: 0..9. First: sample[3]=10, sample[17]=10, sample[55]=10, "
        "sample[80]=-1.\nLikely fix: the labels reach 10 with 10 classes"
    )


def test_keys_limit_and_custom_extractors() -> None:
    data = [{"pixels": torch.zeros(2), "cls": torch.tensor(i)} for i in range(10)]
    report = preflight(data, num_classes=5, label_key="cls", limit=7, progress=False)
    assert report.n_samples == 7
    assert sorted(report.bad_labels) == [5, 6]
    report = preflight(data, num_classes=5, label_key=lambda s: s["cls"] - 1, progress=False)
    assert sorted(report.bad_labels) == [0, 6, 7, 8, 9]  # -1, then 5..8


def test_preflight_needs_something_to_check_and_says_which_key_is_missing() -> None:
    with pytest.raises(ValueError, match=r"num_classes=\.\.\., vocab_size=\.\.\., or both"):
        preflight([1, 2], progress=False)
    with pytest.raises(KeyError, match="labels"):
        preflight([{"x": 1}], num_classes=2, progress=False)


def test_progress_is_shown_on_stderr_without_tqdm(capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # as if tqdm were not installed
    preflight(labelled_dataset(), num_classes=10)
    err = capsys.readouterr().err
    assert "preflight: 100/100 samples (100%)" in err
    assert err.endswith("s\n")
