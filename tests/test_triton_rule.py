"""The Triton/Inductor size hint: ``index out of bounds: 0 <= tmpN < SIZE`` names what SIZE likely is."""

from __future__ import annotations

import pytest

from cudaassert_ipy.capture.assert_lines import scan
from cudaassert_ipy.diagnose.detection import classify_text
from cudaassert_ipy.diagnose.diagnosis import diagnose
from cudaassert_ipy.diagnose.evidence import Evidence, ModuleFact, TensorFact

# Triton's device_assert line without debug info (public log), and the Inductor assert of pytorch/pytorch#159798.
NO_DEBUG = (
    "unknown:0: unknown: block: [0,0,0], thread: [32,0,0] Assertion `index out of bounds: 0 <= tmp42 < {n}` failed.\n"
)
ERROR = ("RuntimeError", "Triton Error [CUDA]: device-side assert triggered")


def _diagnose(line: str, **facts: tuple) -> str | None:
    detection = classify_text(*ERROR)
    assert detection is not None
    d = diagnose(Evidence(detection=detection, sites=tuple(scan(line)), **facts))
    assert d.cause_id == "inductor_triton_index_out_of_bounds"
    return d.specific


def test_a_size_equal_to_an_embeddings_rows_is_called_the_vocabulary():
    wte = ModuleFact("model.wte", "Embedding", (("num_embeddings", 50257), ("embedding_dim", 768)))
    assert _diagnose(NO_DEBUG.format(n=50257), embeddings=(wte,)) == (
        "The compiled kernel checked an index against 50257, and `model.wte` has num_embeddings=50257: a token id "
        "is >= the vocabulary size (or negative)."
    )


def test_a_size_equal_to_max_position_embeddings_is_called_the_sequence_limit():
    cfg = ModuleFact("model.config", "BertConfig", (("vocab_size", 30522), ("max_position_embeddings", 512)))
    assert _diagnose(NO_DEBUG.format(n=512), configs=(cfg,)) == (
        "The compiled kernel checked an index against 512, and `model.config.max_position_embeddings` is 512: a "
        "position index reached the maximum sequence length: truncate the inputs to 512 tokens."
    )


def test_a_size_equal_to_the_classifiers_out_features_is_called_the_number_of_classes():
    fc = ModuleFact("model.fc", "Linear", (("in_features", 64), ("out_features", 10)))
    assert _diagnose(NO_DEBUG.format(n=10), linears=(fc,)) == (
        "The compiled kernel checked an index against 10, and `model.fc` has out_features=10: a class label is >= "
        "the number of classes (or negative)."
    )


def test_a_size_equal_to_a_batchs_sequence_length_is_called_the_sequence_length():
    ids = TensorFact("input_ids", (8, 128), "torch.int64", "cuda:0")
    assert _diagnose(NO_DEBUG.format(n=128), tensors=(ids,)) == (
        "The compiled kernel checked an index against 128, and `input_ids` has sequence length 128 (shape (8, 128)): "
        "an index reached the sequence length (off by one, or a stale length)."
    )


def test_with_no_host_fact_of_that_size_the_size_is_named_and_the_eager_rerun_suggested():
    assert _diagnose(NO_DEBUG.format(n=1024)) == (
        "The compiled kernel checked an index against 1024: the size of the dimension it indexed. No object seen "
        "here has that size; compare it with your vocabulary size, sequence length and number of classes, or run "
        "the model without torch.compile to get the eager op's own message."
    )


def test_a_dynamic_size_is_named_as_such():
    assert _diagnose(NO_DEBUG.format(n="ks0")) == (
        "The compiled kernel checked an index against a dynamic size (ks0): an index reached that size or went "
        "negative. Run the model without torch.compile to get the eager op's own message, which names the sizes."
    )


@pytest.mark.parametrize(
    "line",
    [
        "/tmp/torchinductor_dberard/3h/c3hlb22fpptebupstsuhl6kexa6z3upgbnyxln7c24gfcr5747iu.py:30: unknown: block: "
        "[0,0,0], thread: [10,0,0] Assertion `index out of bounds: 0 <= tmp5 < 4` failed.",
        "<frozen importlib._bootstrap>:488: unknown: block: [0,0,0], thread: [3,0,0] Assertion `index out of bounds: "
        "0 <= tmp5 < 4` failed.",
    ],
)
def test_every_triton_location_form_reaches_the_rule(line):
    assert _diagnose(line).startswith("The compiled kernel checked an index against 4:")
