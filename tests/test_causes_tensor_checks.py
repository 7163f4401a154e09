"""The empty condition: ``Assertion `` failed.`` is read as a site and explained from the op the cell calls."""

from __future__ import annotations

from helpers.causes import explain_one, post_mortem
from log_samples import CENSUS

from cudaassert_ipy.capture.assert_lines import parse_line, scan
from cudaassert_ipy.diagnose import hints

LINE = {e["id"]: e["line"] for e in CENSUS}
EMPTY = LINE["assert_async_empty_message"]
WINDOWS = LINE["assert_async_false"]


def test_an_empty_condition_is_a_whole_record_and_folds_like_any_other() -> None:
    record = parse_line(EMPTY)
    assert record is not None and record.condition == "" and record.line == 121
    (site,) = scan("\n".join(EMPTY.replace("thread: [0,0,0]", f"thread: [{t},0,0]") for t in range(5)))
    assert (site.condition, site.count, site.threads, site.blocks) == ("", 5, 5, 1)
    assert parse_line(EMPTY.replace("Assertion `` failed.", "Assertion `")) is None  # cut: not whole


def test_the_empty_condition_names_the_message_less_gpu_check() -> None:
    d = explain_one(EMPTY)
    assert d.cause_id == "assert_async_empty_message"
    assert d.title == "a tensor check failed on the GPU (the kernel printed no message)"
    assert "index_put_" in d.explanation and "ctc_loss" in d.explanation and "torch._assert_async" in d.explanation
    assert d.fix.startswith("Rerun the cell on the CPU")


def test_the_op_in_the_cell_explains_the_empty_condition() -> None:
    d = post_mortem(EMPTY, cell="loss = F.ctc_loss(log_probs, targets, input_lengths, target_lengths)")
    assert d.specific == (
        "The cell calls ctc_loss: on the cuDNN path its length checks run on the GPU and print no "
        f"message. Likely fix: {hints.ASYNC_CTC}."
    )
    assert d.op == "ctc_loss" and d.headline.endswith("(the kernel printed no message) in ctc_loss")
    d = post_mortem(EMPTY, cell="hist.index_put_((idx,), ones, accumulate=True)")
    assert d.likely_fix == hints.ASYNC_INDEX_PUT and d.op == "index_put_"
    d = post_mortem(EMPTY, cell="torch._assert_async(mask.any())")
    assert d.likely_fix == hints.ASYNC_OWN
    assert post_mortem(EMPTY, cell="y = model(x)").specific is None  # nothing in the cell names it: nothing guessed


def test_windows_prints_input_0_for_every_check_and_the_cell_names_it() -> None:
    d = post_mortem(WINDOWS, cell="next_token = torch.multinomial(probs, 1)")
    assert d.cause_id == "assert_async_false" and d.op == "multinomial"
    assert d.likely_fix == hints.PROBS_NONFINITE


def test_paste_damage_around_an_empty_condition_is_read_through() -> None:
    for damaged in (
        EMPTY.replace("Assertion `` failed.", "Assertion  failed."),
        EMPTY.replace("Assertion `` failed.", "Assertion ```` failed."),
    ):
        d = explain_one(damaged)
        assert d.cause_id == "assert_async_empty_message", damaged
