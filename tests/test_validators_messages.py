"""Every "Likely fix" template appears, fully rendered, for an input that calls for it.

Each row: a template from ``cudaassert_ipy.checks.errors``, the fields it is rendered with, and
a bad call; the test asserts the rendered text is part of the error's hint."""

from __future__ import annotations

from typing import Any, Callable, Dict

import pytest
import torch
import torch.nn.functional as F
from torch.distributions import Categorical

from cudaassert_ipy.checks import ValidationError, errors, validators
from cudaassert_ipy.data.preflight import check_labels

pytestmark = pytest.mark.usefixtures("validator_strategy")


def embedding_bag_bad_offsets() -> Any:
    return F.embedding_bag(torch.tensor([1, 2, 3]), torch.randn(5, 2), torch.tensor([0, 2, 1]))


CASES: Dict[str, tuple[str, Dict[str, Any], Callable[[], Any]]] = {
    "voc void": ("HINT_VOC_VOID", {}, lambda: F.cross_entropy(torch.randn(1, 3, 2), torch.tensor([[0, 255]]))),
    "one more class": (
        "HINT_ONE_MORE_CLASS",
        {"classes": "the input has 3 classes (input.shape[1] == 3)", "reaches": "the target reaches", "top": 3,
         "more": 4},
        lambda: F.cross_entropy(torch.randn(2, 3), torch.tensor([0, 3])),
    ),
    "remap labels": (
        "HINT_REMAP_LABELS",
        {"classes": "the input has 3 classes (input.shape[1] == 3)", "reaches": "the target reaches", "top": 9,
         "more": 10, "last": 2},
        lambda: F.cross_entropy(torch.randn(2, 3), torch.tensor([0, 9])),
    ),
    "nearest resize": (
        "HINT_NEAREST_RESIZE", {}, lambda: F.cross_entropy(torch.randn(1, 3, 2), torch.tensor([[0, 7]]))
    ),
    "minus 100": ("HINT_MINUS_100", {"now": "ignore_index=255"},
                  lambda: F.nll_loss(torch.randn(2, 3), torch.tensor([-100, 0]), ignore_index=255)),
    "minus one": ("HINT_MINUS_ONE", {}, lambda: F.nll_loss(torch.randn(2, 3), torch.tensor([-1, 0]))),
    "negative labels": ("HINT_NEGATIVE_LABELS", {}, lambda: F.nll_loss(torch.randn(2, 3), torch.tensor([-7, 0]))),
    "not integer labels": ("HINT_NOT_INTEGER_LABELS", {}, lambda: check_labels([0.5], 3)),
    "bce logits": ("HINT_BCE_LOGITS", {}, lambda: F.binary_cross_entropy(torch.tensor([2.0]), torch.tensor([1.0]))),
    "bce nan input": ("HINT_BCE_NAN_INPUT", {},
                      lambda: F.binary_cross_entropy(torch.tensor([float("nan")]), torch.tensor([1.0]))),
    "bce mask pixels": ("HINT_BCE_MASK_PIXELS", {},
                        lambda: F.binary_cross_entropy(torch.tensor([0.5]), torch.tensor([255.0]))),
    "bce multiclass": ("HINT_BCE_MULTICLASS", {},
                       lambda: F.binary_cross_entropy(torch.tensor([0.5]), torch.tensor([3.0]))),
    "bce negative targets": ("HINT_BCE_NEGATIVE_TARGETS", {},
                             lambda: F.binary_cross_entropy(torch.tensor([0.5]), torch.tensor([-1.0]))),
    "bce scale targets": ("HINT_BCE_SCALE_TARGETS", {},
                          lambda: F.binary_cross_entropy(torch.tensor([0.5]), torch.tensor([1.5]))),
    "bce nan target": ("HINT_BCE_NAN_TARGET", {},
                       lambda: F.binary_cross_entropy(torch.tensor([0.5]), torch.tensor([float("nan")]))),
    "ctc blank": ("HINT_CTC_BLANK", {"blank": 0},
                  lambda: F.ctc_loss(torch.randn(6, 1, 4).log_softmax(2), torch.tensor([[0, 1]]), [6], [2])),
    "ctc too big": ("HINT_CTC_TOO_BIG", {"n_classes": 4, "top": 6},
                    lambda: F.ctc_loss(torch.randn(6, 1, 4).log_softmax(2), torch.tensor([[6, 1]]), [6], [2])),
    "ctc negative": ("HINT_CTC_NEGATIVE", {},
                     lambda: F.ctc_loss(torch.randn(6, 1, 4).log_softmax(2), torch.tensor([[-1, 1]]), [6], [2])),
    "ctc cpu silent": ("HINT_CTC_CPU_SILENT", {},
                       lambda: F.ctc_loss(torch.randn(6, 1, 4).log_softmax(2), torch.tensor([[6, 1]]), [6], [2])),
    "embedding too big": (
        "HINT_EMBEDDING_TOO_BIG", {"num": 10, "last": 9, "top": 12, "more": 13},
        lambda: torch.nn.Embedding(10, 2)(torch.tensor([12])),
    ),
    "embedding minus 100": ("HINT_EMBEDDING_MINUS_100", {},
                            lambda: F.embedding(torch.tensor([-100]), torch.randn(4, 2))),
    "embedding negative": ("HINT_EMBEDDING_NEGATIVE", {}, lambda: F.embedding(torch.tensor([-1]), torch.randn(4, 2))),
    "offsets": ("HINT_OFFSETS", {}, embedding_bag_bad_offsets),
    "index too big": ("HINT_INDEX_TOO_BIG", {"where": "dimension 0 has size 4", "top": 4, "last": 3},
                      lambda: torch.zeros(4)[torch.tensor([4])]),
    "index no negatives": ("HINT_INDEX_NO_NEGATIVES", {},
                           lambda: torch.zeros(3, 4).gather(1, torch.tensor([[-1]] * 3))),
    "index negative floor": ("HINT_INDEX_NEGATIVE_FLOOR", {"lowest": -4}, lambda: torch.zeros(4)[torch.tensor([-5])]),
    "probs nonfinite": ("HINT_PROBS_NONFINITE", {},
                        lambda: Categorical(logits=torch.tensor([float("inf"), 0.0]), validate_args=False).sample()),
    "probs negative": ("HINT_PROBS_NEGATIVE", {}, lambda: torch.multinomial(torch.tensor([-1.0, 2.0]), 1)),
    "probs zero rows": ("HINT_PROBS_ZERO_ROWS", {}, lambda: torch.multinomial(torch.zeros(2, 3), 1)),
    "bernoulli range": ("HINT_BERNOULLI_RANGE", {}, lambda: torch.zeros(2).bernoulli_(torch.tensor([0.5, 2.0]))),
    "bernoulli nan": ("HINT_BERNOULLI_NAN", {}, lambda: torch.bernoulli(torch.tensor([float("nan")]))),
    "one_hot negative": ("HINT_ONE_HOT_NEGATIVE", {}, lambda: F.one_hot(torch.tensor([-1, 1]), 3)),
    "one_hot too big": ("HINT_ONE_HOT_TOO_BIG", {"num_classes": 3, "top": 5, "more": 6, "last": 2},
                        lambda: F.one_hot(torch.tensor([5, 1]), 3)),
    "repeats negative": ("HINT_REPEATS_NEGATIVE", {}, lambda: torch.repeat_interleave(torch.tensor([2, -1]))),
    "output size": ("HINT_OUTPUT_SIZE", {"required": 3},
                    lambda: torch.repeat_interleave(torch.tensor([1, 2]), output_size=4)),
}


def test_every_hint_template_has_a_case() -> None:
    templates = {name for name in dir(errors) if name.startswith("HINT_") and name != "HINT_LINE"}
    assert templates == {template for template, _, _ in CASES.values()}


@pytest.mark.parametrize("case", sorted(CASES))
def test_hint_is_rendered_in_full_for_the_input_that_calls_for_it(case: str) -> None:
    template, fields, call = CASES[case]
    expected = getattr(errors, template).format(**fields)
    with validators(), pytest.raises(ValidationError) as info:
        call()
    assert expected in info.value.hint
    assert f"\nLikely fix: {info.value.hint}\n" in str(info.value)
