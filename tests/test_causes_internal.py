"""PyTorch's internal invariants: one honest cause (a bug, a corrupted input or memory), what to try, no data cause."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.causes import explain_one, post_mortem
from log_samples import CENSUS

from cudaassert_ipy.diagnose import hints

TORCH_INTERNAL = [e for e in CENSUS if e["reach"] == "internal" and not e["id"].startswith("tp_")]
LIKELY = (
    "Likely a PyTorch bug, a corrupted input (a tensor whose memory was freed or overwritten) or memory "
    "corrupted by an earlier kernel."
)


def test_the_census_holds_the_23_new_release_invariants_and_the_others_judged_internal() -> None:
    judged = {"dynamic_cast_unsupported_dtype", "nvshmem_allToAllV_324", "thc_topk_find_pattern_failed"}
    assert len([e for e in TORCH_INTERNAL if e["id"] not in judged]) == 23
    assert judged <= {e["id"] for e in TORCH_INTERNAL}


@pytest.mark.parametrize("entry", TORCH_INTERNAL, ids=lambda e: e["id"])
def test_each_internal_check_gets_the_honest_cause_and_what_to_try(entry: dict[str, Any]) -> None:
    d = explain_one(entry["line"])
    assert d.cause_id == entry["id"]
    assert d.title.startswith("PyTorch's own internal check failed in ")
    assert d.explanation.startswith(LIKELY) and "never fails on valid input" in d.explanation
    assert d.fix == (
        "Run the same op on the CPU with the same inputs (a real bug or a bad input raises a readable "
        "error there); run the script under NVIDIA's compute-sanitizer (compute-sanitizer --tool memcheck "
        "python script.py) to find an earlier kernel that writes out of bounds; if it still fails, report "
        "it to PyTorch (https://github.com/pytorch/pytorch/issues) with the assertion line, the torch "
        "version and the GPU model."
    )
    assert d.specific is None  # no made-up data cause


def test_the_op_the_cell_calls_is_named_in_the_rerun_and_the_line_to_report() -> None:
    line = next(e["line"] for e in TORCH_INTERNAL if e["id"] == "topk_gather_write_overflow")
    d = post_mortem(line, cell="values, idx = logits.topk(50, dim=-1)")
    assert d.title == "PyTorch's own internal check failed in topk"
    assert d.specific is not None
    assert d.specific.startswith("The cell calls `topk`, whose CUDA kernel holds this check.")
    assert d.likely_fix == hints.internal_check(
        hints.INTERNAL_WHO["PyTorch"], "TensorTopK.cu:131: `writeIndex < outputSliceSize`", "topk"
    )
    assert "run `topk` on the CPU" in d.likely_fix


def test_the_generic_false_of_a_reduction_is_internal_but_the_same_words_from_a_users_kernel_are_not_guessed() -> None:
    line = next(e["line"] for e in TORCH_INTERNAL if e["id"] == "reduce_unreachable")
    assert explain_one(line).title == "PyTorch's own internal check failed in a reduction (sum, mean, max, norm, ...)"
    d = explain_one("/src/my_ext/kernel.cu:40: my_kernel: block: [0,0,0], thread: [0,0,0] Assertion `false` failed.")
    assert d.cause_id == "unknown_kernel_assert" and d.title == "a kernel assertion failed (not in the catalogue)"
