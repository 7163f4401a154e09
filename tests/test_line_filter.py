"""The line filter and the cell route: the cell gets a few raw lines per assert site, nothing else is touched.

Plain functions on real assertion texts (tests/gpu_double.py builds them from the reference catalogue).
"""

from __future__ import annotations

import os
import random

from gpu_double import assertion_lines

from cudaassert_ipy.base.wording import PREFIX
from cudaassert_ipy.capture.cell_route import CellRoute, find_route
from cudaassert_ipy.capture.line_filter import MORE_LINES, LineFilter

LOSS = assertion_lines("nll_loss_target_out_of_range", threads=10, blocks=2).splitlines(keepends=True)
INDEX = assertion_lines("advanced_indexing_out_of_range_v1", threads=10, blocks=2).splitlines(keepends=True)


def interleaved() -> tuple[bytes, list[bytes]]:
    """20 lines of each site, alternating, with an ordinary line (some non-ASCII) after every fifth pair."""
    parts, ordinary = [], []
    for i, (a, b) in enumerate(zip(LOSS, INDEX)):
        parts += [a, b]
        if i % 5 == 4:
            line = f"epoch {i} loss 0.{i} — ünïcode\n".encode()
            ordinary.append(line)
            parts.append(line)
    return b"".join(parts), ordinary


def more(count: str, site: str, singular: bool = False) -> str:
    return MORE_LINES.format(
        prefix=PREFIX, count=count, lines="line" if singular else "lines", site=site, were="was" if singular else "were"
    )


def test_the_first_three_lines_of_each_site_and_every_ordinary_line_pass_in_order() -> None:
    data, ordinary = interleaved()
    flt = LineFilter(3)
    out = flt.feed(data) + flt.release()
    assert out == LOSS[0] + INDEX[0] + LOSS[1] + INDEX[1] + LOSS[2] + INDEX[2] + b"".join(ordinary)
    assert flt.summary() == more("17", "Loss.cu:250") + more("17", "IndexKernel.cu:92")


def test_the_summary_counts_since_the_last_one_and_then_starts_again() -> None:
    flt = LineFilter(3)
    flt.feed(b"".join(LOSS[:4]))
    assert flt.summary() == more("1", "Loss.cu:250", singular=True)
    assert flt.feed(b"".join(LOSS[4:7])) == b"".join(LOSS[4:7])  # a new cell shows three again
    assert flt.summary() == ""


def test_thousands_are_written_with_separators_as_in_the_issue() -> None:
    lines = assertion_lines("nll_loss_target_out_of_range", threads=100, blocks=100)
    flt = LineFilter(3)
    assert flt.feed(lines) == b"".join(lines.splitlines(keepends=True)[:3])
    assert flt.summary() == (
        f"{PREFIX} … 9,997 more lines of this assertion (Loss.cu:250) were written to the kernel's log.\n"
    )


def test_split_at_any_byte_the_output_is_the_same_as_fed_whole() -> None:
    data, _ = interleaved()
    whole = LineFilter(3)
    expected = whole.feed(data) + whole.release()
    summary = whole.summary()
    for cut in range(1, len(data)):
        flt = LineFilter(3)
        out = flt.feed(data[:cut]) + flt.feed(data[cut:]) + flt.release()
        assert out == expected, cut
        assert flt.summary() == summary
    rng = random.Random(16)
    for _ in range(50):
        cuts = sorted(rng.sample(range(1, len(data)), 40))
        flt = LineFilter(3)
        out = b"".join(flt.feed(data[a:b]) for a, b in zip([0, *cuts], [*cuts, len(data)])) + flt.release()
        assert out == expected


def test_a_partial_line_released_early_passes_whole_even_if_it_is_an_assertion_line_over_the_limit() -> None:
    flt = LineFilter(1)
    assert flt.feed(LOSS[0] + LOSS[1][:30]) == LOSS[0]
    assert flt.release() == LOSS[1][:30]  # the writer went quiet mid-line
    assert flt.feed(LOSS[1][30:] + LOSS[2]) == LOSS[1][30:]  # its rest follows it; the next line is hidden
    assert flt.summary() == more("1", "Loss.cu:250", singular=True)


def test_minus_one_shows_every_line_and_a_bad_line_is_just_an_ordinary_line() -> None:
    data, _ = interleaved()
    flt = LineFilter(-1)
    assert flt.feed(data) == data and flt.summary() == ""
    junk = b"Assertion `x` failed. (not a kernel line)\n" * 10
    flt = LineFilter(0)
    assert flt.feed(junk) == junk


def test_a_line_longer_than_any_assertion_line_is_released_unfiltered_without_waiting() -> None:
    flt = LineFilter(0)
    blob = b"y" * (65 << 10)
    assert flt.feed(blob) == blob and not flt.holding
    assert flt.feed(b"y\n" + LOSS[0]) == b"y\n"


def test_a_route_whose_filter_fails_passes_everything_from_then_on_and_loses_nothing() -> None:
    """Fault injection: the classifier raises when asked about the second site."""
    calls: list[str] = []

    def fails_on_the_second_site(line: str) -> object:
        calls.append(line)
        if len(calls) == 2:
            raise ValueError("parser bug")
        return (("Loss.cu", 250, "t"), "Loss.cu:250")

    got: list[str] = []
    route = CellRoute(os.dup(1), got.append, 0)
    route.filter = LineFilter(0, classify=fails_on_the_second_site)
    data, _ = interleaved()
    route.to_cell(data[:100])  # a partial first line: held
    assert got == []
    route.to_cell(data[100:])  # the first line is hidden, then the classifier fails on the second
    route.to_cell(LOSS[0])
    route.close()
    assert route.filter is None and isinstance(route.failure, ValueError)
    assert "".join(got) == (data + LOSS[0]).decode()


def test_outside_ipykernel_there_is_no_route_so_nothing_changes() -> None:
    assert find_route(2, 3) is None and find_route(1, 3) is None and find_route(7, 3) is None
