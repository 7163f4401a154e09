"""Class labels, uint8 targets: Loss.cu prints `t < n_classes` at the same line as the Long text, with its own cause."""

from __future__ import annotations

from typing import Any

import torch
from gpu_double import DEVICE_ASSERT_WORDINGS, make_exception
from log_samples import CENSUS

from cudaassert_ipy.capture.assert_lines import scan
from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.detection import classify
from cudaassert_ipy.diagnose.diagnosis import Diagnosis, diagnose
from cudaassert_ipy.diagnose.evidence import collect
from cudaassert_ipy.logs.explain import explain_text

LINE = {e["id"]: e["line"] for e in CENSUS}
ASSERT = "torch.AcceleratorError: " + DEVICE_ASSERT_WORDINGS["2.9+"][1]


def _explain(text: str) -> Diagnosis:
    (group,) = explain_text(text + "\n" + ASSERT + "\n").groups
    (d,) = group.diagnoses
    return d


def _post_mortem(line: str, user_ns: dict[str, Any]) -> Diagnosis:
    detection = classify(make_exception(*DEVICE_ASSERT_WORDINGS["2.9+"]), assert_seen=True)
    assert detection is not None
    return diagnose(collect(detection, scan(line), user_ns=user_ns))


def test_the_uint8_text_of_loss_cu_names_its_own_cause() -> None:
    d = _explain(LINE["nll_loss_target_out_of_range_uint8"])
    assert d.cause_id == "nll_loss_target_out_of_range_uint8"
    assert d.title == "class label out of range (uint8 target)"
    assert "labels.long()" in d.fix and "ignore_index" in d.fix
    assert d.assert_sites == ("Loss.cu:200 nll_loss_forward_reduce_cuda_kernel_1d: `t < n_classes` failed in 1 thread "
                              "of 1 block",)


def test_the_same_line_printing_the_long_and_the_uint8_text_is_two_sites_and_two_causes() -> None:
    long_line = LINE["nll_loss_target_out_of_range"]
    uint8_line = LINE["nll_loss_target_out_of_range_uint8"]
    assert long_line.split(" block")[0] == uint8_line.split(" block")[0]  # Loss.cu:200, the same function
    ex = explain_text("\n".join([long_line, uint8_line, ASSERT]) + "\n")
    assert [s.condition for s in ex.folded] == ["t >= 0 && t < n_classes", "t < n_classes"]
    titles = [d.title for g in ex.groups for d in g.diagnoses]
    assert titles == ["class label out of range", "class label out of range (uint8 target)"]


def test_uint8_labels_in_the_namespace_get_the_label_and_the_cast_in_the_fix() -> None:
    d = _post_mortem(LINE["nll_loss_target_out_of_range_uint8"],
                     {"labels": torch.tensor([3, 255, 1], dtype=torch.uint8), "model": torch.nn.Linear(4, 10)})
    assert d.specific is not None and d.specific.startswith(
        "cross_entropy got class label 255, but the model's last layer `model` has out_features=10, so labels must "
        "be 0..9.")
    assert "The labels are uint8 (Byte), so the kernel checked only the upper bound." in d.specific
    assert d.likely_fix is not None and d.likely_fix.endswith(hints.UINT8_LABELS)
    assert hints.VOC_VOID in d.likely_fix


def test_the_uint8_no_reduce_text_names_its_cause() -> None:
    d = _explain(LINE["nll_loss_target_out_of_range_no_reduce_uint8"])
    assert (d.cause_id, d.title) == ("nll_loss_target_out_of_range_no_reduce_uint8",
                                     "class label out of range (uint8 target)")
    assert d.fix.startswith("Cast the labels to torch.long")
