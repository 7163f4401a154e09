"""Every "Likely fix" template appears, fully rendered, for an input that calls for it.

Each row: a template from ``cudaassert_ipy.diagnose.hints`` (the one place fixes are worded), the
fields it is rendered with, and a bad call; the test asserts the rendered text is part of the fix the
user is shown (the validator's hint, preflight's, or the post-mortem's)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.distributions import Categorical

from cudaassert_ipy.checks import ValidationError, validators
from cudaassert_ipy.checks.preflight import check_labels, check_token_ids, preflight
from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.detection import classify
from cudaassert_ipy.diagnose.diagnosis import diagnose
from cudaassert_ipy.diagnose.evidence import collect

pytestmark = pytest.mark.usefixtures("validator_strategy")


def embedding_bag_bad_offsets() -> Any:
    return F.embedding_bag(torch.tensor([1, 2, 3]), torch.randn(5, 2), torch.tensor([0, 2, 1]))


class Flowers:
    classes = ("daisy", "rose", "tulip", "iris")

    def __len__(self) -> int:
        return 2

    def __getitem__(self, i: int) -> Any:
        return torch.zeros(2), [0, 3][i]


class BertTokenizer:
    def __len__(self) -> int:
        return 12


class BertConfig:
    vocab_size = 10


def preflight_fix() -> str:
    return preflight(Flowers(), num_classes=3, progress=False).labels_fix


def post_mortem_fix() -> str:
    embed = torch.nn.Embedding(10, 2)
    ids = torch.tensor([12])
    try:
        embed(ids)
    except IndexError as error:
        detection = classify(error)
    assert detection is not None
    return diagnose(collect(detection, user_ns={"embed": embed, "ids": ids, "config": BertConfig()})).likely_fix or ""


def gpu_post_mortem_fix(census_id: str, user_ns: dict[str, Any] | None = None, cell: str = "") -> str:
    """The post-mortem's fix for a device-side assert printing the census line of ``census_id`` (no GPU: its text)."""
    from gpu_double import DEVICE_ASSERT_WORDINGS, make_exception
    from log_samples import CENSUS

    from cudaassert_ipy.capture.assert_lines import scan

    line = next(e["line"] for e in CENSUS if e["id"] == census_id)
    detection = classify(make_exception(*DEVICE_ASSERT_WORDINGS["2.9+"]), assert_seen=True)
    assert detection is not None
    return diagnose(collect(detection, scan(line), cell, user_ns=user_ns or {})).likely_fix or ""


TOPK_LINE = "this line (`TensorTopK.cu:131: `writeIndex < outputSliceSize``)"


def explained_fix(text: str) -> str:
    """The likely fix a pasted report gets (python -m cudaassert_ipy explain): no host facts, only the text."""
    from cudaassert_ipy.logs.explain import explain_text

    fix = explain_text(text).groups[0].diagnoses[0].likely_fix
    assert fix is not None
    return fix


