"""torch.compile's checks: the index expression, one-sided and symbolic bounds, `unknown:0`, NaN, bare messages."""

from __future__ import annotations

from typing import Any

import torch
from helpers.causes import explain_one
from log_samples import CENSUS

from cudaassert_ipy.capture.assert_lines import scan
from cudaassert_ipy.diagnose.causes.rule_triton import inductor_bounds
from cudaassert_ipy.diagnose.detection import classify_text
from cudaassert_ipy.diagnose.diagnosis import Diagnosis, diagnose
from cudaassert_ipy.diagnose.evidence import Evidence, LabelValues, ModuleFact

LINE = {e["id"]: e["line"] for e in CENSUS}
TRITON = ("RuntimeError", "Triton Error [CUDA]: device-side assert triggered")
NO_DEBUG = "unknown:0: unknown: block: [0,0,0], thread: [85,0,0] Assertion `{cond}` failed."


def _diagnose(line: str, **facts: Any) -> Diagnosis:
    detection = classify_text(*TRITON, assert_seen=True)
    assert detection is not None
    return diagnose(Evidence(detection=detection, sites=tuple(scan(line)), **facts))


def test_the_bounds_message_is_read_with_an_expression_as_index_and_either_bound_missing() -> None:
    assert inductor_bounds("index out of bounds: 0 <= tl.broadcast_to(tmp11, [XBLOCK, R0_BLOCK]) < 248320") == (
        "0",
        "tl.broadcast_to(tmp11, [XBLOCK, R0_BLOCK])",
        "248320",
    )
    assert inductor_bounds("index out of bounds: 0 <= tmp5") == ("0", "tmp5", None)
    assert inductor_bounds("index out of bounds: tmp5 < 50257") == (None, "tmp5", "50257")
    assert inductor_bounds("index out of bounds: 0 <= tmp5 < 1 + ks0") == ("0", "tmp5", "1 + ks0")
    assert inductor_bounds("NaN or Inf found") is None


def test_a_users_broadcast_expression_at_unknown_0_names_the_vocabulary() -> None:
    line = LINE["inductor_triton_index_out_of_bounds"]
    assert line.startswith("unknown:0: unknown:") and "tl.broadcast_to(tmp11" in line
    cfg = ModuleFact("model.config", "Qwen3Config", (("vocab_size", 248320),))
    d = _diagnose(line, configs=(cfg,))
    assert d.cause_id == "inductor_triton_index_out_of_bounds"
    assert d.title == "index out of bounds in a torch.compile kernel"
    assert d.specific == (
        "The compiled kernel checked an index against 248320, and `model.config.vocab_size` is "
        "248320: a token id is >= the vocabulary size (or negative)."
    )
    assert d.assert_sites == (
        "Triton kernel (no source location): `index out of bounds: 0 <= tl.broadcast_to(tmp11, "
        "[XBLOCK, R0_BLOCK]) < 248320` failed in 1 thread of 1 block",
    )


def test_an_upper_only_check_names_its_size() -> None:
    wte = ModuleFact("model.wte", "Embedding", (("num_embeddings", 50257),))
    d = _diagnose(NO_DEBUG.format(cond="index out of bounds: tmp5 < 50257"), embeddings=(wte,))
    assert d.cause_id == "inductor_triton_index_upper_only"
    assert d.title == "index out of bounds in a torch.compile kernel"
    assert d.specific is not None and d.specific.startswith(
        "The compiled kernel checked an index against 50257, and `model.wte` has num_embeddings=50257"
    )


def test_a_lower_only_check_is_a_negative_index_and_names_the_tensor_holding_one() -> None:
    ids = torch.tensor([[101, -100, 7]])
    d = _diagnose(
        NO_DEBUG.format(cond="index out of bounds: 0 <= tmp5"),
        labels=(LabelValues("input_ids", (1, 3), -100, 101, ids),),
    )
    assert (d.cause_id, d.title) == ("inductor_triton_index_lower_only", "negative index in a torch.compile kernel")
    assert d.specific == "The compiled kernel found a negative index (tmp5); `input_ids` holds -100."
    assert "-1/-100 markers" in d.fix


def test_a_symbolic_bound_is_called_a_dynamic_size() -> None:
    d = _diagnose(NO_DEBUG.format(cond="index out of bounds: 0 <= tmp5 < 1 + ks0"))
    assert d.cause_id == "inductor_triton_index_out_of_bounds"
    assert d.specific is not None and d.specific.startswith(
        "The compiled kernel checked an index against a dynamic size (1 + ks0)"
    )


def test_the_nan_check_and_a_compiled_checks_bare_message_are_named() -> None:
    d = explain_one(LINE["inductor_triton_nan_assert"])
    assert (d.cause_id, d.title) == ("inductor_triton_nan_assert", "NaN or inf inside a torch.compile kernel")
    assert "TORCHINDUCTOR_RUNTIME_TRITON_NAN_ASSERTS=1" in d.explanation
    d = explain_one(NO_DEBUG.format(cond="mask must be boolean and non-empty"))
    assert (d.cause_id, d.title) == ("inductor_triton_assert_async_msg", "a tensor check failed inside a Triton kernel")
    assert d.fix.startswith("Read the message")
    # a catalogued message from a compiled graph names its own, more specific cause
    assert explain_one(LINE["inductor_triton_assert_async_msg"]).cause_id == "multinomial_zero_sum_async"


def test_an_unknown_message_from_a_users_own_triton_file_is_not_in_the_catalogue() -> None:
    d = explain_one(
        "/home/me/kernels.py:42: my_kernel: block: [0,0,0], thread: [0,0,0] Assertion `x must be < 5` failed."
    )
    assert d.cause_id == "unknown_kernel_assert" and d.specific is not None
    assert d.specific.startswith(
        "Not in the catalogue. The kernel reported: `x must be < 5` failed in home/me/kernels.py."
    )
