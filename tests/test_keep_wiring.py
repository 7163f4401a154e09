"""Choosing what a restart keeps: the first-line marker, `%cudaassert setup keep`, `--no-keep`, the panel's toggles.

In-process (a real InteractiveShell with the extension loaded); the restart itself with a real
server is in tests/test_keep_server.py.
"""

from __future__ import annotations

import ipywidgets as widgets
import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output
from test_panel import diagnosis, find  # noqa: F401  (the panel's own fixture and finder)

from cudaassert_ipy.view import panel
from cudaassert_ipy.view.actions import ReplayChoice


def run(shell, code: str) -> str:
    with capture_output() as out:
        result = shell.run_cell(code, store_history=True)
    assert result.success, out.stderr
    return out.stdout


def test_setup_keep_marks_cells_and_the_listing_shows_them_beside_the_marked_one(loaded):
    shell = loaded.shell
    first = shell.execution_count  # the shared in-process shell keeps counting across tests
    run(shell, "a = 1")
    run(shell, "# cudaassert: keep\nb = 2")
    run(shell, "c = 3")
    out = run(shell, f"%cudaassert setup keep {first + 2}")
    assert loaded.history.kept == {first + 2}
    lines = out.splitlines()
    assert f"  [{first}] a = 1  (" in out
    assert not [ln for ln in lines if ln.startswith(f"  [{first}] ") and ln.endswith("keep")]
    assert next(ln for ln in lines if ln.startswith(f"  [{first + 1}] b = 2  (")).endswith(")  keep")
    assert next(ln for ln in lines if ln.startswith(f"  [{first + 2}] c = 3  (")).endswith(")  keep")
    assert "`%cudaassert setup keep 3,4` (or a first line `# cudaassert: keep`) restores those cells' values" in out
    run(shell, "%cudaassert setup keep none")
    assert loaded.history.kept == set()


def test_setup_keep_with_an_unknown_cell_says_which_cells_are_known(loaded):
    run(loaded.shell, "a = 1")
    known = ", ".join(map(str, loaded.history.known_numbers()))
    with pytest.raises(UsageError) as e:
        loaded.shell.run_line_magic("cudaassert", "setup keep 99")
    assert str(e.value) == f"`%cudaassert setup keep 99`: cell(s) 99 are not in this kernel's history (known: {known})."


def test_no_keep_goes_only_with_restart(loaded):
    with pytest.raises(UsageError) as e:
        loaded.shell.run_line_magic("cudaassert", "status --no-keep")
    assert str(e.value) == "--no-keep only goes with `%cudaassert restart`."


def test_each_setup_cell_has_a_keep_toggle_that_flips_keep(diagnosis):  # noqa: F811
    choices = [ReplayChoice(2, "df = load()", 30.0, keep=True), ReplayChoice(3, "model = Net()", 1.0)]
    root = panel.build(diagnosis, [], None, choices)
    toggles = find(root, widgets.ToggleButton, description="keep")
    assert [t.value for t in toggles] == [True, False]
    assert toggles[0].tooltip == (
        "Keep this cell's values across the restart (restored, not re-run); values that "
        "hold CUDA tensors are replayed instead"
    )
    toggles[0].value, toggles[1].value = False, True
    assert [c.keep for c in choices] == [False, True]


def test_the_replay_view_shows_a_kept_cell_as_restored_not_as_run(capsys):
    from cudaassert_ipy.view.replay_view import TextProgress, WidgetProgress

    cells = [{"number": 2, "first_line": "df = load()"}, {"number": 3, "first_line": "model = Net()"}]
    text = TextProgress(cells)
    text.kept(0, 0.5)
    with text.cell(1):
        pass
    text.cell_done(1, 0.25, None)
    assert capsys.readouterr().out.splitlines() == [
        "[cudaassert] replay [#.] 1/2: [2] df = load()",
        "[cudaassert]   ... kept: restored, not run (0.50 s)",
        "[cudaassert] replay [##] 2/2: [3] model = Net()",
        "[cudaassert]   ... ok (0.25 s)",
    ]
    widget = WidgetProgress(cells)
    widget.kept(0, 0.5)
    widget.cell_done(1, 0.25, None)
    assert widget.bar.value == 2
    assert widget.accordion.get_title(0) == "↺ [2] df = load() (0.50 s): kept, restored, not run"
    assert widget.accordion.get_title(1) == "✓ [3] model = Net() (0.25 s)"
