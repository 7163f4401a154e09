"""The two ways the cause tests reach a diagnosis: a pasted log read by the explainer, and an assertion line
read after a real exception of the current wording (the GPU double), as the notebook's post-mortem reads it."""

from __future__ import annotations

from typing import Any

from gpu_double import DEVICE_ASSERT_WORDINGS, make_exception

from cudaassert_ipy.capture.assert_lines import scan
from cudaassert_ipy.diagnose.detection import classify
from cudaassert_ipy.diagnose.diagnosis import Diagnosis, diagnose
from cudaassert_ipy.diagnose.evidence import collect
from cudaassert_ipy.logs.explain import explain_text

__all__ = ["ASSERT", "explain_one", "post_mortem"]

#: the error line torch >= 2.9 prints after a device-side assert
ASSERT = "torch.AcceleratorError: " + DEVICE_ASSERT_WORDINGS["2.9+"][1]


def explain_one(text: str, error: str = ASSERT) -> Diagnosis:
    """The one diagnosis ``explain`` gives for ``text`` (assertion lines) followed by ``error``."""
    (group,) = explain_text(text + "\n" + error + "\n").groups
    (d,) = group.diagnoses
    return d


def post_mortem(line: str, user_ns: dict[str, Any] | None = None, cell: str = "") -> Diagnosis:
    """The diagnosis of a cell whose device assert printed ``line``, with ``user_ns`` as its globals."""
    detection = classify(make_exception(*DEVICE_ASSERT_WORDINGS["2.9+"]), assert_seen=True)
    assert detection is not None
    return diagnose(collect(detection, scan(line), cell, user_ns=user_ns or {}))
