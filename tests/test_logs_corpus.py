"""A corpus of logs as real runs and real pastes produce them, and the explainer's figures over it.

Every catalogue entry's assertion line (device_asserts.json ``sample_stderr_line``, or the gpu double's
line) goes through each phenomenon the issue names: launcher prefixes, a tqdm bar with no newline,
text glued after, a Windows build path, another process's line spliced in, console wrapping, ROCm's
format, Triton without debug info, and paste damage. Two figures come out, printed: the share of
assertion lines folded into a site of a known cause, and the share of logs whose cause is right (the
entry's own cause, or one that gives the same title, explanation and fix). What is held is the set of
logs allowed to miss each, named one by one: any other log that misses fails, and so does one of these
that starts to pass (shrink the set).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from log_samples import ALL_IDS, ASSERT_24, LOSS, catalogue_lines

from cudaassert_ipy.diagnose.causes import get_cause, match_assert
from cudaassert_ipy.logs.explain import explain_text

THREADS = 3
FLASHMLA = (
    "tp_vllm_flashmla_my_num_splits",
    "tp_vllm_flashmla_now_req_idx",
    "tp_vllm_flashmla_actual_num_splits",
    "tp_vllm_flashmla_now_idx",
)
#: vLLM FlashMLA's printf lines glued to, wrapped or linked with other text: nothing marks their end.
CAUSE_MISSED = {
    (e, p) for e in FLASHMLA for p in ("text glued after", "console wrap", "markdown: link around the path")
}
#: Those, and one line of a 5-character condition (`false`, `b < B`, ...) spliced mid-path by another process.
NOT_ALL_FOLDED = CAUSE_MISSED | {
    (e, "spliced head")
    for e in (
        "thc_topk_find_pattern_failed",
        "tp_mmcv_assign_score_withk_b",
        "tp_mmcv_assign_score_withk_kn",
        "tp_mmcv_assign_score_withk_cn",
        "tp_mmcv_assign_score_withk_o",
        "tp_mmcv_assign_score_withk_n",
        *FLASHMLA,
        "tp_vllm_deepselect_nan",
    )
}
OTHER = LOSS.format(b=9, t=9)  # the other process's line


def _lines(text: str) -> list[str]:
    return text.splitlines()


def _each(fn: Callable[[str], str]) -> Callable[[str], str]:
    return lambda text: "\n".join(fn(line) for line in _lines(text)) + "\n"


def _windows(line: str) -> str:
    path, sep, rest = line.partition(":")
    i = path.find("aten/")
    if i < 0:
        return line
    return "C:\\actions-runner\\_work\\pytorch\\pytorch\\pytorch\\" + path[i:].replace("/", "\\") + sep + rest


def _splice_head(text: str) -> str:
    """Another process's whole line lands after the first 40 characters of this one's first line."""
    first, *rest = _lines(text)
    return "\n".join([first[:40] + OTHER, first[40:], *rest]) + "\n"


def _wrap(text: str) -> str:
    """A console 80 columns wide (S3)."""
    return "\n".join(line[i : i + 80] for line in _lines(text) for i in range(0, len(line), 80)) + "\n"


def _hip(line: str) -> str:
    m = re.match(r"(.*?):(\d+): (.+?): block: \[[\d,]+\], thread: \[[\d,]+\] Assertion `(.*)` failed\.$", line)
    if m is None or m.group(3) == "unknown":
        return line
    path = m.group(1).replace("/cuda/", "/hip/").replace(".cu", ".hip")
    return f"{path}:{m.group(2)}: {m.group(3)}: Device-side assertion `{m.group(4)}' failed."


def _no_ticks(line: str) -> str:
    return re.sub(r"Assertion `(.*)` failed\.", r"Assertion \1 failed.", line)


def _no_line_number(line: str) -> str:
    return re.sub(r"\.(cuh?|h):\d+: ", r".\1: ", line, count=1)


def _link(line: str) -> str:
    path, sep, rest = line.partition(":")
    return f"[{path}](https://github.com/pytorch/pytorch/blob/main/{path.lstrip('./')}){sep}{rest}"


def _entities(line: str) -> str:
    return line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


PHENOMENA: dict[str, Callable[[str], str]] = {
    "plain": lambda t: t,
    "torchrun [rank3]:": _each(lambda line: "[rank3]:" + line),
    "Ray worker": _each(lambda line: "(RayTrainWorker pid=611035) " + line),
    "mpirun tag": _each(lambda line: "[1,2]<stderr>:" + line),
    "timestamp and level": _each(lambda line: "2024-05-01 12:00:00,123 ERROR " + line),
    "glog tag": _each(lambda line: "E0501 12:00:00.123456 1234 trainer.py:88] " + line),
    "grep -n": _each(lambda line: "1234:" + line),
    "tqdm, no newline": lambda t: "Epoch 1:  45%|████▌     | 45/100 [00:03<00:14,  3.81it/s]" + t,
    "text glued after": _each(lambda line: line + " terminate called after throwing an instance of 'c10::Error'"),
    "Windows build path": _each(_windows),
    "spliced head": _splice_head,
    "console wrap": _wrap,
    "ROCm/HIP": _each(_hip),
    "markdown: quote marks": _each(lambda line: "> " + line),
    "markdown: lost backticks": _each(_no_ticks),
    "markdown: doubled backticks": _each(
        lambda line: line.replace("Assertion `", "Assertion ``").replace("` failed", "`` failed")
    ),
    "markdown: link around the path": _each(_link),
    "markdown: HTML entities": _each(_entities),
    "markdown: lost line number": _each(_no_line_number),
}


def _case(entry_id: str, phenomenon: str) -> tuple[str, int]:
    lines = catalogue_lines(entry_id, THREADS)
    if entry_id == "inductor_triton_index_out_of_bounds" and phenomenon == "plain":
        lines = re.sub(r"^\S+?\.py:\d+: ", "unknown:0: ", lines, flags=re.MULTILINE)  # no debug info
    return PHENOMENA[phenomenon](lines) + ASSERT_24 + "\n", THREADS


def _measure(entry_id: str, phenomenon: str) -> tuple[int, int, bool]:
    """(assertion lines, lines folded into a site of a known cause, cause right)."""
    text, lines = _case(entry_id, phenomenon)
    ex = explain_text(text)
    known = ex.repeats + sum(s.count for s in ex.folded if match_assert(s.condition, s.file, s.function) is not None)
    if phenomenon == "spliced head":
        known -= 1  # the other process's whole line is not this entry's to count
    return lines, known, any(_same_words(d.cause_id, entry_id) for g in ex.groups for d in g.diagnoses)


def _same_words(found: str | None, expected: str) -> bool:
    """The entry's own cause, or a sibling the user cannot tell from it (an old THC text read as its ATen twin)."""
    if found is None:
        return False
    a, b = get_cause(found), get_cause(expected)
    return found == expected or (a.title, a.explanation, a.fix) == (b.title, b.explanation, b.fix)


