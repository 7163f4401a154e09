"""Honest when unsure (diagnose/code_lines.py, data in causes/code_lines.json): the user's own lines rank the likely
causes when nothing else decides; a traceback cut before its error line is read from its frames; the generic answer
stays for text that holds nothing at all. Every text is written for the test."""

from __future__ import annotations

import re

import pytest
from helpers.pastes import ASSERT
from helpers.pastes import first as _first
from helpers.pastes import trace as _trace

from cudaassert_ipy.capture.tracebacks import Frame
from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.causes import GENERIC_ID, get_cause
from cudaassert_ipy.diagnose.code_lines import is_user_frame, rank, rules
from cudaassert_ipy.logs.explain import NO_ERROR_LINE, explain_text

SITE = "/usr/lib/python3/dist-packages/"


def test_every_rule_compiles_ranks_known_causes_and_has_words_to_check() -> None:
    ids = [r.id for r in rules()]
    assert len(ids) == len(set(ids)) and ids
    for r in rules():
        re.compile(r.code)
        assert r.ranked and r.op, r.id
        for cause, check in r.ranked:
            assert get_cause(cause).id == cause != GENERIC_ID, (r.id, cause)
            assert check in hints.CODE_CHECKS, (r.id, check)


CASES = {
    "a loss call": ("loss = loss_calc(logits, y)", "nll_loss_target_out_of_range", "labels.min()"),
    "a bce call": ("loss = bce_loss(out, y)", "bce_input_out_of_range", "BCEWithLogitsLoss"),
    "a model returning its loss": ("loss, metrics = seg_module(batch)", "nll_loss_target_out_of_range", "out_features"),
    "raw text through a model": (
        "embeddings = model.encode(sentences)",
        "position_ids_out_of_range",
        "max_position_embeddings",
    ),
    "raw text through a pipeline": ("result = classifier(long_text)", "position_ids_out_of_range", "truncate"),
    "a model given ids": ("hidden = encoder(input_ids, attention_mask)", "index_select_out_of_range", "num_embeddings"),
    "a model given targets": ("out = model(images, masks)", "nll_loss_target_out_of_range", "num_classes"),
    "gather": ("picked = torch.gather(scores, 1, idx)", "scatter_gather_index_out_of_range_v1", "input.size(dim)"),
    "indexing": ("rows = table[indices]", "advanced_indexing_out_of_range_v2", "-size..size-1"),
    "sampling": ("action = Categorical(p).sample()", "multinomial_invalid_probs_async", "isfinite"),
    "a read of the loss": ("history.append(loss.detach())", "nll_loss_target_out_of_range", "labels.min()"),
    "a copy of the labels": (
        "target = target.cuda(non_blocking=True)",
        "nll_loss_target_out_of_range",
        "ignore_index=",
    ),
    "a graph layer": ("h = self.gat2(h, adj_t)", "graph_node_index_out_of_range", "edge_index.max()"),
    "categorical codes": ("e = self.tables[j](x_categ[:, j])", "index_select_out_of_range", "cat_dims"),
}


@pytest.mark.parametrize("name", CASES)
def test_the_users_line_ranks_the_likely_causes_and_names_the_first(name: str) -> None:
    code, cause, check = CASES[name]
    d = _first(_trace(("/home/me/proj/train.py", 41, "train", code)))
    assert d.cause_id == cause
    assert d.basis == f"a code line: train.py:41 (`{code}`), ranked, not decided"
    assert d.candidates[0].startswith("Ranked from the line") and check in d.candidates[1]
    assert "Nothing in the text decides the cause" in (d.specific or "") and d.op is None


