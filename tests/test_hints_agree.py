"""One bug, one fix sentence: the post-mortem, the validators and preflight word the same fix the same way.

Each case feeds one bad input through every path that can see it: the post-mortem of the CPU error
(the CPU twin), the post-mortem of the GPU failure (the GPU double's real assertion lines), the
validator's error and its diagnosis, and preflight / check_labels / check_token_ids.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from gpu_double import DEVICE_ASSERT_WORDINGS, assertion_lines, make_exception
from torch.utils.data import Dataset

from cudaassert_ipy.capture.assert_lines import scan
from cudaassert_ipy.checks import ValidationError, validators
from cudaassert_ipy.checks.preflight import check_labels, check_token_ids, preflight
from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.detection import classify
from cudaassert_ipy.diagnose.diagnosis import Diagnosis, diagnose
from cudaassert_ipy.diagnose.evidence import collect


def _raised(call: Callable[[], Any]) -> BaseException:
    try:
        call()
    except Exception as error:  # the error under test
        return error
    raise AssertionError("the call did not fail")


def post_mortem(error: BaseException, user_ns: Mapping[str, Any], stderr: str = "") -> Diagnosis:
    detection = classify(error)
    assert detection is not None
    return diagnose(collect(detection, scan(stderr), user_ns=user_ns))


def cpu_twin(call: Callable[[], Any], user_ns: Mapping[str, Any]) -> Diagnosis:
    return post_mortem(_raised(call), user_ns)


def gpu_double(cause_id: str, user_ns: Mapping[str, Any]) -> Diagnosis:
    """The GPU failure as the extension sees it: a device-side assert, its kernel lines, the namespace."""
    return post_mortem(
        make_exception(*DEVICE_ASSERT_WORDINGS["2.9+"]), user_ns, assertion_lines(cause_id, threads=4).decode()
    )


def validator_error(call: Callable[[], Any]) -> ValidationError:
    with validators():
        error = _raised(call)
    assert isinstance(error, ValidationError)
    return error


class Birds(Dataset):
    """A torchvision-style dataset: ``classes`` lists 196 species, labels go up to 195."""

    classes: ClassVar[list[str]] = [f"species_{i}" for i in range(196)]

    def __init__(self, labels: torch.Tensor) -> None:
        self.labels = labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.zeros(8), self.labels[i]


class GPT2TokenizerFast:  # the shape of a Hugging Face tokenizer: len() is the vocabulary size
    def __len__(self) -> int:
        return 50260


def test_label_195_with_195_outputs_and_196_dataset_classes_gets_one_fix_on_every_path() -> None:
    labels = torch.tensor([3, 195, 7, 195])
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 195))
    train_ds = Birds(labels)
    ns = {"model": model, "train_ds": train_ds, "labels": labels}

    def call() -> Any:
        return F.cross_entropy(model(torch.randn(4, 8)), labels)

    expected = "the dataset lists 196 classes but the model outputs 195: set out_features=196"
    twin = cpu_twin(call, ns)
    gpu = gpu_double("nll_loss_target_out_of_range", ns)
    error = validator_error(call)
    checked = post_mortem(error, ns)
    report = preflight(train_ds, num_classes=195, progress=False)
    assert (twin.kind, gpu.kind, checked.kind) == ("cpu_twin", "device_assert", "validator")
    assert twin.likely_fix == gpu.likely_fix == checked.likely_fix == report.labels_fix == expected
    assert f"Likely fix: {expected}." in (twin.specific or "")
    assert f"  Likely fix: {expected}" in report.summary()


def test_label_195_with_195_outputs_and_no_dataset_gets_one_fix_on_every_path() -> None:
    labels = torch.tensor([3, 195, 7, 195])
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 195))
    ns = {"model": model, "labels": labels}

    def call() -> Any:
        return F.cross_entropy(model(torch.randn(4, 8)), labels)

    expected = (
        "the labels reach 195 with 195 classes: if you have 196 classes, make the last layer output 196 "
        "logits (out_features=196); if labels start at 1, subtract 1"
    )
    error = validator_error(call)
    checked_labels = _raised(lambda: check_labels(labels, 195))
    assert isinstance(checked_labels, ValidationError)
    report = preflight(list(zip(torch.zeros(4, 8), labels)), num_classes=195, progress=False)
    assert cpu_twin(call, ns).likely_fix == gpu_double("nll_loss_target_out_of_range", ns).likely_fix == expected
    assert error.hint == post_mortem(error, ns).likely_fix == checked_labels.hint == report.labels_fix == expected
    assert f"\nLikely fix: {expected}\n" in str(error)


def test_void_label_255_in_masks_gets_one_fix_on_every_path() -> None:
    masks = torch.zeros(2, 4, 4, dtype=torch.long)
    masks[1, 2, 3] = 255
    logits = torch.randn(2, 21, 4, 4)
    ns = {"masks": masks, "logits": logits}

    def call() -> Any:
        return F.cross_entropy(logits, masks)

    expected = "255 is the 'void' label of VOC-style segmentation masks: pass ignore_index=255 to the loss"
    error = validator_error(call)
    checked_labels = _raised(lambda: check_labels(masks, 21))
    assert isinstance(checked_labels, ValidationError)
    report = preflight(list(zip(torch.zeros(2, 3, 4, 4), masks)), num_classes=21, progress=False)
    assert cpu_twin(call, ns).likely_fix == expected
    assert error.hint == post_mortem(error, ns).likely_fix == checked_labels.hint == report.labels_fix == expected


def test_token_id_50257_with_50257_rows_and_a_50260_token_tokenizer_gets_one_fix_on_every_path() -> None:
    ids = torch.tensor([[464, 50257, 318]])
    embed = nn.Embedding(50257, 4)
    tokenizer = GPT2TokenizerFast()
    ns = {"model": embed, "tokenizer": tokenizer, "input_ids": ids}
    expected = (
        "the tokenizer has 50260 tokens but the embedding only 50257 rows: call "
        "model.resize_token_embeddings(len(tokenizer))"
    )
    twin = cpu_twin(lambda: embed(ids), ns)
    gpu = gpu_double("index_select_out_of_range", ns)
    error = validator_error(lambda: embed(ids))
    checked_ids = _raised(lambda: check_token_ids(ids, 50257, tokenizer=tokenizer))
    assert isinstance(checked_ids, ValidationError)
    report = preflight([{"input_ids": ids[0]}], vocab_size=50257, tokenizer=tokenizer, progress=False)
    assert twin.likely_fix == gpu.likely_fix == post_mortem(error, ns).likely_fix == expected
    assert checked_ids.hint == report.ids_fix == expected
    assert "Token ids reach 50257, but `model` has num_embeddings=50257 (valid 0..50256)." in (twin.specific or "")


def test_token_ids_without_a_tokenizer_get_the_same_fix_from_the_validator_and_preflight() -> None:
    ids = torch.tensor([[464, 50257, 318]])
    embed = nn.Embedding(50257, 4)
    error = validator_error(lambda: embed(ids))
    checked_ids = _raised(lambda: check_token_ids(ids, 50257))
    assert isinstance(checked_ids, ValidationError)
    report = preflight([{"input_ids": ids[0]}], vocab_size=50257, progress=False)
    expected = hints.EMBEDDING_TOO_BIG.format(num=50257, last=50256, top=50257, more=50258)
    assert error.hint == checked_ids.hint == report.ids_fix == expected
    assert cpu_twin(lambda: embed(ids), {"model": embed, "input_ids": ids}).likely_fix == expected


def test_bce_on_logits_gets_one_fix_from_the_post_mortem_and_the_validator() -> None:
    logits = torch.tensor([-2.5, 0.3, 4.0])
    target = torch.tensor([0.0, 1.0, 1.0])
    ns = {"logits": logits, "target": target}

    def call() -> Any:
        return F.binary_cross_entropy(logits, target)

    error = validator_error(call)
    assert cpu_twin(call, ns).likely_fix == error.hint == post_mortem(error, ns).likely_fix == hints.BCE_LOGITS


def test_bce_mask_pixel_targets_get_one_fix_from_the_post_mortem_and_the_validator() -> None:
    probs = torch.tensor([0.2, 0.5, 0.9])
    masks = torch.tensor([0.0, 255.0, 255.0])

    def call() -> Any:
        return F.binary_cross_entropy(probs, masks)

    error = validator_error(call)
    expected = f"{hints.BCE_MASK_PIXELS}; {hints.BCE_MULTICLASS}"
    assert cpu_twin(call, {"probs": probs, "masks": masks}).likely_fix == error.hint == expected


@pytest.mark.parametrize(
    "labels, fix",
    [
        (
            [0, -1],
            "negative labels are only allowed as the loss's ignore_index (now -100): if -1 marks padding or "
            "unlabelled items, pass ignore_index=-1",
        ),
        ([0, -7], "class labels cannot be negative: find where they become negative"),
        (
            [0, 9],
            "the labels reach 9 with 3 classes: remap the labels to 0..2 (for example torch.unique(labels, "
            "return_inverse=True)) or make the last layer output 10 logits (out_features=10)",
        ),
    ],
)
def test_other_bad_labels_get_one_fix_from_the_post_mortem_and_the_validator(labels: list, fix: str) -> None:
    target = torch.tensor(labels)
    logits = torch.randn(2, 3)

    def call() -> Any:
        return F.cross_entropy(logits, target)

    error = validator_error(call)
    assert cpu_twin(call, {"target": target, "logits": logits}).likely_fix == error.hint == fix