CASES = [(e, p) for e in ALL_IDS for p in PHENOMENA]


def test_the_corpus_covers_every_catalogue_entry_and_phenomenon():
    assert len(CASES) == len(ALL_IDS) * len(PHENOMENA) >= 44 * 19


def test_corpus_figures_lines_folded_to_a_known_site_and_causes_right(capsys):
    total = folded = right = 0
    wrong: set[tuple[str, str]] = set()
    not_folded: set[tuple[str, str]] = set()
    per: dict[str, list[int]] = {}
    for entry_id, phenomenon in CASES:
        lines, known, ok = _measure(entry_id, phenomenon)
        total += lines
        folded += known
        right += ok
        per.setdefault(phenomenon, [0, 0])[0] += ok
        per[phenomenon][1] += 1
        if not ok:
            wrong.add((entry_id, phenomenon))
        if known != lines:
            not_folded.add((entry_id, phenomenon))
    with capsys.disabled():
        print(
            f"\ncorpus: {len(CASES)} logs, {total} assertion lines; folded to a known site {folded / total:.1%}; "
            f"causes right {right / len(CASES):.1%}"
        )
        for phenomenon, (ok, n) in per.items():
            print(f"  {phenomenon:32s} causes right {ok}/{n}")
    assert wrong == CAUSE_MISSED
    assert not_folded == NOT_ALL_FOLDED


@pytest.mark.parametrize("phenomenon", sorted(PHENOMENA))
def test_the_commonest_assert_is_right_under_every_phenomenon(phenomenon):
    lines, known, ok = _measure("nll_loss_target_out_of_range", phenomenon)
    assert ok and known == lines
