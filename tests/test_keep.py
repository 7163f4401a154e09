"""Keep across restart: what is saved, what is refused and why, and that the saved state is read only by its owner.

These run the real save and restore (cloudpickle, real files under a private directory) in one
process; the old and the new kernel are two namespaces. tests/test_keep_kernels.py does the same
across two real kernels. "A tensor on the GPU" is a meta-device tensor here: the refusal is a test
of ``tensor.device.type != "cpu"`` read from host metadata, and CPU-only torch has no other
non-CPU device; tests/gpu/test_keep_gpu.py checks a real CUDA tensor where there is one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from cudaassert_ipy.restart import keep
from cudaassert_ipy.restart.keep import KeepBudget, KeepCell
from cudaassert_ipy.restart.keep_names import is_keep_marked, read_cell

STAMP = 1700000000.0


def run_cells(*cells: tuple[str, bool]) -> tuple[dict, list[KeepCell]]:
    """Run sources in one namespace, as a notebook would; (namespace, history)."""
    ns: dict = {"__name__": "__main__"}
    history = []
    for n, (source, kept) in enumerate(cells, start=1):
        exec(compile(textwrap.dedent(source), f"<cell {n}>", "exec"), ns)
        history.append(KeepCell(n, f"id{n}", textwrap.dedent(source), kept))
    return ns, history


def restore_all(tmp_path: Path, history: list[KeepCell], key: str = "k1", stamp: float = STAMP,
                new_ns: dict | None = None) -> tuple[dict, dict[int, keep.CellOutcome], str | None]:
    """The new kernel's side: each cell in order is restored or (when not kept) run."""
    ns = {"__name__": "__main__"} if new_ns is None else new_ns
    outcomes = {}
    with keep.opened(key, stamp, ns, tmp_path) as restorer:
        for cell in history:
            outcome = restorer.restore(cell.number, cell.cell_id, cell.source)
            if outcome is not None:
                outcomes[cell.number] = outcome
            if outcome is None or not outcome.kept:
                exec(compile(cell.source, f"<replay {cell.number}>", "exec"), ns)
    return ns, outcomes, restorer.note


def test_kept_cells_come_back_equal_and_are_not_run_again(tmp_path):
    ns, history = run_cells(
        ("import pandas as pd, numpy as np, torch\nruns = []", False),
        ("runs.append('load')\ndf = pd.DataFrame({'a': range(1000), 'b': ['x'] * 1000})\n"
         "arr = np.arange(10.0)\nt = torch.arange(6).reshape(2, 3)\nvocab = {'<pad>': 0, 'cat': 1}", True),
        ("total = int(df.a.sum())", False),
    )
    result = keep.save("k1", STAMP, history, ns, directory=tmp_path)
    assert [c.kept for c in result.cells] == [True]
    assert {n.name for n in result.cells[0].names} == {"df", "arr", "t", "vocab", "runs"}
    new, outcomes, note = restore_all(tmp_path, history)
    assert note is None and outcomes[2].kept
    pd.testing.assert_frame_equal(new["df"], ns["df"])
    assert np.array_equal(new["arr"], ns["arr"]) and torch.equal(new["t"], ns["t"])
    assert new["vocab"] == ns["vocab"] and new["total"] == 499500
    assert new["runs"] == ["load"]  # restored, not appended to again
    assert not keep.keep_dir("k1", tmp_path).exists()  # deleted after restore


def test_the_kept_line_names_each_value_with_its_size_and_times(tmp_path):
    ns, history = run_cells(("import numpy as np\narr = np.zeros(250_000)", True))
    result = keep.save("k1", STAMP, history, ns, directory=tmp_path)
    _, outcomes, _ = restore_all(tmp_path, history)
    line = outcomes[1].line()
    assert line.startswith("[1] kept: `arr` 2.0 MB, `np` ") and "(saved in " in line and " s, loaded in " in line
    assert result.lines() == [result.cells[0].line()]


