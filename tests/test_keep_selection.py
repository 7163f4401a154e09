"""restart/keep/selection.py: which asked-for cells are kept, which replay and why, and which to offer.

A cell is kept only when skipping it gives the state running it would: it only binds names, changes no
module, and no later cell that runs again changes its names.
"""

from __future__ import annotations

import pytest
from keep_cells import STAMP, restore_all, run_cells

from cudaassert_ipy.restart import keep
from cudaassert_ipy.restart.keep import KeepCell


def test_a_cell_whose_name_a_later_cell_changes_is_replayed_and_says_which_cell(tmp_path):
    ns, history = run_cells(
        ("labels = [1, 2, 3]", True),
        ("labels[0] = 0", False),
        ("counts = {}", True),
        ("counts.update(a=1)", False),
        ("n = 1", True),
        ("n += 1", False),
    )
    result = keep.save("k1", STAMP, history, ns, directory=tmp_path)
    assert [c.reason for c in result.cells] == [
        "cell [2] changes `labels` later, so the saved value would already hold that change",
        "cell [4] changes `counts` later, so the saved value would already hold that change",
        "cell [6] changes `n` later, so the saved value would already hold that change",
    ]
    new, _, _ = restore_all(tmp_path, history)
    assert (new["labels"], new["counts"], new["n"]) == ([0, 2, 3], {"a": 1}, 2)  # each change applied once


def test_a_later_cell_importing_the_same_module_again_does_not_unkeep_a_cell(tmp_path):
    ns, history = run_cells(
        ("import os\nimport json as js\nroot = os.sep", True),
        ("import os\nimport json as js\nn = len(root)", False),  # notebooks import the same modules again
        ("import pickle as js", False),  # the same name for another module is a change
    )
    (cell,) = keep.save("k1", STAMP, history, ns, directory=tmp_path).cells
    assert cell.reason == "cell [3] changes `js` later, so the saved value would already hold that change"
    ns, history = run_cells(("import os\nroot = os.sep", True), ("import os\nn = len(root)", False))
    (cell,) = keep.save("k2", STAMP, history, ns, directory=tmp_path).cells
    assert cell.kept, cell.reason


def test_a_later_kept_cell_that_changes_the_name_keeps_both(tmp_path):
    ns, history = run_cells(("xs = [1]", True), ("xs.append(2)", True), ("y = len(xs)", False))
    result = keep.save("k1", STAMP, history, ns, directory=tmp_path)
    assert [c.kept for c in result.cells] == [True, True]
    new, _, _ = restore_all(tmp_path, history)
    assert new["xs"] == [1, 2] and new["y"] == 2


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("import os\nos.environ['X'] = '1'\ny = 1", "it changes the module `os`, which restoring values cannot redo"),
        (
            "import numpy as np\nnp.random.seed(0)\ny = 1",
            "it changes the module `np`, which restoring values cannot redo",
        ),
        (
            "import torch\ntorch.manual_seed(0)\ny = 1",
            "it changes the module `torch`, which restoring values cannot redo",
        ),
        ("import random\nrandom.seed(0)\ny = 1", "it changes the module `random`, which restoring values cannot redo"),
        (
            "def set_seed(n):\n    pass\nset_seed(0)\ny = 1",
            "it does more than bind names (`set_seed(0)`), which restoring values cannot redo",
        ),
        (
            "%cd /tmp\ny = 1",
            "it does more than bind names (`get_ipython().run_line_magic('cd', '/tmp')`), which "
            "restoring values cannot redo",
        ),
        ("y = (", "its code could not be read (SyntaxError: '(' was never closed (<unknown>, line 1))"),
    ],
)
def test_cells_that_act_beyond_their_names_are_replayed(tmp_path, source, reason):
    ns: dict = {"__name__": "__main__"}
    if not source.startswith(("%", "y = (")):
        exec(source, ns)
    result = keep.save("k1", STAMP, [KeepCell(3, None, source, True)], ns, directory=tmp_path)
    assert result.cells[0].reason == reason


def test_display_calls_and_a_deleted_name_do_not_stop_a_cell_from_being_kept(tmp_path):
    ns, history = run_cells(("tmp = 1\nrows = [1, 2]\nprint(len(rows))\ndel tmp\nrows", True))
    result = keep.save("k1", STAMP, history, ns, directory=tmp_path)
    assert result.cells[0].kept
    new, _, _ = restore_all(tmp_path, history, new_ns={"__name__": "__main__", "tmp": "left over"})
    assert "tmp" not in new and new["rows"] == [1, 2]


def test_the_plan_cells_marked_or_picked_are_kept_and_the_whole_history_is_read():
    from cudaassert_ipy.restart.cell_history import CellRecord
    from cudaassert_ipy.restart.plan import PlanCell

    records = [
        CellRecord(0, 1, "%load_ext cudaassert\nimport torch", None, True, 0.1),
        CellRecord(1, 2, "# cudaassert: keep\ndf = 1", "a", True, 3.0),
        CellRecord(2, 3, "vocab = 2", "b", True, 3.0),
        CellRecord(3, 4, "df = 3", "c", False, 0.1),
    ]
    plan = [
        PlanCell(1, None, "import torch"),
        PlanCell(2, "a", "# cudaassert: keep\ndf = 1"),
        PlanCell(3, "b", "vocab = 2"),
    ]
    cells = keep.cells_for_plan(records, plan, picked={3})
    assert [(c.number, c.source, c.keep) for c in cells] == [
        (1, "import torch", False),
        (2, "# cudaassert: keep\ndf = 1", True),
        (3, "vocab = 2", True),
        (4, "df = 3", False),
    ]  # the failed cell [4] is not replayed, but it is read: it changes `df`


def test_after_a_replay_the_slow_cells_that_bound_only_cpu_values_are_offered_for_keeping():
    ns, _ = run_cells(("import os, torch\nx = torch.ones(2)\nm = torch.nn.Linear(2, 2, device='meta')", False))
    replayed = [
        (2, "x = torch.ones(2)", 5.0),
        (3, "m = torch.nn.Linear(2, 2, device='meta')", 9.0),
        (4, "import os\nos.chdir('/')", 7.0),
        (5, "y = 1", 0.5),
        (6, "x = x + 1", 3.0),
    ]
    assert keep.suggest(replayed, ns) == (
        "[cudaassert] Replaying [2], [6] took 8.0 s, and they bind only CPU values: keep them across the next "
        "restart with `%cudaassert setup keep 2,6` (or a first line `# cudaassert: keep`)."
    )
    assert keep.suggest([(5, "y = 1", 0.5)], ns) is None
