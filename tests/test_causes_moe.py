"""MoE grouped GEMM: the 12 offset checks of torch._grouped_mm / torch._scaled_grouped_mm, from their own lines."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.causes import explain_one
from log_samples import CENSUS

MOE = [e for e in CENSUS if e["reach"] == "moe"]
TITLES = {
    "grouped_mm_negative_group_size": "grouped_mm offsets decrease (a negative group size)",
    "grouped_mm_input_group_alignment": "grouped_mm group size not a multiple of 16 bytes",
    "grouped_mm_output_group_alignment": "grouped_mm group size not a multiple of 16 bytes",
    "grouped_mm_offset_exceeds_A_rows": "grouped_mm offset beyond the rows of the input",
    "grouped_mm_offset_exceeds_B_cols": "grouped_mm offset beyond the columns of the second operand",
    "grouped_mm_offset_exceeds_K": "grouped_mm offset beyond the shared dimension K",
    "mslk_grouped_gemm_missing_offsets": "scaled grouped GEMM called without offsets",
    "mslk_grouped_gemm_k_group_multiple": "scaled grouped GEMM group size not a multiple of the scale block",
    "mslk_grouped_gemm_k_offset": "scaled grouped GEMM group end beyond K",
    "mslk_grouped_gemm_k_sum": "scaled grouped GEMM groups larger than the operand",
    "mslk_grouped_gemm_scale_size": "scaled grouped GEMM scale tensor too small for the groups",
    "mslk_grouped_gemm_m_offset": "scaled grouped GEMM group end beyond M",
}


def test_the_census_holds_the_twelve_offset_checks() -> None:
    assert {e["id"] for e in MOE} == set(TITLES)


@pytest.mark.parametrize("entry", MOE, ids=lambda e: e["id"])
def test_each_offset_check_names_its_cause_title_and_fix(entry: dict[str, Any]) -> None:
    d = explain_one(entry["line"])
    assert d.cause_id == entry["id"] and d.title == TITLES[entry["id"]]
    if entry["id"].startswith("grouped_mm"):
        assert d.fix.startswith("Build offs as the running end of each group")
    else:
        assert "scale block: 32 for MXFP8, 16 for NVFP4" in d.fix


def test_the_literal_backslash_n_inside_the_condition_is_kept_and_matched() -> None:
    entry = next(e for e in MOE if e["id"] == "grouped_mm_negative_group_size")
    assert entry["condition"].endswith('or equal 0\\n"')
    assert explain_one(entry["line"]).assert_sites[0].endswith('or equal 0\\n"` failed in 1 thread of 1 block')
