"""The catalogue of failure points read from a traceback's frames (diagnose/causes/frame_points.json)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from helpers.pastes import ASSERT
from helpers.pastes import first as _first
from helpers.pastes import trace as _trace

from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.causes import GENERIC_ID, get_cause
from cudaassert_ipy.diagnose.frame_points import points
from cudaassert_ipy.logs.explain import explain_text


def test_every_point_names_a_known_cause_a_fix_and_patterns_that_compile() -> None:
    ids = [p.id for p in points()]
    assert len(ids) == len(set(ids))
    for p in points():
        assert get_cause(p.cause).id == p.cause != GENERIC_ID, p.id
        assert p.fix in hints.FRAME_FIXES, p.id
        assert p.says and p.says[0].islower(), p.id
        for pattern in (p.code, p.message, p.context):
            if pattern is not None:
                re.compile(pattern)
        for refined in p.refines:
            assert get_cause(refined).id == refined, (p.id, refined)
        assert p.paths or p.funcs or p.code or p.message or p.context, p.id


SITE = "/opt/conda/lib/python3.10/site-packages/"
CASES = {
    "bert position": (
        (
            SITE + "transformers/models/bert/modeling_bert.py",
            202,
            "forward",
            "position_embeddings = self.position_embeddings(position_ids)",
        ),
        "position_ids_out_of_range",
        "max_length",
    ),
    "roberta token type": (
        (
            SITE + "transformers/models/roberta/modeling_roberta.py",
            130,
            "forward",
            "token_type_embeddings = self.token_type_embeddings(token_type_ids)",
        ),
        "token_type_ids_out_of_range",
        "type_vocab_size",
    ),
    "hf classification loss": (
        (
            SITE + "transformers/loss/loss_utils.py",
            80,
            "ForSequenceClassificationLoss",
            "loss = fixed_cross_entropy(pooled_logits.view(-1, num_labels), labels.view(-1))",
        ),
        "nll_loss_target_out_of_range",
        "num_labels",
    ),
    "hf token classification": (
        (
            SITE + "transformers/models/bert/modeling_bert.py",
            1790,
            "forward",
            "loss = loss_fct(logits.view(-1, self.num_labels), labels.view(-1))",
        ),
        "nll_loss_target_out_of_range",
        "num_labels",
    ),
    "hf mlm loss": (
        (
            SITE + "transformers/models/bert/modeling_bert.py",
            1390,
            "forward",
            "masked_lm_loss = loss_fct(prediction_scores.view(-1, self.config.vocab_size), labels.view(-1))",
        ),
        "nll_loss_target_out_of_range",
        "-100",
    ),
    "hf generation": (
        (
            SITE + "transformers/generation/utils.py",
            2990,
            "_sample",
            "next_tokens = torch.multinomial(probs, num_samples=1).squeeze(1)",
        ),
        "multinomial_invalid_probs_async",
        "bfloat16",
    ),
    "yolo loss": (
        (SITE + "ultralytics/utils/loss.py", 220, "__call__", "target_scores[idx, cls] = 1.0"),
        "detection_class_out_of_range",
        "nc",
    ),
    "torchvision fastrcnn": (
        (
            SITE + "torchvision/models/detection/roi_heads.py",
            45,
            "fastrcnn_loss",
            "classification_loss = F.cross_entropy(class_logits, labels)",
        ),
        "detection_class_out_of_range",
        "background",
    ),
    "pyg message passing": (
        (
            SITE + "torch_geometric/nn/conv/message_passing.py",
            231,
            "_lift",
            "return src.index_select(self.node_dim, index)",
        ),
        "graph_node_index_out_of_range",
        "edge_index",
    ),
    "nnunet backward": (
        ("/home/u/nnUNet/nnunetv2/training/nnUNetTrainer/nnUNetTrainer.py", 990, "train_step", "l.backward()"),
        "nll_loss_target_out_of_range",
        "consecutive",
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_a_traceback_without_the_kernel_line_names_the_cause_from_its_frames(name: str) -> None:
    frame, cause, word = CASES[name]
    d = _first(_trace(("train.py", 10, "<module>", "trainer.train()"), frame))
    assert d.cause_id == cause
    assert word in (d.likely_fix or "")
    assert d.basis.startswith("a frame: ")
    assert d.specific is not None and "The traceback passes through" in d.specific


def test_a_late_frame_says_so_and_names_the_earlier_op() -> None:
    d = _first(
        _trace(("/home/u/nnUNet/nnunetv2/training/nnUNetTrainer/nnUNetTrainer.py", 990, "train_step", "l.backward()"))
    )
    assert any("only used the result" in n and "without CUDA_LAUNCH_BLOCKING=1" in n for n in d.notes)


def test_a_cpu_twin_inside_a_framework_frame_is_named_by_the_frame() -> None:
    d = _first(
        _trace(
            (
                SITE + "transformers/models/bert/modeling_bert.py",
                202,
                "forward",
                "position_embeddings = self.position_embeddings(position_ids)",
            ),
            error="IndexError: index out of range in self\n",
        )
    )
    assert d.cause_id == "position_ids_out_of_range"


def test_nothing_decides_then_the_likely_causes_are_ranked_with_what_to_check() -> None:
    d = _first(ASSERT)
    assert d.cause_id == GENERIC_ID
    assert d.candidates[0].startswith("Nothing in the text decides")
    assert len(d.candidates) == 4 and "labels" in d.candidates[1]
    hf = _first(_trace((SITE + "transformers/trainer.py", 2300, "training_step", "loss.backward()")))
    assert "vocab_size" in hf.candidates[1]


def test_old_and_follow_on_texts() -> None:
    old_cpu = _first(
        "RuntimeError: index out of range: Tried to access index 30522 out of table with 30521 rows. "
        "at /pytorch/aten/src/TH/generic/THTensorEvenMoreMath.cpp:418\n"
    )
    assert old_cpu.cause_id == "index_select_out_of_range"
    assert (
        _first("RuntimeError: Invalid index in scatterAdd at /pytorch/aten/src/TH/generic/X.cpp:766\n").cause_id
        == "scatter_gather_index_out_of_range_v1"
    )
    thc = _first(
        "RuntimeError: cuda runtime error (59) : device-side assert triggered at "
        "C:/w/1/s/windows/pytorch/aten/src\\THCUNN/generic/ClassNLLCriterion.cu:110\n"
    )
    assert thc.cause_id == "thcunn_class_nll_target_out_of_range"
    assert thc.basis == "the kernel file the error text names"
    split = _first("IndexError: Target -1 is out\n of bounds.\n")
    assert split.cause_id == "nll_loss_target_out_of_range"
    cublas = _first("RuntimeError: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling cublasCreate(handle)\n")
    assert cublas.cause_id == "index_select_out_of_range" and "embedding" in (cublas.specific or "")
    probs = _first("RuntimeError: probability tensor contains either inf, nan or element < 0\n")
    assert probs.cause_id.startswith("multinomial")


def test_the_catalogue_loads_on_the_first_report_not_on_import() -> None:
    code = (
        "import sys, cudaassert_ipy.diagnose.diagnosis, cudaassert_ipy.logs.explain;"
        "assert 'cudaassert_ipy.diagnose.frame_points' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_broken_catalogue_costs_one_note_not_the_report(monkeypatch: pytest.MonkeyPatch) -> None:
    from cudaassert_ipy.diagnose import frame_points

    def broken(*args: object, **kwargs: object) -> None:
        raise re.error("unbalanced parenthesis")

    monkeypatch.setattr(frame_points, "find_point", broken)
    d = _first(
        _trace(
            (
                SITE + "transformers/models/bert/modeling_bert.py",
                202,
                "forward",
                "position_embeddings = self.position_embeddings(position_ids)",
            )
        )
    )
    assert d.cause_id == GENERIC_ID
    assert any(n.startswith("[internal] rule frame_points failed: error: unbalanced parenthesis") for n in d.notes)


def test_an_assertion_quoted_inline_without_its_record_is_read() -> None:
    d = _first(
        "`CUDA runtime error (59) : device-side assert triggered`\n`Assertion 'srcIndex < srcSelectDimSize' failed`\n"
    )
    assert d.cause_id == "index_select_out_of_range"
    assert explain_text("Assertion 'srcIndex < srcSelectDimSize' failed").repairs == (
        "an assertion quoted without its kernel's record (1)",
    )


def test_one_hot_keeps_the_gpu_assertions_cause_and_its_message_names_the_class_values() -> None:
    d = _first("RuntimeError: Class values must be smaller than num_classes.\n")
    assert d.cause_id == "one_hot_class_out_of_range"
    assert d.basis == "the error text (one_hot_message)"


def test_a_cpu_error_pasted_without_its_type_or_in_quotes_is_still_its_twin() -> None:
    assert _first('"Target -1 is out of bound"\n').cause_id == "nll_loss_target_out_of_range"
    assert _first('IndexError: "Index out of range in self"\n').cause_id == "index_select_out_of_range"
    bare = _first("index 25 is out of bounds for dimension 0 with size 25\n")
    assert bare.cause_id == "advanced_indexing_out_of_range_v1" and bare.exception_line.startswith("IndexError: ")
    assert not explain_text("the loss went down to 0.5 and the index is fine\n").found


def test_a_framework_object_in_the_paste_names_the_index() -> None:
    text = (
        "HeteroData(\n  paper={ x=[480, 3] },\n  (paper, cites, paper)={ edge_index=[2, 10128] }\n)\n"
        "IndexError: index out of range in self\n"
    )
    d = _first(text)
    assert d.cause_id == "graph_node_index_out_of_range"
    assert d.basis == "the error text (pyg_in_the_paste)"
    assert _first("IndexError: index out of range in self\n").cause_id == "index_select_out_of_range"
