"""The real-report corpus (tests/data/real_reports/) and how a diagnosis of it is scored.

Each report is a JSON file: the machine-printed text a person pasted (tracebacks, error and log lines, kept
verbatim), the thread's URL, the framework, the resolution in our own words, the cause family the thread
established and the words a fix must contain to be in the framework's words. ``split.json`` names the quarter
held back at random before any rule was written for the corpus: those are scored, never read while building.

A report is scored on what ``python -m cudaassert_ipy explain`` makes of its text (the first diagnosis):
- right cause: the diagnosis' cause belongs to the report's family;
- fix in the framework's words: every entry of ``fix_words`` (``a|b``: either) is in the cause, fix or likely
  fix the report gives;
- generic: no diagnosis, or one that names no cause (the no-line text, a follow-on, a sticky error alone).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "real_reports"
SPLIT = DATA / "split.json"

#: Which catalogue causes belong to which family of the corpus.
FAMILY_CAUSES: dict[str, tuple[str, ...]] = {
    "class_label": (
        "nll_loss_target_out_of_range",
        "nll_loss_target_out_of_range_no_reduce",
        "nll_loss_target_out_of_range_uint8",
        "nll_loss_target_out_of_range_no_reduce_uint8",
        "thcunn_class_nll_target_out_of_range",
        "multi_margin_target_out_of_range",
        "nll_loss2d_target_out_of_range",
        "nll_loss2d_target_out_of_range_no_reduce",
        "thcunn_spatial_class_nll_target_out_of_range",
        "one_hot_class_out_of_range",
    ),
    "token_id": (
        "index_select_out_of_range",
        "thc_index_select_out_of_range",
        "embedding_bag_index_out_of_range",
        "embedding_renorm_index_out_of_range",
        "embedding_renorm_wrap_index_out_of_range",
    ),
    "position_id": ("position_ids_out_of_range",),
    "token_type_id": ("token_type_ids_out_of_range",),
    "bce_range": (
        "bce_input_out_of_range",
        "bce_target_out_of_range",
        "thcunn_bce_input_out_of_range",
        "thcunn_bce_no_reduce_input_out_of_range",
    ),
    "detection_class": ("detection_class_out_of_range",),
    "node_index": ("graph_node_index_out_of_range", "tp_torch_scatter_thc_index_out_of_range"),
    "probs_invalid": (
        "multinomial_invalid_probs_async",
        "multinomial_sample_once_invalid_probs",
        "multinomial_renorm_negative",
        "thc_multinomial_negative",
        "multinomial_zero_sum_async",
        "multinomial_zero_mass_binary_search",
        "bernoulli_prob_out_of_range",
    ),
    "index_bounds": (
        "advanced_indexing_out_of_range_v1",
        "advanced_indexing_out_of_range_v2",
        "scatter_gather_index_out_of_range_v1",
        "scatter_gather_index_out_of_range_v2",
        "vectorized_gather_index_out_of_range",
        "vectorized_scatter_add_index_out_of_range",
        "index_add_out_of_range",
        "index_copy_out_of_range",
        "index_fill_out_of_range",
        "take_put_out_of_range",
        "thc_gather_index_out_of_range",
        "thc_scatter_index_out_of_range",
        "thc_index_copy_out_of_range",
        "thc_index_fill_out_of_range",
        "tma_scatter_add_index_out_of_range",
    ),
}
#: A family the thread established, and the families whose cause is the same failure said another way.
ALSO_RIGHT: dict[str, tuple[str, ...]] = {
    "seg_255": ("class_label",),  # the labels are out of range; the fix (ignore_index) tells the two apart
}
_KNOWN = {c for causes in FAMILY_CAUSES.values() for c in causes}


@dataclass(frozen=True)
class Report:
    id: str
    url: str
    framework: str
    text: str
    cause: str
    fix_words: tuple[str, ...]


@dataclass(frozen=True)
class Score:
    id: str
    framework: str
    cause_right: bool
    fix_right: bool
    generic: bool
    got: str  # the cause id the diagnosis named ("" when nothing was found)


def load() -> list[Report]:
    out = []
    for path in sorted(DATA.glob("*.json")):
        if path.name == SPLIT.name:
            continue
        raw = json.loads(path.read_text(encoding="utf-8"))
        out.append(
            Report(path.stem, raw["url"], raw["framework"], raw["text"], raw["cause"], tuple(raw.get("fix_words", ())))
        )
    return out


def split() -> dict[str, str]:
    """Report id -> "dev" or "held_out"."""
    raw = json.loads(SPLIT.read_text(encoding="utf-8"))
    return {**dict.fromkeys(raw["dev"], "dev"), **dict.fromkeys(raw["held_out"], "held_out")}


def family_of(cause_id: str) -> str | None:
    for family, causes in FAMILY_CAUSES.items():
        if cause_id in causes:
            return family
    return None


def score(report: Report) -> Score:
    from cudaassert_ipy.logs.explain import explain_text

    explanation = explain_text(report.text, source=report.id)
    diagnoses = [d for g in explanation.groups for d in g.diagnoses]
    if not diagnoses:
        return Score(report.id, report.framework, False, False, True, "")
    d = diagnoses[0]
    got = family_of(d.cause_id)
    right = got is not None and (got == report.cause or got in ALSO_RIGHT.get(report.cause, ()))
    said = " ".join(x for x in (d.specific or "", d.likely_fix or "", d.fix, " ".join(d.candidates[1:])) if x).lower()
    fix_right = all(any(w.strip().lower() in said for w in words.split("|")) for words in report.fix_words)
    return Score(report.id, report.framework, right, fix_right, d.cause_id not in _KNOWN, d.cause_id)