CASES: dict[str, tuple[str, dict[str, Any], Callable[[], Any]]] = {
    "pasted 255": ("LABEL_255", {}, lambda: explained_fix("IndexError: Target 255 is out of bounds.\n")),
    "pasted label too big": (
        "LABEL_TOO_BIG",
        {"value": 5, "more": 6},
        lambda: explained_fix("IndexError: Target 5 is out of bounds.\n"),
    ),
    "pasted mask pixel": (
        "LABEL_MASK_PIXELS",
        {"value": 128},
        lambda: explained_fix("IndexError: Target 128 is out of bounds.\n"),
    ),
    "pasted padding": (
        "LABEL_NEGATIVE",
        {"value": -1},
        lambda: explained_fix("IndexError: Target -1 is out of bounds.\n"),
    ),
    "pooled readout": (
        "GRAPH_POOLED",
        {},
        lambda: explained_fix(
            "IndexError: Found indices in 'edge_index' that are larger than 1 (got 30). "
            "Please ensure that all indices in 'edge_index' point to valid indices in the interval [0, 2) "
            "in your node feature matrix and try again.\n"
            "DataBatch(x=[31, 4], edge_index=[2, 60], y=[2], batch=[31], ptr=[3])\n"
        ),
    ),
    "int16 wrapped id": (
        "INT16_WRAPPED",
        {"value": -30000, "wrapped": 35536},
        lambda: explained_fix(
            "RuntimeError: index out of range: Tried to access index -30000 out of table with 40000 rows.\n"
        ),
    ),
    "multinomial sum inf": (
        "SAMPLING_SUM_INF",
        {},
        lambda: explained_fix(
            "/w/THC/THCTensorRandom.cuh:90: void sampleMultinomialOnce(long *, long, int, T *, T *) [with T = float, "
            "AccT = float]: block: [0,0,0], thread: [0,0,0] Assertion `!isinf(sum)` failed.\n"
        ),
    ),
    # shown for real by tests/test_frameworks_ultralytics_labels.py (needs Ultralytics); here its wording's fields
    "yolo class id": ("YOLO_CLASS_ID", {"more": 3, "last": 1}, lambda: hints.yolo_class_id(2, 2)),
    "voc void": ("VOC_VOID", {}, lambda: F.cross_entropy(torch.randn(1, 3, 2), torch.tensor([[0, 255]]))),
    "one more class": (
        "ONE_MORE_CLASS",
        {"top": 3, "n_classes": 3, "more": 4},
        lambda: F.cross_entropy(torch.randn(2, 3), torch.tensor([0, 3])),
    ),
    "remap labels": (
        "REMAP_LABELS",
        {"top": 9, "n_classes": 3, "more": 10, "last": 2},
        lambda: F.cross_entropy(torch.randn(2, 3), torch.tensor([0, 9])),
    ),
    "declared classes": (
        "DECLARED_CLASSES",
        {"declared_text": "the dataset lists 4 classes", "n_classes": 3, "declared": 4},
        preflight_fix,
    ),
    "nearest resize": ("NEAREST_RESIZE", {}, lambda: F.cross_entropy(torch.randn(1, 3, 2), torch.tensor([[0, 7]]))),
    "padding label": (
        "PADDING_LABEL",
        {"now": "now 255", "value": -100},
        lambda: F.nll_loss(torch.randn(2, 3), torch.tensor([-100, 0]), ignore_index=255),
    ),
    "negative labels": ("NEGATIVE_LABELS", {}, lambda: F.nll_loss(torch.randn(2, 3), torch.tensor([-7, 0]))),
    "not integer labels": ("NOT_INTEGER_LABELS", {}, lambda: check_labels([0.5], 3)),
    "bce logits": ("BCE_LOGITS", {}, lambda: F.binary_cross_entropy(torch.tensor([2.0]), torch.tensor([1.0]))),
    "bce nan input": (
        "BCE_NAN_INPUT",
        {},
        lambda: F.binary_cross_entropy(torch.tensor([float("nan")]), torch.tensor([1.0])),
    ),
    "bce mask pixels": (
        "BCE_MASK_PIXELS",
        {},
        lambda: F.binary_cross_entropy(torch.tensor([0.5]), torch.tensor([255.0])),
    ),
    "bce multiclass": ("BCE_MULTICLASS", {}, lambda: F.binary_cross_entropy(torch.tensor([0.5]), torch.tensor([3.0]))),
    "bce negative targets": (
        "BCE_NEGATIVE_TARGETS",
        {},
        lambda: F.binary_cross_entropy(torch.tensor([0.5]), torch.tensor([-1.0])),
    ),
    "bce scale targets": (
        "BCE_SCALE_TARGETS",
        {},
        lambda: F.binary_cross_entropy(torch.tensor([0.5]), torch.tensor([1.5])),
    ),
    "bce nan target": (
        "BCE_NAN_TARGET",
        {},
        lambda: F.binary_cross_entropy(torch.tensor([0.5]), torch.tensor([float("nan")])),
    ),
    "ctc blank": (
        "CTC_BLANK",
        {"blank": 0},
        lambda: F.ctc_loss(torch.randn(6, 1, 4).log_softmax(2), torch.tensor([[0, 1]]), [6], [2]),
    ),
    "ctc too big": (
        "CTC_TOO_BIG",
        {"n_classes": 4, "top": 6},
        lambda: F.ctc_loss(torch.randn(6, 1, 4).log_softmax(2), torch.tensor([[6, 1]]), [6], [2]),
    ),
    "ctc negative": (
        "CTC_NEGATIVE",
        {},
        lambda: F.ctc_loss(torch.randn(6, 1, 4).log_softmax(2), torch.tensor([[-1, 1]]), [6], [2]),
    ),
    "ctc cpu silent": (
        "CTC_CPU_SILENT",
        {},
        lambda: F.ctc_loss(torch.randn(6, 1, 4).log_softmax(2), torch.tensor([[6, 1]]), [6], [2]),
    ),
    "embedding too big": (
        "EMBEDDING_TOO_BIG",
        {"num": 10, "last": 9, "top": 12, "more": 13},
        lambda: torch.nn.Embedding(10, 2)(torch.tensor([12])),
    ),
    "tokenizer resize": (
        "TOKENIZER_RESIZE",
        {"tokenizer_size": 12, "num": 10},
        lambda: check_token_ids([11], 10, tokenizer=BertTokenizer()),
    ),
    "config vocab": ("CONFIG_VOCAB", {"vocab": 10}, post_mortem_fix),
    "embedding minus 100": ("EMBEDDING_MINUS_100", {}, lambda: F.embedding(torch.tensor([-100]), torch.randn(4, 2))),
    "embedding negative": ("EMBEDDING_NEGATIVE", {}, lambda: F.embedding(torch.tensor([-1]), torch.randn(4, 2))),
    "offsets": ("OFFSETS", {}, embedding_bag_bad_offsets),
    "index too big": (
        "INDEX_TOO_BIG",
        {"where": "dimension 0 has size 4", "top": 4, "last": 3},
        lambda: torch.zeros(4)[torch.tensor([4])],
    ),
    "index no negatives": ("INDEX_NO_NEGATIVES", {}, lambda: torch.zeros(3, 4).gather(1, torch.tensor([[-1]] * 3))),
    "index negative floor": ("INDEX_NEGATIVE_FLOOR", {"lowest": -4}, lambda: torch.zeros(4)[torch.tensor([-5])]),
    "probs nonfinite": (
        "PROBS_NONFINITE",
        {},
        lambda: Categorical(logits=torch.tensor([float("inf"), 0.0]), validate_args=False).sample(),
    ),
    "probs negative": ("PROBS_NEGATIVE", {}, lambda: torch.multinomial(torch.tensor([-1.0, 2.0]), 1)),
    "probs zero rows": ("PROBS_ZERO_ROWS", {}, lambda: torch.multinomial(torch.zeros(2, 3), 1)),
    "bernoulli range": ("BERNOULLI_RANGE", {}, lambda: torch.zeros(2).bernoulli_(torch.tensor([0.5, 2.0]))),
    "bernoulli nan": ("BERNOULLI_NAN", {}, lambda: torch.bernoulli(torch.tensor([float("nan")]))),
    "one_hot negative": ("ONE_HOT_NEGATIVE", {}, lambda: F.one_hot(torch.tensor([-1, 1]), 3)),
    "one_hot too big": (
        "ONE_HOT_TOO_BIG",
        {"num_classes": 3, "top": 5, "more": 6, "last": 2},
        lambda: F.one_hot(torch.tensor([5, 1]), 3),
    ),
    "repeats negative": ("REPEATS_NEGATIVE", {}, lambda: torch.repeat_interleave(torch.tensor([2, -1]))),
    "output size": (
        "OUTPUT_SIZE",
        {"required": 3},
        lambda: torch.repeat_interleave(torch.tensor([1, 2]), output_size=4),
    ),
    # the catalogue's post-mortem fixes, from the lines the kernels print (tests/data/assert_census.json)
    "uint8 labels": (
        "UINT8_LABELS",
        {},
        lambda: gpu_post_mortem_fix(
            "nll_loss_target_out_of_range_uint8", {"labels": torch.tensor([1, 255], dtype=torch.uint8)}
        ),
    ),
    "scatter too big": (
        "SCATTER_TOO_BIG",
        {"name": "edge_index", "top": 8, "rows_of": "x", "rows": 8, "last": 7},
        lambda: gpu_post_mortem_fix(
            "vectorized_scatter_add_index_out_of_range", {"edge_index": torch.tensor([0, 8]), "x": torch.zeros(8, 2)}
        ),
    ),
    "scatter negative": (
        "SCATTER_NEGATIVE",
        {"name": "index", "low": -1},
        lambda: gpu_post_mortem_fix("scatter_gather_index_out_of_range_v2", {"index": torch.tensor([-1, 2])}),
    ),
    "async index_put": (
        "ASYNC_INDEX_PUT",
        {},
        lambda: gpu_post_mortem_fix("assert_async_empty_message", cell="h.index_put_((i,), v, accumulate=True)"),
    ),
    "async ctc": (
        "ASYNC_CTC",
        {},
        lambda: gpu_post_mortem_fix("assert_async_empty_message", cell="F.ctc_loss(lp, t, a, b)"),
    ),
    "async own": (
        "ASYNC_OWN",
        {},
        lambda: gpu_post_mortem_fix("assert_async_empty_message", cell="torch._assert_async(m)"),
    ),
    "sparse on cpu": (
        "SPARSE_ON_CPU",
        {"call": "sparse_csr_tensor"},
        lambda: gpu_post_mortem_fix(
            "sparse_compressed_invariant_violated", cell="torch.sparse_csr_tensor(c, r, v, check_invariants=True)"
        ),
    ),
    "internal check": (
        "INTERNAL_CHECK",
        {"op": "`topk`", "name": "PyTorch", "line": TOPK_LINE, "url": "https://github.com/pytorch/pytorch/issues"},
        lambda: gpu_post_mortem_fix("topk_gather_write_overflow", cell="v, i = x.topk(5)"),
    ),
}


def shown_fix(call: Callable[[], Any]) -> str:
    """The fix the user reads: a validator's or check's "Likely fix" line, preflight's or the post-mortem's."""
    with validators():
        try:
            result = call()
        except ValidationError as error:
            assert f"\nLikely fix: {error.hint}\n" in str(error)
            return error.hint
    assert isinstance(result, str), "the call neither failed nor returned a fix"
    return result


def test_every_hint_template_has_a_case() -> None:
    templates = {name for name in dir(hints) if name.isupper() and isinstance(getattr(hints, name), str)}
    assert templates == {template for template, _, _ in CASES.values()}


@pytest.mark.parametrize("case", sorted(CASES))
def test_hint_is_rendered_in_full_for_the_input_that_calls_for_it(case: str) -> None:
    template, fields, call = CASES[case]
    expected = getattr(hints, template).format(**fields)
    assert expected in shown_fix(call)
