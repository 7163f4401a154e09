"""Cell history: what ran, and which cells a restart replays by default, by mark, or by choice."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError

from cudaassert_ipy.restart.cell_history import CellHistory, is_display_only, parse_cell_numbers, replayable_source
from cudaassert_ipy.restart.plan import PlanCell
from cudaassert_ipy.shell.cell_watcher import CellRunOutcome


def outcome(source, number, ok=True, duration=0.5, cell_id=None):
    error = None if ok else IndexError("Target 195 is out of bounds.")
    return CellRunOutcome(source, number, cell_id, error, duration, None)


def history_of(*cells):
    h = CellHistory()
    for n, cell in enumerate(cells, 1):
        source, ok = cell if isinstance(cell, tuple) else (cell, True)
        h.record(outcome(source, n, ok))
    return h


def numbers(records):
    return [r.number for r in records]


# -- what a cell is -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "source",
    [
        "df.head()",
        "print(x)",
        "model",
        "labels.shape",
        "x[0:3]",
        "display(model)",
        "!nvidia-smi",
        "%whos",
        "torch.cuda.is_available()",
        "f'{x} and {y}'",
        "len(train_ds), len(val_ds)",
        "# just a comment\n",
        "",
    ],
)
def test_cells_that_only_show_something_are_display_only(source):
    assert is_display_only(source)


@pytest.mark.parametrize(
    "source",
    [
        "x = 1",
        "import torch",
        "model.train()",
        "torch.manual_seed(0)",
        "!pip install timm",
        "%matplotlib inline",
        "%env CUDA_VISIBLE_DEVICES=1",
        "for b in loader:\n    step(b)",
        "print(train())",
        "def f():\n    pass",
        "x = = 1",
        "%time x = load()",
    ],
)
def test_cells_that_change_state_or_are_unknown_are_setup(source):
    assert not is_display_only(source)


def test_the_extensions_own_magic_lines_are_never_replayed():
    source = "%load_ext cudaassert\nimport torch\n%cudaassert restart --cpu\nx = 1\n"
    assert replayable_source(source) == "import torch\nx = 1\n"
    assert replayable_source("%%cuda_debug\nloss = f(x)\n") == ""
    assert replayable_source("%reload_ext cudaassert_ipy\n") == ""


def test_cell_numbers_accept_lists_and_ranges_and_name_the_bad_part():
    assert parse_cell_numbers("2,3,5") == [2, 3, 5]
    assert parse_cell_numbers("2-4, 8") == [2, 3, 4, 8]
    with pytest.raises(ValueError, match="x"):
        parse_cell_numbers("2,x")
    with pytest.raises(ValueError):
        parse_cell_numbers(",")


# -- the default plan ------------------------------------------------------------------------------
def test_default_plan_is_the_cells_that_succeeded_before_the_failing_one_in_order():
    h = history_of(
        "%load_ext cudaassert",
        "import torch",
        ("x = undefined", False),
        "x = 1",
        "labels.shape",
        "model = make()",
        ("train(model)", False),
        "helper = 2",
    )
    failing = h.failing(7)
    assert failing.number == 7 and not failing.ok
    assert numbers(h.default_plan(failing)) == [2, 4, 6]


def test_without_a_failing_cell_every_successful_setup_cell_counts():
    h = history_of("import torch", ("boom()", False), "x = 1")
    assert numbers(h.default_plan(None)) == [1, 3]


def test_marks_force_a_cell_in_or_keep_it_out():
    h = history_of(
        "# cudaassert: setup\nprint('needed for its side effect')",
        "# cudaassert: skip\nbig = load()",
        "x = 1",
        ("train()", False),
        "#cudaassert:setup\nlate = 1",
    )
    assert numbers(h.default_plan(h.failing(4))) == [1, 3, 5]


def test_a_record_shows_its_first_code_line_and_keeps_what_failed():
    h = history_of(
        "# cudaassert: setup\n# build it\n\n  model = Net()  \nmore()", ("loss = f(x)", False), "# only a note"
    )
    assert h.records[0].first_line == "model = Net()"
    assert h.records[2].first_line == "# only a note"
    assert h.records[0].mark == "setup"
    assert h.records[1].error == "IndexError: Target 195 is out of bounds."
    assert h.records[1].as_plan_cell().number == 2


def test_pinned_cells_replace_the_default_and_survive_unknown_numbers():
    h = history_of("a = 1", "b = 2", "c = 3", ("d()", False))
    h.pinned = [3, 1, 99]
    assert numbers(h.plan(h.failing(4))) == [3, 1]
    h.pinned = None
    assert numbers(h.plan(h.failing(4))) == [1, 2, 3]


def test_explicit_numbers_resolve_in_execution_order_and_unknown_ones_are_reported():
    h = history_of("a = 1", "b = 2", "c = 3")
    assert numbers(h.resolve([3, 1])) == [1, 3]
    with pytest.raises(KeyError) as e:
        h.resolve([2, 7, 9])
    assert e.value.args[0] == [7, 9]


def test_replayed_cells_keep_the_number_and_id_they_had_before_the_restart():
    h = CellHistory()
    with h.replaying(PlanCell(4, "abc", "x = 1")):
        h.record(outcome("x = 1", None))
    h.record(outcome("y = 2", 1, cell_id="def"))
    h.record(outcome("nested tool cell", None))  # a run_cell of some tool: not the user's
    assert [(r.number, r.cell_id, r.replayed) for r in h.records] == [(4, "abc", True), (1, "def", False)]
    assert numbers(h.default_plan(None)) == [4, 1]


def test_choices_list_each_planned_cell_ticked_with_its_duration():
    h = history_of("import torch", "for epoch in range(10):\n    train()", ("loss()", False))
    choices = h.choices(h.failing(3))
    assert [(c.number, c.first_line, c.duration, c.selected) for c in choices] == [
        (1, "import torch", 0.5, True),
        (2, "for epoch in range(10):", 0.5, True),
    ]


# -- in a shell, through the extension -----------------------------------------------------------
def test_the_loaded_extension_records_every_cell_with_outcome_and_duration(loaded, shell):
    shell.run_cell("import time\ntime.sleep(0.05)", store_history=True)
    shell.run_cell("1/0", store_history=True)
    shell.run_cell("labels = [1, 2]", store_history=True)
    recs = [r for r in loaded.history.records if "load_ext" not in r.source]
    assert [(r.source.splitlines()[0], r.ok) for r in recs] == [
        ("import time", True),
        ("1/0", False),
        ("labels = [1, 2]", True),
    ]
    assert recs[0].duration >= 0.05
    assert recs[1].error == "ZeroDivisionError: division by zero"


def test_setup_magic_shows_chooses_and_resets_the_cells(loaded, shell, capsys):
    n = shell.execution_count  # the shell is shared between tests: numbers are relative
    shell.run_cell("import os", store_history=True)
    shell.run_cell("x = 1", store_history=True)
    shell.run_cell("x", store_history=True)
    capsys.readouterr()
    shell.run_line_magic("cudaassert", "setup")
    out = capsys.readouterr().out
    assert "[cudaassert] Setup cells a restart replays (default: every cell that succeeded):" in out
    assert f"  [{n}] import os  (" in out and f"  [{n + 1}] x = 1  (" in out and f"[{n + 2}]" not in out
    assert "Choose with `%cudaassert setup 2,3,5` (or 2-5), back to the default with `%cudaassert setup auto`" in out
    shell.run_line_magic("cudaassert", f"setup {n + 1}")
    out = capsys.readouterr().out
    assert "(your choice, `%cudaassert setup`):" in out and "import os" not in out
    shell.run_line_magic("cudaassert", "setup auto")
    assert f"[{n}] import os" in capsys.readouterr().out
    assert loaded.history.pinned is None


def test_setup_magic_rejects_bad_and_unknown_numbers_with_the_fix(loaded, shell):
    n = shell.execution_count
    shell.run_cell("x = 1", store_history=True)
    with pytest.raises(UsageError, match=r"give cell numbers like 2,3,5 or 2-5, or `auto`, or `show`"):
        shell.run_line_magic("cudaassert", "setup two")
    with pytest.raises(
        UsageError,
        match=rf"`%cudaassert setup {n},{n + 40}`: cell\(s\) {n + 40} are not in this "
        rf"kernel's history \(known: .*{n}\)",
    ):
        shell.run_line_magic("cudaassert", f"setup {n},{n + 40}")


def test_unload_removes_the_history_listener(loaded, shell):
    from cudaassert_ipy.shell import extension

    watcher = loaded.watcher
    assert loaded.history.record in watcher.listeners
    extension.unload(shell)
    assert loaded.history.record not in watcher.listeners


def test_the_cell_that_loads_the_extension_is_in_the_history_too(shell):
    shell.config.CudaAssert.tap = False
    number = shell.execution_count
    shell.run_cell("%load_ext cudaassert\nimport os\nsetup_done = True", store_history=True)
    from cudaassert_ipy.shell import extension

    rec = extension.current(shell).history.records[0]
    assert (rec.number, rec.ok, rec.replayed) == (number, True, False)
    assert rec.as_plan_cell().source == "import os\nsetup_done = True"
    assert [r.number for r in extension.current(shell).history.default_plan(None)] == [number]