def test_notebook_functions_see_the_new_kernels_globals_and_classes_stay_one_class(tmp_path):
    ns, history = run_cells(
        ("scale = 2", False),
        ("class Vocab:\n    def __init__(self, words):\n        self.words = words\n"
         "    def size(self):\n        return len(self.words) * scale\n"
         "def tokenize(s):\n    return [w for w in s.split() if w in vocab.words]\n"
         "vocab = Vocab(['a', 'b'])", True),
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


@pytest.mark.parametrize(("source", "reason"), [
    ("x = torch.ones(3, device='meta')", "`x` holds a tensor on meta"),
    ("x = {'w': [torch.ones(2), torch.ones(2, device='meta')]}", "`x` holds a tensor on meta"),
    ("x = torch.nn.Linear(2, 2, device='meta')", "`x` holds parameters on meta"),
    ("x = open('/dev/null')", "`x` holds an open file (/dev/null)"),
    ("x = (i for i in range(3))", "`x` holds a generator, whose position cannot be saved"),
    ("import threading\nx = threading.Lock()", "`threading` "),
])
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


def test_a_kept_cell_that_cannot_be_saved_makes_earlier_kept_cells_it_changes_replay(tmp_path):
    ns, history = run_cells(
        ("import torch\nfeats = torch.zeros(3)", True),
        ("feats += 1\nbad = torch.ones(1, device='meta')", True),
    )
    result = keep.save("k1", STAMP, history, ns, directory=tmp_path)
    assert [c.reason for c in result.cells] == [
        "cell [2] changes `feats` later, so the saved value would already hold that change",
        "`bad` holds a tensor on meta",
    ]
    new, outcomes, _ = restore_all(tmp_path, history)
    assert not any(o.kept for o in outcomes.values()) and torch.equal(new["feats"], torch.ones(3))


@pytest.mark.parametrize(("source", "reason"), [
    ("import os\nos.environ['X'] = '1'\ny = 1", "it changes the module `os`, which restoring values cannot redo"),
    ("import numpy as np\nnp.random.seed(0)\ny = 1", "it changes the module `np`, which restoring values cannot redo"),
    ("import torch\ntorch.manual_seed(0)\ny = 1", "it changes the module `torch`, which restoring values cannot redo"),
    ("import random\nrandom.seed(0)\ny = 1", "it changes the module `random`, which restoring values cannot redo"),
    ("def set_seed(n):\n    pass\nset_seed(0)\ny = 1",
     "it does more than bind names (`set_seed(0)`), which restoring values cannot redo"),
    ("%cd /tmp\ny = 1", "it does more than bind names (`get_ipython().run_line_magic('cd', '/tmp')`), which "
                        "restoring values cannot redo"),
    ("y = (", "its code could not be read (SyntaxError: '(' was never closed (<unknown>, line 1))"),
])
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


def test_a_save_over_its_time_budget_replays_the_cell(tmp_path):
    ns, history = run_cells(("big = list(range(100_000))", True))
    result = keep.save("k1", STAMP, history, ns, KeepBudget(seconds=0.0), tmp_path)
    assert result.cells[0].reason == "`big` saving took longer than the 0 s budget"


def test_a_value_over_the_size_budget_replays_the_cell(tmp_path):
    ns, history = run_cells(("import numpy as np\nbig = np.zeros(1_000_000)", True))
    result = keep.save("k1", STAMP, history, ns, KeepBudget(max_bytes=100_000, reserve_bytes=0), tmp_path)
    assert result.cells[0].reason == "`big` is larger than the 100.0 KB left for kept values"


def test_a_disk_that_refuses_the_write_replays_the_cell(tmp_path):
    """A real OS refusal: the file size limit (RLIMIT_FSIZE) makes the write fail with EFBIG, as a full disk would."""
    code = textwrap.dedent(f"""
        import resource, signal, numpy as np
        from pathlib import Path
        from cudaassert_ipy.restart import keep
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))
        ns = {{"__name__": "__main__", "big": np.zeros(1_000_000)}}
        r = keep.save("k1", 1.0, [keep.KeepCell(2, None, "big = np.zeros(1_000_000)", True)], ns,
                      directory=Path({str(tmp_path)!r}))
        print(r.cells[0].reason)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "`big` the disk refused it (File too large)", out.stderr
    assert (keep.keep_dir("k1", tmp_path) / keep.VALUES).stat().st_size == 0  # cut back to where `big` began


def test_only_the_same_key_and_restart_stamp_restore_and_a_wrong_stamp_removes_the_values(tmp_path):
    ns, history = run_cells(("x = 1", True))
    keep.save("kernel-a", STAMP, history, ns, directory=tmp_path)
    other, outcomes, note = restore_all(tmp_path, history, key="kernel-b")
    assert outcomes == {} and note is None and "x" in other  # replayed: kernel b never sees a's values
    assert keep.keep_dir("kernel-a", tmp_path).exists()
    _, outcomes, note = restore_all(tmp_path, history, key="kernel-a", stamp=STAMP + 1)
    assert outcomes == {}
    assert note == (f"[cudaassert] The kept values in {keep.keep_dir('kernel-a', tmp_path)} were refused: they "
                    "were saved for another restart. Nothing was restored from them; the kept cells replay instead.")
    assert not keep.keep_dir("kernel-a", tmp_path).exists()


def test_values_in_a_directory_another_user_owns_or_can_write_are_refused_and_left_alone(tmp_path):
    ns, history = run_cells(("x = 1", True))
    keep.save("k1", STAMP, history, ns, directory=tmp_path)
    path = keep.keep_dir("k1", tmp_path)
    os.chmod(path, 0o770)
    _, outcomes, note = restore_all(tmp_path, history)
    assert outcomes == {} and note == (f"[cudaassert] The kept values in {path} were refused: it is writable by its "
                                       "group (mode 770). Nothing was restored from them; the kept cells replay "
                                       "instead.")
    assert path.exists()
    if os.getuid() == 0:  # as root a real other owner can be made
        os.chmod(path, 0o700)
        os.chown(path, 12345, 12345)
        _, outcomes, note = restore_all(tmp_path, history)
        assert outcomes == {} and "it is owned by uid 12345, not by you (uid 0)" in note and path.exists()


def test_a_values_file_replaced_by_a_link_is_refused(tmp_path):
    ns, history = run_cells(("x = 1", True))
    keep.save("k1", STAMP, history, ns, directory=tmp_path)
    values = keep.keep_dir("k1", tmp_path) / keep.VALUES
    target = tmp_path / "elsewhere.pickle"
    values.rename(target)
    values.symlink_to(target)
    _, outcomes, note = restore_all(tmp_path, history)
    assert outcomes == {} and note is not None and "were refused: OSError: [Errno 40]" in note


def test_expired_values_are_swept_and_never_restored(tmp_path):
    ns, history = run_cells(("x = 1", True))
    keep.save("k1", STAMP, history, ns, directory=tmp_path, expires=time.time() - 1)
    _, outcomes, note = restore_all(tmp_path, history)
    assert outcomes == {} and note is not None and "they have expired" in note
    keep.save("k2", STAMP, history, ns, directory=tmp_path, expires=time.time() + 60)
    assert keep.sweep(tmp_path) == []
    assert keep.sweep(tmp_path, now=time.time() + 120) == [keep.keep_dir("k2", tmp_path)]


def test_a_value_that_fails_to_load_replays_its_cell_and_the_others_still_restore(tmp_path):
    mod = tmp_path / "mods"
    mod.mkdir()
    (mod / "gone_mod.py").write_text("class Thing:\n    pass\n")
    sys.path.insert(0, str(mod))
    try:
        ns, history = run_cells(("a = 1", True), ("import gone_mod\nthing = gone_mod.Thing()", True), ("b = 2", True))
        keep.save("k1", STAMP, history, ns, directory=tmp_path)
    finally:
        sys.path.remove(str(mod))
        sys.modules.pop("gone_mod", None)
    (mod / "gone_mod.py").unlink()
    with keep.opened("k1", STAMP, {"__name__": "__main__"}, tmp_path) as r:
        got = [r.restore(c.number, c.cell_id, c.source) for c in history]
    assert [g.kept for g in got] == [True, False, True]
    assert got[1].reason == "`gone_mod` could not be loaded in this kernel (ModuleNotFoundError: No module named " \
                            "'gone_mod')"


def test_the_keep_marker_is_read_from_the_first_line():
    assert is_keep_marked("# cudaassert: keep\ndf = 1") and is_keep_marked("\n#cudaassert:KEEP")
    assert not is_keep_marked("df = 1\n# cudaassert: keep")


def test_names_are_read_from_the_cells_top_level_not_from_function_bodies():
    names = read_cell("import numpy as np\nfrom os import path as p\nx, (y, *z) = 1, (2, 3)\nfor i in range(2):\n"
                      "    acc = i\nwith open('f') as fh:\n    pass\ndef f():\n    inner = 1\nclass C:\n    attr = 1\n"
                      "if (w := 3):\n    v = 1\ndf['c'] = 1\nt.add_(1)\nm.to('cpu')\n"
                      "q.drop(columns=['a'], inplace=True)")
    assert names.binds == {"np", "p", "x", "y", "z", "i", "acc", "fh", "f", "C", "w", "v"}
    assert names.changes == {"df", "t", "m", "q"}
    assert names.effect is None


def test_the_plan_cells_marked_or_picked_are_kept_and_the_whole_history_is_read():
    from cudaassert_ipy.restart.cell_history import CellRecord
    from cudaassert_ipy.restart.plan import PlanCell

    records = [CellRecord(0, 1, "%load_ext cudaassert\nimport torch", None, True, 0.1),
               CellRecord(1, 2, "# cudaassert: keep\ndf = 1", "a", True, 3.0),
               CellRecord(2, 3, "vocab = 2", "b", True, 3.0),
               CellRecord(3, 4, "df = 3", "c", False, 0.1)]
    plan = [PlanCell(1, None, "import torch"), PlanCell(2, "a", "# cudaassert: keep\ndf = 1"),
            PlanCell(3, "b", "vocab = 2")]
    cells = keep.cells_for_plan(records, plan, picked={3})
    assert [(c.number, c.source, c.keep) for c in cells] == [
        (1, "import torch", False), (2, "# cudaassert: keep\ndf = 1", True), (3, "vocab = 2", True),
        (4, "df = 3", False)]  # the failed cell [4] is not replayed, but it is read: it changes `df`


def test_after_a_replay_the_slow_cells_that_bound_only_cpu_values_are_offered_for_keeping():
    ns, _ = run_cells(("import os, torch\nx = torch.ones(2)\nm = torch.nn.Linear(2, 2, device='meta')", False))
    replayed = [(2, "x = torch.ones(2)", 5.0), (3, "m = torch.nn.Linear(2, 2, device='meta')", 9.0),
                (4, "import os\nos.chdir('/')", 7.0), (5, "y = 1", 0.5), (6, "x = x + 1", 3.0)]
    assert keep.suggest(replayed, ns) == (
        "[cudaassert] Replaying [2], [6] took 8.0 s, and they bind only CPU values: keep them across the next "
        "restart with `%cudaassert setup keep 2,6` (or a first line `# cudaassert: keep`).")
    assert keep.suggest([(5, "y = 1", 0.5)], ns) is None


def test_the_report_lists_each_cell_under_one_header_and_discard_removes_unread_values(tmp_path):
    ns, history = run_cells(("x = 1", True), ("y = (i for i in [])", True))
    result = keep.save("k1", STAMP, history, ns, directory=tmp_path)
    assert result.report().splitlines() == ["[cudaassert] Kept across the restart:", "  " + result.cells[0].line(),
                                            "  [2] replayed: `y` holds a generator, whose position cannot be saved"]
    assert keep.KeepResult().report() == ""
    keep.discard("k1", tmp_path)
    assert not keep.keep_dir("k1", tmp_path).exists()
