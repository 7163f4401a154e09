"""restart/keep/result.py: the lines that say what keeping did, per cell and per name."""

from __future__ import annotations

from keep_cells import STAMP, restore_all, run_cells

from cudaassert_ipy.restart import keep


def test_the_kept_line_names_each_value_with_its_size_and_times(tmp_path):
    ns, history = run_cells(("import numpy as np\narr = np.zeros(250_000)", True))
    result = keep.save("k1", STAMP, history, ns, directory=tmp_path)
    _, outcomes, _ = restore_all(tmp_path, history)
    line = outcomes[1].line()
    assert line.startswith("[1] kept: `arr` 2.0 MB, `np` ") and "(saved in " in line and " s, loaded in " in line
    assert result.lines() == [result.cells[0].line()]


def test_the_report_lists_each_cell_under_one_header_and_discard_removes_unread_values(tmp_path):
    ns, history = run_cells(("x = 1", True), ("y = (i for i in [])", True))
    result = keep.save("k1", STAMP, history, ns, directory=tmp_path)
    assert result.report().splitlines() == [
        "[cudaassert] Kept across the restart:",
        "  " + result.cells[0].line(),
        "  [2] replayed: `y` holds a generator, whose position cannot be saved",
    ]
    assert keep.KeepResult().report() == ""
    keep.discard("k1", tmp_path)
    assert not keep.keep_dir("k1", tmp_path).exists()
