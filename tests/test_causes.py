"""The cause catalogue: every census site named, every entry explained, matched from its real line, documented.

The census (tests/data/assert_census.json) lists every assertion site the torch 2.14.1 release compiles in, the
texts its generated and message-less checks print, two historical texts and the third-party kernels users hit,
each with the line it prints; docs/causes.md says how it was built.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from gpu_double import CATALOGUE, assertion_lines
from log_samples import catalogue_lines

from cudaassert_ipy.capture.assert_lines import scan
from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.causes import (
    all_causes,
    catalogue_table,
    get_cause,
    match_assert,
    summary_table,
)
from cudaassert_ipy.diagnose.causes.rules import RULES, Case, Finding, RuleEntry
from cudaassert_ipy.diagnose.causes.texts import TEXTS
from cudaassert_ipy.diagnose.detection import classify
from cudaassert_ipy.diagnose.diagnosis import diagnose
from cudaassert_ipy.diagnose.evidence import Evidence, collect

ROOT = Path(__file__).resolve().parents[1]
CENSUS_FILE = ROOT / "tests" / "data" / "assert_census.json"
IDS = [e["id"] for e in CATALOGUE]
CENSUS = json.loads(CENSUS_FILE.read_text(encoding="utf-8"))  # missing data fails the whole module, never skips
INTERNAL = "own internal check failed in "
HONEST = (
    "bug, a corrupted input (a tensor whose memory was freed or overwritten) or memory corrupted by an earlier kernel"
)


def _id(condition: str, file: str = "", function: str | None = None) -> str | None:
    cause = match_assert(condition, file, function)
    return cause.id if cause is not None else None


def test_the_census_is_in_the_repository_and_whole() -> None:
    assert len(CENSUS) == 121
    assert len({e["id"] for e in CENSUS}) == 121
    assert sum(1 for e in CENSUS if e["reach"] == "internal") == 30  # 23 torch 2.14.1 sites, THC, NVSHMEM, mmcv x4
    assert {e["reach"] for e in CENSUS} == {"user", "compile", "moe", "distributed", "internal", "third_party"}


@pytest.mark.parametrize("entry", CENSUS, ids=lambda e: e["id"])
def test_every_census_line_is_read_as_one_site_and_named_by_its_cause(entry: dict[str, Any]) -> None:
    (site,) = scan(entry["line"])
    cause = match_assert(site.condition, site.file, site.function)
    assert cause is not None and cause.id == entry["cause"], (entry["line"], cause)
    if entry["reach"] == "internal":
        assert INTERNAL in cause.title and HONEST in cause.explanation


def test_every_text_the_release_prints_is_marked_with_the_release_and_older_texts_with_theirs() -> None:
    census = {e["cause"] for e in CENSUS if e["in_release"]} | {e["id"] for e in CENSUS if e["in_release"]}
    for cause in all_causes():
        if cause.family == "third_party":
            assert "2.14.1" not in cause.releases, cause.id  # not PyTorch's: the package's own releases
        elif cause.id in census:
            assert cause.releases.startswith("2.14.1"), cause.id
        else:
            assert "not in 2.14.1" in cause.releases, (cause.id, cause.releases)


def test_the_census_sites_match_the_catalogue_files() -> None:
    by_id = {c.id: c for c in all_causes()}
    for e in CENSUS:
        base = e["kernel_file"].replace("\\", "/").rsplit("/", 1)[-1]
        if base.endswith((".cu", ".cuh", ".h")):
            assert base in by_id[e["cause"]].file_names, e["id"]


def test_every_catalogue_entry_has_a_plain_explanation_and_a_concrete_fix() -> None:
    assert set(TEXTS) == set(IDS)
    for cause in all_causes():
        assert cause.title and len(cause.explanation) > 60 and len(cause.fix) > 40, cause.id
        assert cause.releases and cause.family and cause.reach, cause.id


def test_internal_invariants_get_one_honest_cause_and_never_a_data_cause() -> None:
    internal = [c for c in all_causes() if c.internal]
    assert len(internal) == 30
    for cause in internal:
        assert INTERNAL in cause.title and HONEST in cause.explanation, cause.id
        assert "compute-sanitizer" in cause.fix and "on the CPU" in cause.fix and "report it to" in cause.fix


@pytest.mark.parametrize("cause_id", IDS)
def test_each_assert_is_recognised_from_its_own_kernel_line(cause_id: str) -> None:
    sites = scan(catalogue_lines(cause_id, threads=3))
    assert len(sites) == 1 and sites[0].count == 3
    site = sites[0]
    assert _id(site.condition, site.file, site.function) == cause_id


@pytest.mark.parametrize("entry", [e for e in CATALOGUE if e.get("condition_variants")], ids=lambda e: e["id"])
def test_condition_variants_match_the_same_cause(entry: dict[str, Any]) -> None:
    for variant in entry["condition_variants"]:
        assert _id(variant, entry["kernel_file"], (entry.get("kernel_functions") or [None])[0]) == entry["id"]


def test_shared_conditions_are_told_apart_by_the_kernel_file() -> None:
    cond = "t >= 0 && t < n_classes"
    assert _id(cond, "aten/src/ATen/native/cuda/Loss.cu") == "nll_loss_target_out_of_range"
    assert _id(cond, "aten/src/ATen/native/cuda/NLLLoss2d.cu") == "nll_loss2d_target_out_of_range"
    assert _id(cond, "aten/src/THCUNN/SpatialClassNLLCriterion.cu") == "thcunn_spatial_class_nll_target_out_of_range"
    for file, cause_id in (
        ("c10/core/DynamicCast.h", "dynamic_cast_unsupported_dtype"),
        ("aten/src/ATen/native/cuda/Reduce.cuh", "reduce_unreachable"),
        ("aten/src/ATen/native/cuda/SortingRadixSelect.cuh", "radix_select_find_pattern_failed"),
        ("aten/src/THC/THCTensorTopK.cuh", "thc_topk_find_pattern_failed"),
        ("torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemory-inl.cuh", "symm_mem_unsupported"),
        ("aten/src/ATen/native/hip/Reduce.cuh", "reduce_unreachable"),
    ):
        assert _id("false", file) == cause_id


def test_a_generic_condition_from_a_file_the_catalogue_does_not_list_is_not_guessed() -> None:
    assert match_assert("false", "csrc/my_extension/kernel.cu") is None
    assert match_assert("index >= 0", "csrc/my_extension/kernel.cu") is None
    assert (
        _id("index >= 0", "aten/src/ATen/native/cuda/FractionalMaxPool3d.cu")
        == "fractional_max_pool3d_backward_bad_index"
    )
    # a long condition names its cause from any file (a renamed ROCm or XPU file, a new line number)
    assert (
        _id("t >= 0 && t < n_classes", "src/ATen/native/xpu/sycl/LossNLLKernel.cpp") == "nll_loss_target_out_of_range"
    )


def test_inductor_asserts_match_by_their_regex_whatever_the_expression_and_size() -> None:
    assert (
        _id("index out of bounds: 0 <= tmp12 < 30522", "/tmp/torchinductor_me/ab/x.py")
        == "inductor_triton_index_out_of_bounds"
    )
    assert (
        _id("index out of bounds: 0 <= tl.broadcast_to(tmp11, [XBLOCK, R0_BLOCK]) < 248320", "unknown")
        == "inductor_triton_index_out_of_bounds"
    )


def test_an_unknown_condition_matches_nothing_and_unknown_ids_get_the_generic_cause() -> None:
    assert match_assert("x < limit", "Foo.cu") is None
    assert get_cause("no_such_id").title == "a kernel assertion failed (not in the catalogue)"


def _table_block(path: Path, name: str) -> str:
    text = path.read_text(encoding="utf-8")
    m = re.search(rf"<!-- {name}:start -->\n(.*?)\n<!-- {name}:end -->", text, re.S)
    assert m, f"{path.name} lacks the {name} markers"
    return m.group(1)


def test_the_readme_summary_and_the_full_table_in_docs_are_generated_from_the_catalogue() -> None:
    regenerate = "regenerate: python -m cudaassert_ipy.diagnose.causes.tables"
    assert _table_block(ROOT / "README.md", "causes-table") == summary_table(), regenerate
    assert _table_block(ROOT / "docs" / "causes.md", "causes-table") == catalogue_table(), regenerate
    for cause in all_causes():  # every text is in the full table
        assert (
            f"`{cause.conditions[0].replace('|', chr(92) + '|').replace('`', '')}`" in catalogue_table()
            or not cause.conditions[0]
        ), cause.id


def test_ctc_loss_has_a_cause_though_no_kernel_asserts_it() -> None:
    cause = get_cause("ctc_loss_target_out_of_range")
    assert cause.title == "CTC target out of range"
    assert "blank" in cause.fix and match_assert("anything", "LossCTC.cu") is None


def _device_assert_evidence(cause_id: str, user_ns: dict[str, Any]) -> Evidence:
    from gpu_double import DEVICE_ASSERT_WORDINGS, make_exception

    detection = classify(make_exception(*DEVICE_ASSERT_WORDINGS["2.9+"]))
    assert detection is not None
    return collect(detection, scan(assertion_lines(cause_id, threads=64).decode()), user_ns=user_ns)


def _crashing_rule(case: Case) -> Finding | None:
    facts: dict[str, Finding] = {}
    return facts["no such fact"]  # a rule's own bug: KeyError


def test_a_crashing_rule_becomes_one_note_and_the_rest_of_the_report_stands() -> None:
    import torch

    ev = _device_assert_evidence(
        "nll_loss_target_out_of_range", {"labels": torch.tensor([3, 195]), "model": torch.nn.Linear(4, 195)}
    )
    broken = RuleEntry("broken", frozenset({"class_target_out_of_range"}), _crashing_rule)
    whole = diagnose(ev)
    d = diagnose(ev, rules=(broken, *RULES))
    assert d.notes[-1] == ("[internal] rule broken failed: KeyError: 'no such fact'; the rest of this report stands.")
    assert (d.title, d.fix, d.assert_sites, d.exception_line) == (
        whole.title,
        whole.fix,
        whole.assert_sites,
        whole.exception_line,
    )
    assert d.assert_sites == tuple(site.summary() for site in ev.sites)
    assert len(d.assert_sites) == 1 and d.assert_sites[0].startswith("Loss.cu:250 nll_loss_forward_reduce_cuda")
    assert d.exception_line == "AcceleratorError: CUDA error: device-side assert triggered"
    assert d.specific == whole.specific and d.likely_fix == whole.likely_fix  # the other rules still ran
    assert "the labels reach 195 with 195 classes" in (d.likely_fix or "")
    alone = diagnose(ev, rules=(broken,))
    assert alone.specific is None and alone.title == whole.title and alone.notes[-1] == d.notes[-1]


def test_a_rule_for_another_cause_is_not_run() -> None:
    ev = _device_assert_evidence("index_select_out_of_range", {})
    broken = RuleEntry("broken", frozenset({"class_target_out_of_range"}), _crashing_rule)
    assert not any("[internal]" in n for n in diagnose(ev, rules=(broken,)).notes)
    assert broken.applies("nll_loss_target_out_of_range", "class_target_out_of_range")
    assert broken.applies("class_target_out_of_range", None)
    assert not broken.applies("index_select_out_of_range", "embedding_or_index_select_out_of_range")


def test_every_rule_family_words_its_fix_through_hints() -> None:
    assert {"class_labels", "token_ids", "bce"} <= {e.name for e in RULES}
    assert len({e.name for e in RULES}) == len(RULES)  # names are what a crash note reports
    for cause_id, family in hints.FAMILIES.items():
        assert get_cause(cause_id).id == cause_id, cause_id  # every keyed id is a catalogued cause
        assert family in (hints.LabelFacts, hints.TokenFacts, hints.BceFacts)
    with pytest.raises(TypeError, match="no fix wording for take_put_out_of_range"):
        hints.fix("take_put_out_of_range", hints.LabelFacts(bad=(3,), n_classes=3))
    assert hints.fix("nll_loss_target_out_of_range", hints.LabelFacts(bad=(3,), n_classes=3)).startswith(
        "the labels reach 3 with 3 classes"
    )


def test_a_device_assert_without_label_values_still_names_the_op_and_the_model_facts() -> None:
    import torch

    class Birds:
        classes = tuple(f"species_{i}" for i in range(196))

    ev = _device_assert_evidence(
        "nll_loss_target_out_of_range", {"model": torch.nn.Linear(4, 195), "train_ds": Birds()}
    )
    d = diagnose(ev)
    assert d.headline == "GPU context dead · class label out of range in cross_entropy"
    assert ("model", "out_features=195") in d.facts and ("train_ds.classes", "196 entries") in d.facts
    assert d.specific is None and d.likely_fix is None  # no value seen: no guess at a fix


def test_a_bce_device_assert_without_readable_values_still_names_the_op() -> None:
    d = diagnose(_device_assert_evidence("bce_input_out_of_range", {}))
    assert d.headline == "GPU context dead · BCELoss input outside [0, 1] in binary_cross_entropy"
    assert d.specific is None and d.likely_fix is None


def test_a_label_with_no_known_class_count_is_still_named() -> None:
    import torch

    d = diagnose(_device_assert_evidence("nll_loss_target_out_of_range", {"labels": torch.tensor([3, 195])}))
    assert d.specific == "cross_entropy got class label 195, outside 0..C-1."


def test_an_embedding_assert_without_readable_ids_names_the_table() -> None:
    import torch

    d = diagnose(_device_assert_evidence("index_select_out_of_range", {"model": torch.nn.Embedding(10, 2)}))
    assert d.specific == "An id is out of range, but `model` has num_embeddings=10 (valid 0..9)."


def test_bce_rule_states_the_target_range_and_nan() -> None:
    import torch
    import torch.nn.functional as F

    def twin(probs: torch.Tensor, target: torch.Tensor) -> str:
        try:
            F.binary_cross_entropy(probs, target)
        except RuntimeError as error:
            detection = classify(error)
        assert detection is not None
        return diagnose(collect(detection, user_ns={})).specific or ""

    assert twin(torch.tensor([0.5, 0.5]), torch.tensor([0.0, 255.0])).startswith(
        "The target ranges from 0 to 255. Likely fix: targets look like 0..255 mask pixels"
    )
    assert twin(torch.tensor([0.5, float("nan")]), torch.tensor([0.0, 1.0])).startswith(
        "The input contains NaN. Likely fix: the input holds NaN"
    )


@pytest.mark.parametrize(
    "condition",
    [
        "!THCNumerics<T>::isinf(val)",  # THC spells the catalogue's checks with the file's own template parameter
        "!THCNumerics<T>::isnan(val)",
        "THCNumerics<AccT>::gt(sum, accZero)",
        "THCNumerics<T>::ge(val, zero)",
    ],
)
def test_the_old_thc_multinomial_checks_are_read_as_invalid_probabilities(condition: str) -> None:
    # the THC kernel and template of the catalogue's thc_multinomial_negative entry, each era's spelling of its checks
    line = (
        "/pytorch/aten/src/THC/THCTensorRandom.cuh:197: void sampleMultinomialOnce(long *, long, int, T *, T *, "
        "int, int) [with T = float, AccT = float]: block: [0,0,0], thread: [0,0,0] Assertion `"
        + condition
        + "` failed."
    )
    (site,) = scan(line)
    cause = match_assert(site.condition, site.file, site.function)
    assert cause is not None and cause.group == "multinomial_invalid_probs"
