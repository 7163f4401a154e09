"""The cause catalogue: every reference entry explained, matched from its real line, and documented."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from gpu_double import CATALOGUE, assertion_lines

from cudaassert_ipy.capture.assert_lines import scan
from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.causes import all_causes, get_cause, markdown_table, match_assert
from cudaassert_ipy.diagnose.causes.rules import RULES, Case, Finding, RuleEntry
from cudaassert_ipy.diagnose.causes.texts import TEXTS
from cudaassert_ipy.diagnose.detection import classify
from cudaassert_ipy.diagnose.diagnosis import diagnose
from cudaassert_ipy.diagnose.evidence import Evidence, collect

ROOT = Path(__file__).resolve().parents[1]
IDS = [e["id"] for e in CATALOGUE]


def test_the_packaged_catalogue_is_the_reference_catalogue():
    reference = ROOT.parent / "shared" / "reference" / "device_asserts.json"
    packaged = ROOT / "cudaassert_ipy" / "diagnose" / "causes" / "device_asserts.json"
    if reference.exists():  # beside the repository on our machines and in CI
        assert json.loads(packaged.read_text()) == json.loads(reference.read_text())
    assert len(all_causes()) == len(CATALOGUE) == 44


def test_every_catalogue_entry_has_a_plain_explanation_and_a_concrete_fix():
    assert set(TEXTS) == set(IDS)
    for cause in all_causes():
        assert cause.title and len(cause.explanation) > 60 and len(cause.fix) > 40, cause.id


@pytest.mark.parametrize("cause_id", IDS)
def test_each_assert_is_recognised_from_its_own_kernel_line(cause_id):
    sites = scan(assertion_lines(cause_id, threads=3).decode())
    assert len(sites) == 1 and sites[0].count == 3
    site = sites[0]
    assert match_assert(site.condition, site.file, site.function).id == cause_id


@pytest.mark.parametrize("entry", [e for e in CATALOGUE if e.get("condition_variants")], ids=lambda e: e["id"])
def test_condition_variants_match_the_same_cause(entry):
    for variant in entry["condition_variants"]:
        assert match_assert(variant, entry["kernel_file"]).id == entry["id"]


def test_shared_conditions_are_told_apart_by_the_kernel_file():
    cond = "t >= 0 && t < n_classes"
    assert match_assert(cond, "aten/src/ATen/native/cuda/Loss.cu").id == "nll_loss_target_out_of_range"
    assert match_assert(cond, "aten/src/ATen/native/cuda/NLLLoss2d.cu").id == "nll_loss2d_target_out_of_range"
    assert match_assert(cond, "aten/src/THCUNN/SpatialClassNLLCriterion.cu").id == \
        "thcunn_spatial_class_nll_target_out_of_range"


def test_inductor_asserts_match_by_their_regex_whatever_the_temporary_and_size():
    assert match_assert("index out of bounds: 0 <= tmp12 < 30522", "/tmp/torchinductor_me/ab/x.py").id == \
        "inductor_triton_index_out_of_bounds"


def test_an_unknown_condition_matches_nothing_and_unknown_ids_get_the_generic_cause():
    assert match_assert("x < limit", "Foo.cu") is None
    assert get_cause("no_such_id").title == "a kernel assertion failed"


def test_the_readme_known_causes_table_is_generated_from_the_catalogue():
    readme = (ROOT / "README.md").read_text()
    m = re.search(r"<!-- causes-table:start -->\n(.*?)\n<!-- causes-table:end -->", readme, re.S)
    assert m, "README.md lacks the causes-table markers"
    assert m.group(1) == markdown_table(), "regenerate: python -c 'from cudaassert_ipy.diagnose.causes import " \
        "markdown_table; print(markdown_table())'"


def test_ctc_loss_has_a_cause_though_no_kernel_asserts_it():
    cause = get_cause("ctc_loss_target_out_of_range")
    assert cause.title == "CTC target out of range"
    assert "blank" in cause.fix and match_assert("anything", "LossCTC.cu") is None


def _device_assert_evidence(cause_id: str, user_ns: dict) -> Evidence:
    from gpu_double import DEVICE_ASSERT_WORDINGS, make_exception

    detection = classify(make_exception(*DEVICE_ASSERT_WORDINGS["2.9+"]))
    assert detection is not None
    return collect(detection, scan(assertion_lines(cause_id, threads=64).decode()), user_ns=user_ns)


def _crashing_rule(case: Case) -> Finding | None:
    return {}["no such fact"]  # a rule's own bug: KeyError


def test_a_crashing_rule_becomes_one_note_and_the_rest_of_the_report_stands():
    import torch

    ev = _device_assert_evidence("nll_loss_target_out_of_range",
                                 {"labels": torch.tensor([3, 195]), "model": torch.nn.Linear(4, 195)})
    broken = RuleEntry("broken", frozenset({"class_target_out_of_range"}), _crashing_rule)
    whole = diagnose(ev)
    d = diagnose(ev, rules=(broken, *RULES))
    assert d.notes[-1] == ("[internal] rule broken failed: KeyError: 'no such fact'; the rest of this report "
                           "stands.")
    assert (d.title, d.fix, d.assert_sites, d.exception_line) == \
        (whole.title, whole.fix, whole.assert_sites, whole.exception_line)
    assert d.assert_sites == tuple(site.summary() for site in ev.sites)
    assert len(d.assert_sites) == 1 and d.assert_sites[0].startswith("Loss.cu:250 nll_loss_forward_reduce_cuda")
    assert d.exception_line == "AcceleratorError: CUDA error: device-side assert triggered"
    assert d.specific == whole.specific and d.likely_fix == whole.likely_fix  # the other rules still ran
    assert "the labels reach 195 with 195 classes" in (d.likely_fix or "")
    alone = diagnose(ev, rules=(broken,))
    assert alone.specific is None and alone.title == whole.title and alone.notes[-1] == d.notes[-1]


def test_a_rule_for_another_cause_is_not_run():
    ev = _device_assert_evidence("index_select_out_of_range", {})
    broken = RuleEntry("broken", frozenset({"class_target_out_of_range"}), _crashing_rule)
    assert not any("[internal]" in n for n in diagnose(ev, rules=(broken,)).notes)
    assert broken.applies("nll_loss_target_out_of_range", "class_target_out_of_range")
    assert broken.applies("class_target_out_of_range", None)
    assert not broken.applies("index_select_out_of_range", "embedding_or_index_select_out_of_range")


def test_every_rule_family_words_its_fix_through_hints():
    assert {"class_labels", "token_ids", "bce"} <= {e.name for e in RULES}
    assert len({e.name for e in RULES}) == len(RULES)  # names are what a crash note reports
    for cause_id, family in hints.FAMILIES.items():
        assert get_cause(cause_id).id == cause_id, cause_id  # every keyed id is a catalogued cause
        assert family in (hints.LabelFacts, hints.TokenFacts, hints.BceFacts)
    with pytest.raises(TypeError, match="no fix wording for take_put_out_of_range"):
        hints.fix("take_put_out_of_range", hints.LabelFacts(bad=(3,), n_classes=3))
    assert hints.fix("nll_loss_target_out_of_range", hints.LabelFacts(bad=(3,), n_classes=3)).startswith(
        "the labels reach 3 with 3 classes")


def test_a_device_assert_without_label_values_still_names_the_op_and_the_model_facts():
    import torch

    class Birds:
        classes = tuple(f"species_{i}" for i in range(196))

    ev = _device_assert_evidence("nll_loss_target_out_of_range",
                                 {"model": torch.nn.Linear(4, 195), "train_ds": Birds()})
    d = diagnose(ev)
    assert d.headline == "GPU context dead · class label out of range in cross_entropy"
    assert ("model", "out_features=195") in d.facts and ("train_ds.classes", "196 entries") in d.facts
    assert d.specific is None and d.likely_fix is None  # no value seen: no guess at a fix


def test_a_bce_device_assert_without_readable_values_still_names_the_op():
    d = diagnose(_device_assert_evidence("bce_input_out_of_range", {}))
    assert d.headline == "GPU context dead · BCELoss input outside [0, 1] in binary_cross_entropy"
    assert d.specific is None and d.likely_fix is None


def test_a_label_with_no_known_class_count_is_still_named():
    import torch

    d = diagnose(_device_assert_evidence("nll_loss_target_out_of_range", {"labels": torch.tensor([3, 195])}))
    assert d.specific == "cross_entropy got class label 195, outside 0..C-1."


def test_an_embedding_assert_without_readable_ids_names_the_table():
    import torch

    d = diagnose(_device_assert_evidence("index_select_out_of_range", {"model": torch.nn.Embedding(10, 2)}))
    assert d.specific == "An id is out of range, but `model` has num_embeddings=10 (valid 0..9)."


def test_bce_rule_states_the_target_range_and_nan():
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
        "The target ranges from 0 to 255. Likely fix: targets look like 0..255 mask pixels")
    assert twin(torch.tensor([0.5, float("nan")]), torch.tensor([0.0, 1.0])).startswith(
        "The input contains NaN. Likely fix: the input holds NaN")


@pytest.mark.parametrize("condition", [
    "!THCNumerics<T>::isinf(val)",  # THC spells the catalogue's checks with the file's own template parameter
    "!THCNumerics<T>::isnan(val)",
    "THCNumerics<AccT>::gt(sum, accZero)",
    "THCNumerics<T>::ge(val, zero)",
])
def test_the_old_thc_multinomial_checks_are_read_as_invalid_probabilities(condition):
    # the THC kernel and template of the catalogue's thc_multinomial_negative entry, each era's spelling of its checks
    line = ("/pytorch/aten/src/THC/THCTensorRandom.cuh:197: void sampleMultinomialOnce(long *, long, int, T *, T *, "
            "int, int) [with T = float, AccT = float]: block: [0,0,0], thread: [0,0,0] Assertion `" + condition
            + "` failed.")
    (site,) = scan(line)
    cause = match_assert(site.condition, site.file, site.function)
    assert cause is not None and cause.group == "multinomial_invalid_probs"
