"""restart/replay.py, started by shell/resume.py in the restarted kernel: the setup replays inside the next cell.

"The restart" is simulated in-process (helpers/restart_story.py), so every message of the replay is
checked here quickly; the real restarts are in test_restart_server.py.
"""

from __future__ import annotations

import os

from helpers.plans import edit
from helpers.restart_story import FAILING, SETUP, FakeKernel, plan_file, restart_in_process, run_story, session_history

from cudaassert_ipy.restart import replay, startup_stub
from cudaassert_ipy.restart import request as restart
from cudaassert_ipy.restart.frontend import detect
from cudaassert_ipy.restart.plan import FrontendKind, RestartOutcome
from cudaassert_ipy.shell import extension
from cudaassert_ipy.shell.resume import last_report


def test_after_the_restart_the_next_cell_replays_the_setup_and_the_validator_catches_the_bad_label(
    restart_ext, shell, tmp_path, capsys
):
    from cudaassert_ipy.checks import ValidationIndexError, validators_enabled

    first = run_story(shell)
    shell.run_line_magic("cudaassert", "restart")
    restart_in_process(shell, tmp_path)
    assert os.environ["CUDA_LAUNCH_BLOCKING"] == "1"  # set by the stub, before any cell
    assert os.environ["CUDAASSERT_VALIDATORS"] == "1" and not validators_enabled()  # on at the first cell
    assert not list((tmp_path / "rt" / "cudaassert").glob("plan-*.json"))  # claimed: one-shot
    assert not (tmp_path / "startup" / startup_stub.STUB_NAME).exists()  # no plan pending: stub gone
    capsys.readouterr()
    result = shell.run_cell(FAILING, store_history=True)
    out = capsys.readouterr().out
    assert isinstance(result.error_in_exec, ValidationIndexError)
    assert shell.user_ns["runs"] == 1 and shell.user_ns["BLOCKING_AT_IMPORT"] == "1"
    assert validators_enabled()
    assert (
        f"[cudaassert] This kernel was restarted by cudaassert after cell [{first + 4}] failed (" in out
        and "), with CUDA_LAUNCH_BLOCKING=1 and validators on." in out
    )
    assert "[cudaassert] Replaying 3 setup cell(s) first (they took " in out
    assert f"[cudaassert] replay [#..] 1/3: [{first}] import os" in out
    assert f"[cudaassert] replay [###] 3/3: [{first + 2}] runs = globals().get('runs', 0) + 1" in out
    assert out.count("[cudaassert]   ... ok (") == 3
    assert "[cudaassert] Replayed 3 setup cell(s) in " in out and " s. Now your cell runs." in out
    assert "[cudaassert] On in this kernel:" in out
    assert "Back to normal speed: `%cudaassert restart --normal`" in out
    assert "GPU alive" in out  # the validator's diagnosis
    report = last_report(shell)
    assert report["replayed"] == 3 and report["ok"] and report["original_seconds"] > 0
    replayed = [r for r in session_history(shell) if r.replayed]
    assert [r.number for r in replayed] == [first, first + 1, first + 2]


def test_after_the_replay_the_panel_offers_the_way_back_to_normal_speed(restart_ext, shell, tmp_path):
    run_story(shell)
    shell.run_line_magic("cudaassert", "restart")
    restart_in_process(shell, tmp_path)
    shell.run_cell(FAILING, store_history=True)
    ext = extension.current(shell)
    actions = restart.actions_for(ext, ext.last, detect(shell))
    assert [a.label for a in actions] == ["Back to normal speed"]
    assert actions.replay_choices[0].first_line == "import os"


def test_a_setup_cell_that_now_fails_stops_the_replay_and_names_it(restart_ext, shell, tmp_path, capsys):
    first = shell.execution_count
    for cell in ["a = 1", "import missing_module_xyz as m\nfrom_missing = 1", "b = 2"]:
        shell.run_cell(cell, store_history=True)
    shell.run_line_magic("cudaassert", f"restart --cells {first},{first + 2}")
    plan_path = plan_file(tmp_path)
    edit(
        plan_path,
        cells=[
            {"number": first, "source": "a = 1", "duration": 0.1},
            {"number": first + 1, "source": "raise ValueError('the data moved')", "duration": 0.1},
            {"number": first + 2, "source": "b = 2", "duration": 0.1},
        ],
    )
    restart_in_process(shell, tmp_path)
    capsys.readouterr()
    result = shell.run_cell("c = 3", store_history=True)
    out = capsys.readouterr().out
    assert result.success and shell.user_ns["a"] == 1 and "b" not in shell.user_ns and shell.user_ns["c"] == 3
    assert (
        f"[cudaassert] Replay stopped at cell [{first + 1}] (2 of 3): ValueError: the data moved. Not replayed: "
        f"[{first + 2}]. Your cell runs next without them: fix that cell and run it (then the rest) yourself, or "
        "choose the cells with `%cudaassert setup` before the next restart."
    ) in out
    assert "[cudaassert]   ... failed (" in out
    assert not last_report(shell)["ok"]
    assert session_history(shell)[-1].ok  # the replayed failure is not pinned on the user's own cell


def test_in_cpu_mode_a_cell_that_asks_for_cuda_gets_the_device_hint(restart_ext, shell, tmp_path, capsys):
    shell.run_cell("x = 1", store_history=True)
    shell.run_line_magic("cudaassert", "restart --cpu")
    edit(plan_file(tmp_path), cells=[{"number": 1, "source": "raise RuntimeError('Found no NVIDIA driver; cuda')"}])
    restart_in_process(shell, tmp_path)
    assert os.environ["CUDA_VISIBLE_DEVICES"] == ""
    capsys.readouterr()
    shell.run_cell("y = 1", store_history=True)
    out = capsys.readouterr().out
    assert (
        "In CPU mode, code that asks for 'cuda' fails: use `device = 'cuda' if torch.cuda.is_available() else "
        "'cpu'`." in out
    )
    assert "CPU mode: CUDA_VISIBLE_DEVICES= hides the GPU, so everything runs on the CPU" in out


