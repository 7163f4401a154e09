"""restart/keep/store.py: what one pickle stream can carry across the restart, what it refuses and why.

Notebook classes and functions come back as the new kernel's own; a value that cannot be kept (a GPU
tensor, an open file, a generator, over the time or size budget) replays its cell with the reason.
"A tensor on the GPU" is a meta-device tensor here: the refusal is a test of ``tensor.device.type != "cpu"``
read from host metadata, and CPU-only torch has no other non-CPU device; tests/gpu/test_keep_gpu.py checks a
real CUDA tensor where there is one.
"""

from __future__ import annotations

import pytest
from keep_cells import STAMP, restore_all, run_cells

from cudaassert_ipy.restart import keep
from cudaassert_ipy.restart.keep import KeepBudget


def test_notebook_functions_see_the_new_kernels_globals_and_classes_stay_one_class(tmp_path):
    ns, history = run_cells(
        ("scale = 2", False),
        (
            "class Vocab:\n    def __init__(self, words):\n        self.words = words\n"
            "    def size(self):\n        return len(self.words) * scale\n"
            "def tokenize(s):\n    return [w for w in s.split() if w in vocab.words]\n"
            "vocab = Vocab(['a', 'b'])",
            True,
        ),
    )
    keep.save("k1", STAMP, history, ns, directory=tmp_path)
    new, outcomes, _ = restore_all(tmp_path, history)
    assert outcomes[2].kept
    assert isinstance(new["vocab"], new["Vocab"])
    assert new["tokenize"].__globals__ is new and new["tokenize"]("a c b") == ["a", "b"]
    new["scale"] = 10  # a later change in the new kernel is seen, as after re-running `def`
    assert new["vocab"].size() == 20


def test_an_instance_of_a_class_from_a_replayed_cell_is_an_instance_of_the_replayed_class(tmp_path):
    ns, history = run_cells(
        ("class Config:\n    pass", False),
        ("cfg = Config()\ncfg.lr = 0.1", True),
    )
    keep.save("k1", STAMP, history, ns, directory=tmp_path)
    new, outcomes, _ = restore_all(tmp_path, history)
    assert outcomes[2].kept and isinstance(new["cfg"], new["Config"]) and new["cfg"].lr == 0.1


def test_a_class_kept_before_a_value_that_failed_is_still_the_class_of_instances_kept_after_it(tmp_path):
    ns, history = run_cells(
        ("import torch\nclass Box:\n    pass", True),
        ("bad = torch.ones(1, device='meta')", True),
        ("box = Box()", True),
    )
    result = keep.save("k1", STAMP, history, ns, directory=tmp_path)
    assert [c.kept for c in result.cells] == [True, False, True]
    new, outcomes, _ = restore_all(tmp_path, history)
    assert outcomes[3].kept and isinstance(new["box"], new["Box"])


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("x = torch.ones(3, device='meta')", "`x` holds a tensor on meta"),
        ("x = {'w': [torch.ones(2), torch.ones(2, device='meta')]}", "`x` holds a tensor on meta"),
        ("x = torch.nn.Linear(2, 2, device='meta')", "`x` holds parameters on meta"),
        ("x = open('/dev/null')", "`x` holds an open file (/dev/null)"),
        ("x = (i for i in range(3))", "`x` holds a generator, whose position cannot be saved"),
        ("import threading\nx = threading.Lock()", "`threading` "),
    ],
)
def test_values_that_cannot_be_kept_replay_their_cell_with_the_reason(tmp_path, source, reason):
    ns, history = run_cells(("import torch", False), (source, True))
    result = keep.save("k1", STAMP, history, ns, directory=tmp_path)
    (cell,) = result.cells
    assert not cell.kept
    if reason.startswith("`threading`"):  # the module pickles by reference; the lock cannot be saved at all
        assert cell.reason == "`x` cannot be saved (TypeError: cannot pickle '_thread.lock' object)"
    else:
        assert cell.reason == reason
    assert cell.line() == f"[2] replayed: {cell.reason}"
    new, outcomes, _ = restore_all(tmp_path, history)  # the new kernel says why, and replays the cell
    assert outcomes[2].line() == cell.line() and "x" in new
    assert not keep.keep_dir("k1", tmp_path).exists()
    for namespace in (ns, new):  # both kernels' open file (and generator) closed, not left to the garbage collector
        getattr(namespace["x"], "close", lambda: None)()


def test_a_save_over_its_time_budget_replays_the_cell(tmp_path):
    ns, history = run_cells(("big = list(range(100_000))", True))
    result = keep.save("k1", STAMP, history, ns, KeepBudget(seconds=0.0), tmp_path)
    assert result.cells[0].reason == "`big` saving took longer than the 0 s budget"


def test_a_value_over_the_size_budget_replays_the_cell(tmp_path):
    ns, history = run_cells(("import numpy as np\nbig = np.zeros(1_000_000)", True))
    result = keep.save("k1", STAMP, history, ns, KeepBudget(max_bytes=100_000, reserve_bytes=0), tmp_path)
    assert result.cells[0].reason == "`big` is larger than the 100.0 KB left for kept values"
