"""Distributed: NCCL's NaN check (TORCH_NCCL_NAN_CHECK=1), symmetric memory and NVSHMEM all-to-all."""

from __future__ import annotations

from typing import Any

import pytest
from gpu_double import DEVICE_ASSERT_WORDINGS
from helpers.causes import explain_one
from log_samples import CENSUS

ASSERT = "[rank1]: torch.AcceleratorError: " + DEVICE_ASSERT_WORDINGS["2.9+"][1].splitlines()[0]
DISTRIBUTED = [e for e in CENSUS if e["reach"] == "distributed" or e["id"] == "nvshmem_allToAllV_324"]
NAN_CHECK = [e for e in DISTRIBUTED if e["id"].startswith("c10d_nan_check")]


def test_the_census_holds_the_nan_checks_of_every_release_and_the_symmetric_memory_checks() -> None:
    assert len(NAN_CHECK) == 7 and len(DISTRIBUTED) == 20


@pytest.mark.parametrize("entry", NAN_CHECK, ids=lambda e: e["id"])
def test_every_form_of_the_nan_check_names_nan_in_a_collective(entry: dict[str, Any]) -> None:
    d = explain_one(entry["line"], ASSERT)
    assert d.cause_id == entry["id"]
    assert d.title == "NaN in a tensor sent through NCCL (TORCH_NCCL_NAN_CHECK=1)"
    assert "stops the process on purpose" in d.explanation
    assert d.fix.startswith("Find where the NaN starts on this rank")


def test_the_first_nan_check_is_marked_with_its_release() -> None:
    d = explain_one(next(e["line"] for e in NAN_CHECK if e["id"] == "c10d_nan_check_v1"), ASSERT)
    assert d.assert_sites[0].startswith("Utils.cu:15 checkForNaN: `!isnan(val)`")


@pytest.mark.parametrize("entry", [e for e in DISTRIBUTED if e not in NAN_CHECK], ids=lambda e: e["id"])
def test_each_symmetric_memory_and_nvshmem_check_names_its_cause(entry: dict[str, Any]) -> None:
    d = explain_one(entry["line"], ASSERT)
    assert d.cause_id == entry["id"]
    if entry["id"] == "nvshmem_allToAllV_324":  # a launch invariant: internal, never a data cause
        assert d.title == "PyTorch's own internal check failed in NVSHMEM all_to_all_vdev"
    elif entry["id"].startswith("nvshmem"):
        assert "NVSHMEM" in d.title or "all_to_all_vdev" in d.title
        assert "split" in d.fix or "symmetric memory" in d.fix or "experts" in d.fix or "group" in d.fix
    elif entry["id"].startswith("nccl_all_to_all"):
        assert (d.title, d.fix.split(":")[0]) == (
            "all-to-all split not 16-byte aligned",
            "Make every split a multiple of 16 bytes",
        )
    else:
        assert d.title == "symmetric-memory op not supported on this GPU or dtype"