def test_running_the_setup_cells_yourself_skips_the_replay(restart_ext, shell, tmp_path, capsys):
    run_story(shell)
    shell.run_line_magic("cudaassert", "restart")
    restart_in_process(shell, tmp_path)
    capsys.readouterr()
    shell.run_cell("%load_ext cudaassert", store_history=True)  # Run All: the first cell waits
    assert "Replaying" not in capsys.readouterr().out
    shell.run_cell(SETUP[0], store_history=True)
    out = capsys.readouterr().out
    assert "[cudaassert] You are running the setup cells yourself (this cell is [" in out
    assert "] of the plan), so nothing is replayed." in out and "Replaying" not in out
    assert "BLOCKING_AT_IMPORT" in shell.user_ns and "runs" not in shell.user_ns


def test_a_normal_restart_replays_without_blocking_mode_or_validators(restart_ext, shell, tmp_path, capsys):
    from cudaassert_ipy.checks import validators_enabled

    shell.run_cell("x = 41", store_history=True)
    shell.run_line_magic("cudaassert", "restart --normal")
    restart_in_process(shell, tmp_path)
    capsys.readouterr()
    shell.run_cell("y = x + 1", store_history=True)
    out = capsys.readouterr().out
    assert shell.user_ns["y"] == 42 and not validators_enabled() and "CUDA_LAUNCH_BLOCKING" not in os.environ
    assert ", at normal speed (no blocking mode, no validators)." in out
    assert "[cudaassert] Normal speed: no blocking mode, no validators." in out


def test_a_bad_plan_is_reported_in_the_first_cell_and_nothing_replays(restart_ext, shell, tmp_path, capsys):
    shell.run_cell("x = 1", store_history=True)
    shell.run_line_magic("cudaassert", "restart")
    plan_file(tmp_path).write_text("{ edited by hand")
    restart_in_process(shell, tmp_path)
    assert extension.current(shell) is None and "CUDA_LAUNCH_BLOCKING" not in os.environ
    capsys.readouterr()
    shell.run_cell("z = 1", store_history=True)
    out = capsys.readouterr().out
    assert "is not a valid plan (Expecting property name enclosed in double quotes" in out
    assert "Nothing was replayed; the file was kept as" in out and "x" not in shell.user_ns


def test_vscode_claims_by_notebook_path_at_the_first_cell(restart_ext, shell, tmp_path, monkeypatch, capsys):
    from cudaassert_ipy.restart import frontend

    shell.user_ns["__vsc_ipynb_file__"] = "/home/me/train.ipynb"
    shell.run_cell("x = 41", store_history=True)
    assert (
        restart.request_restart(
            restart_ext,
            frontend.Frontend(
                FrontendKind.VSCODE, frontend.vscode_key("/home/me/train.ipynb"), "v3aaaa", "/home/me/train.ipynb"
            ),
        )
        is RestartOutcome.ARMED
    )
    monkeypatch.setattr(shell, "kernel", FakeKernel(), raising=False)  # a kernel, keyed otherwise than the plan
    assert not frontend.kernel_key().startswith("vsc-")
    restart_in_process(shell, tmp_path)
    assert extension.current(shell) is None  # nothing claimed at startup: the notebook path is not known yet
    assert (tmp_path / "startup" / startup_stub.STUB_NAME).exists()
    shell.user_ns["__vsc_ipynb_file__"] = "/home/me/train.ipynb"  # VS Code's silent startup code
    capsys.readouterr()
    shell.run_cell("y = x + 1", store_history=True)
    out = capsys.readouterr().out
    assert shell.user_ns["y"] == 42 and os.environ["CUDA_LAUNCH_BLOCKING"] == "1"
    assert "[cudaassert] Replayed 1 setup cell(s) in " in out
    assert extension.current(shell).history.records[-1].source == "y = x + 1"  # the cell was watched too
    assert not (tmp_path / "startup" / startup_stub.STUB_NAME).exists()


def test_a_replay_that_breaks_itself_is_one_line_and_the_cell_still_runs(
    restart_ext, shell, tmp_path, monkeypatch, capsys
):
    shell.run_cell("x = 1", store_history=True)
    shell.run_line_magic("cudaassert", "restart")
    restart_in_process(shell, tmp_path)

    def broken(*args):
        raise OSError("disk on fire")

    monkeypatch.setattr(replay.Replayer, "_replay", broken)
    capsys.readouterr()
    assert shell.run_cell("y = 2", store_history=True).success
    err = capsys.readouterr().err
    assert err.startswith(
        "[cudaassert] The replay itself failed (OSError: disk on fire); your cell runs as usual. Details: "
    )
    assert err.rstrip().endswith("resume.log") and shell.user_ns["y"] == 2


def test_validators_that_cannot_come_on_leave_a_note_and_the_replay_goes_on(
    restart_ext, shell, tmp_path, monkeypatch, capsys
):
    shell.run_cell("x = 1", store_history=True)
    shell.run_line_magic("cudaassert", "restart")
    restart_in_process(shell, tmp_path)

    def no_torch(self, on):
        raise ImportError("No module named 'torch'")

    monkeypatch.setattr(extension.Extension, "set_validators", no_torch)
    capsys.readouterr()
    shell.run_cell("y = x", store_history=True)
    out = capsys.readouterr().out
    assert (
        "[cudaassert] The validators could not be turned on (ImportError: No module named 'torch'); the "
        "environment is set."
    ) in out
    assert shell.user_ns["y"] == 1
