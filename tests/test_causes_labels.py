"""Class labels, uint8 targets: Loss.cu prints `t < n_classes` at the same line as the Long text, with its own cause."""

from __future__ import annotations

import torch
from helpers.causes import ASSERT, explain_one, post_mortem
from log_samples import CENSUS

from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.logs.explain import explain_text

LINE = {e["id"]: e["line"] for e in CENSUS}


def test_the_uint8_text_of_loss_cu_names_its_own_cause() -> None:
    d = explain_one(LINE["nll_loss_target_out_of_range_uint8"])
    assert d.cause_id == "nll_loss_target_out_of_range_uint8"
    assert d.title == "class label out of range (uint8 target)"
    assert "labels.long()" in d.fix and "ignore_index" in d.fix
    assert d.assert_sites == (
        "Loss.cu:200 nll_loss_forward_reduce_cuda_kernel_1d: `t < n_classes` failed in 1 thread of 1 block",
    )


def test_the_same_line_printing_the_long_and_the_uint8_text_is_two_sites_and_two_causes() -> None:
    long_line = LINE["nll_loss_target_out_of_range"]
    uint8_line = LINE["nll_loss_target_out_of_range_uint8"]
    assert long_line.split(" block")[0] == uint8_line.split(" block")[0]  # Loss.cu:200, the same function
    ex = explain_text("\n".join([long_line, uint8_line, ASSERT]) + "\n")
    assert [s.condition for s in ex.folded] == ["t >= 0 && t < n_classes", "t < n_classes"]
    titles = [d.title for g in ex.groups for d in g.diagnoses]
    assert titles == ["class label out of range", "class label out of range (uint8 target)"]


def test_uint8_labels_in_the_namespace_get_the_label_and_the_cast_in_the_fix() -> None:
    d = post_mortem(
        LINE["nll_loss_target_out_of_range_uint8"],
        {"labels": torch.tensor([3, 255, 1], dtype=torch.uint8), "model": torch.nn.Linear(4, 10)},
    )
    assert d.specific is not None and d.specific.startswith(
        "cross_entropy got class label 255, but the model's last layer `model` has out_features=10, so labels must "
        "be 0..9."
    )
    assert "The labels are uint8 (Byte), so the kernel checked only the upper bound." in d.specific
    assert d.likely_fix is not None and d.likely_fix.endswith(hints.UINT8_LABELS)
    assert hints.VOC_VOID in d.likely_fix


def test_the_uint8_no_reduce_text_names_its_cause() -> None:
    d = explain_one(LINE["nll_loss_target_out_of_range_no_reduce_uint8"])
    assert (d.cause_id, d.title) == (
        "nll_loss_target_out_of_range_no_reduce_uint8",
        "class label out of range (uint8 target)",
    )
    assert d.fix.startswith("Cast the labels to torch.long")