def test_the_innermost_line_that_ran_an_op_wins_over_where_it_surfaced() -> None:
    frames = (
        Frame("/p/train.py", 10, "main", "loss = criterion(out, y)"),
        Frame("/p/train.py", 20, "step", "total += loss.item()"),
        Frame(SITE + "torch/_tensor.py", 30, "item", "return self._item()"),
    )
    found = rank(frames)
    assert found is not None and found.rule.id == "loss_call" and found.frame.line == 10
    assert rank((frames[1],)) is not None and rank((frames[1],)).rule.late  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "code",
    [
        "y = model(x.to(device))",  # the input's copy, not the labels'
        "labels = batch['labels']",  # a dict's key, not a tensor index
        "x = x[mask]",  # a boolean mask cannot index out of range
        "print(epoch, step)",
        "l = mse_loss_fn(pred, target)",  # a regression loss: not a class-label failure
        "d = kl_div_loss(p, q)",
    ],
)
def test_lines_that_call_nothing_a_rule_knows_rank_nothing(code: str) -> None:
    assert rank((Frame("/p/train.py", 3, "main", code),)) is None


def test_library_lines_are_not_the_users() -> None:
    assert not is_user_frame(Frame(SITE + "foo/loss.py", 1, "f", "loss = criterion(a, b)"))
    assert not is_user_frame(Frame("/opt/conda/lib/python3.11/functools.py", 1, "f", "x = model(ids)"))
    assert is_user_frame(Frame("<ipython-input-3-abc>", 2, "<module>", "loss = criterion(a, b)"))
    assert not is_user_frame(Frame("/p/train.py", 2, "main", ""))


def test_what_decides_stands_over_a_ranked_line() -> None:
    kernel = _first(
        "/w/aten/src/ATen/native/cuda/Indexing.cu:1422: indexSelectLargeIndex: block: [0,0,0], thread: "
        "[0,0,0] Assertion `srcIndex < srcSelectDimSize` failed.\n"
        + _trace(("/p/train.py", 5, "main", "loss = criterion(out, y)"))
    )
    assert kernel.cause_id == "index_select_out_of_range" and not kernel.basis.startswith("a code line")
    twin = _first(
        _trace(("/p/train.py", 5, "main", "loss = criterion(out, y)"), error="IndexError: index out of range in self\n")
    )
    assert twin.cause_id == "index_select_out_of_range"


def test_text_that_holds_nothing_keeps_the_generic_answer() -> None:
    d = _first(ASSERT)
    assert d.cause_id == GENERIC_ID and d.candidates[0].startswith("Nothing in the text decides")
    assert d.basis.startswith("nothing that decides")
    plain = _first(_trace(("/p/train.py", 5, "main", "print('epoch', epoch)")))
    assert plain.cause_id == GENERIC_ID


def test_a_traceback_cut_before_its_error_line_is_read_from_its_frames() -> None:
    text = _trace(
        ("/p/train.py", 9, "main", "out = model(x)"),
        ("/p/model.py", 33, "forward", "loss = self.criterion(out, y)"),
        error="",
    )
    d = _first(text)
    assert d.cause_id == "nll_loss_target_out_of_range" and d.exception_line == NO_ERROR_LINE
    assert d.notes[0].startswith("The text holds a traceback but not its error line")
    assert not explain_text(_trace(("/p/train.py", 9, "main", "print(x)"), error="")).found
    assert not explain_text(
        _trace(("/p/train.py", 9, "main", "loss = criterion(out, y)"), error="ValueError: bad shape\n")
    ).found  # another error: not ours


STICKY = "RuntimeError: CUDA error: an illegal memory access was encountered\n"


@pytest.mark.parametrize(
    ("code", "cause"),
    [
        ("picked = feats.gather(1, idx)", "scatter_gather_index_out_of_range_v1"),
        ("logits = model(input_ids=batch_ids)", "index_select_out_of_range"),
    ],
)
def test_a_sticky_error_after_a_users_line_ranks_what_that_line_ran(code: str, cause: str) -> None:
    d = _first(_trace(("/p/run.py", 52, "step", code), error=STICKY))
    assert d.kind == "sticky" and d.cause_id == cause
    assert d.basis.startswith("a code line: run.py:52") and "likely" in d.headline
    # a sticky error with no line a rule reads keeps its own words
    plain = _first(_trace(("/p/run.py", 52, "step", "out = net(img)"), error=STICKY))
    assert plain.cause_id == "sticky" and "illegal memory access" in plain.headline
