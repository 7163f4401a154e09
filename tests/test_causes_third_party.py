"""Third-party kernels: torch_scatter's unsorted index, mmcv's assign_score_withk, vLLM's printf-then-trap lines."""

from __future__ import annotations

from typing import Any

import pytest
from gpu_double import STICKY_WORDINGS
from helpers.causes import explain_one
from log_samples import CENSUS

from cudaassert_ipy.capture.assert_lines import scan
from cudaassert_ipy.logs.explain import explain_text

LINE = {e["id"]: e["line"] for e in CENSUS}
LAUNCH_FAILURE = "RuntimeError: CUDA error: unspecified launch failure"
FLASHMLA = [e for e in CENSUS if e["id"].startswith("tp_vllm_flashmla")]


def test_torch_scatters_unsorted_index_is_named_from_a_users_full_signature_line() -> None:
    line = LINE["tp_torch_scatter_segment_coo_broadcast_unsorted"]
    assert "void segment_coo_broadcast_kernel(const scalar_t *" in line  # __PRETTY_FUNCTION__
    d = explain_one(line)
    assert (d.cause_id, d.title) == (
        "tp_torch_scatter_segment_coo_broadcast_unsorted",
        "index not sorted in torch_scatter's segment_coo",
    )
    assert "index.sort()" in d.fix and "scatter_reduce" in d.fix
    assert d.assert_sites[0].startswith("segment_coo_cuda.cu:111 segment_coo_broadcast_kernel: `idx1 <= idx2`")


def test_mmcvs_reachable_check_names_the_knn_index_and_its_loop_bounds_are_internal_to_mmcv() -> None:
    d = explain_one(LINE["tp_mmcv_assign_score_withk_cn"])
    assert d.title == "kNN center index out of range in mmcv's assign_score_withk"
    assert "knn_idx.max() < points.size(1)" in d.fix
    d = explain_one(LINE["tp_mmcv_assign_score_withk_b"])
    assert d.title == "mmcv's own internal check failed in assign_score_withk"
    assert "report it to mmcv (https://github.com/open-mmlab/mmcv/issues)" in d.fix


@pytest.mark.parametrize("entry", FLASHMLA, ids=lambda e: e["id"])
def test_flashmlas_printf_trap_is_a_site_and_the_launch_failure_its_follow_on(entry: dict[str, Any]) -> None:
    (site,) = scan(entry["line"])
    assert (site.condition, site.function, site.first.printf) == (entry["condition"], None, True)
    d = explain_one(entry["line"], LAUNCH_FAILURE)
    assert (d.cause_id, d.title) == (entry["id"], "vLLM FlashMLA scheduling check failed")
    assert "'unspecified launch failure', not 'device-side assert triggered'" in d.explanation
    assert d.notes[0].startswith("`RuntimeError: CUDA error: unspecified launch failure` is a follow-on error")


def test_vllms_top_k_nan_trap_names_its_cause_under_a_launcher_prefix() -> None:
    d = explain_one("(EngineCore pid=339) " + LINE["tp_vllm_deepselect_nan"], "(EngineCore pid=339) " + LAUNCH_FAILURE)
    assert (d.cause_id, d.title) == ("tp_vllm_deepselect_nan", "NaN in the scores of vLLM's top-k selection")
    assert d.assert_sites[0].startswith("a kernel's message before a trap (no source location): `[topk_select] NaN")


def test_a_launch_failure_without_any_trap_line_stays_a_crash() -> None:
    (group,) = explain_text("RuntimeError: " + STICKY_WORDINGS["illegal address 2.4"][1] + "\n").groups
    assert group.diagnoses[0].title == "illegal memory access on the GPU"
