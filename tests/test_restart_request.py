"""restart/request.py: `%cudaassert restart`, `%cudaassert setup` and the panel's restart buttons.

In terminal IPython (a real target: the plan is armed) and with a stand-in kernel object that
records ``do_shutdown``; the server checks answer as told (the real one is tested against a real
server in test_restart_server.py).
"""

from __future__ import annotations

import json
import shutil

import pytest
from helpers.plans import mode_of, plan_for
from helpers.restart_story import FAILING, FakeKernel, plan_file, run_story
from IPython.core.error import UsageError

from cudaassert_ipy.restart import plan_files, replay, startup_stub
from cudaassert_ipy.restart import request as restart
from cudaassert_ipy.restart.frontend import Frontend, ServerRef, Verdict, detect
from cudaassert_ipy.restart.plan import FrontendKind, Mode, RestartOutcome


def test_restart_in_a_terminal_arms_the_plan_and_says_what_to_do(restart_ext, shell, tmp_path, capsys):
    first = run_story(shell)
    capsys.readouterr()
    shell.run_line_magic("cudaassert", "restart")
    out = capsys.readouterr().out
    assert (
        "[cudaassert] Restart with CUDA_LAUNCH_BLOCKING=1 and validators on; 3 setup cell(s) replay before your "
        "next cell:" in out
    )
    assert f"  [{first}] import os  (" in out and f"  [{first + 2}] runs = globals().get('runs', 0) + 1  (" in out
    assert "labels.shape" not in out
    assert out.rstrip().endswith(
        "[cudaassert] Plan armed. This IPython cannot restart itself: exit (Ctrl-D), start "
        "`ipython` again in this directory and terminal, and run a command; the setup "
        "replays first."
    )
    path = plan_file(tmp_path)
    assert mode_of(path) == 0o600 and path.name.startswith("plan-term-")
    plan = json.loads(path.read_text())
    assert plan["env"] == {"CUDA_LAUNCH_BLOCKING": "1", "CUDAASSERT_VALIDATORS": "1"} and plan["validators"]
    assert [c["number"] for c in plan["cells"]] == [first, first + 1, first + 2]
    assert plan["failing"]["number"] == first + 4 and plan["failing"]["source"] == FAILING
    assert plan["diagnosis"]["cause_id"] and plan["diagnosis"]["cell"] == first + 4
    assert plan["expires"] - plan["created"] == plan_files.PLAN_TTL
    assert (tmp_path / "startup" / startup_stub.STUB_NAME).read_text() == startup_stub.STUB_SOURCE


def test_restart_options_choose_the_environment_and_the_cells(restart_ext, shell, tmp_path):
    first = run_story(shell)
    shell.run_line_magic("cudaassert", "restart --cpu")
    assert json.loads(plan_file(tmp_path).read_text())["env"] == {
        "CUDA_LAUNCH_BLOCKING": "1",
        "CUDAASSERT_VALIDATORS": "1",
        "CUDA_VISIBLE_DEVICES": "",
    }
    shell.run_line_magic("cudaassert", "restart --normal")
    plan = json.loads(plan_file(tmp_path).read_text())
    assert plan["env"] == {} and not plan["validators"] and plan["mode"] == "normal"
    shell.run_line_magic("cudaassert", "restart --no-replay")
    assert json.loads(plan_file(tmp_path).read_text())["cells"] == []
    shell.run_line_magic("cudaassert", f"restart --cells {first + 2},{first}")
    assert [c["number"] for c in json.loads(plan_file(tmp_path).read_text())["cells"]] == [first, first + 2]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            "restart --cpu --normal",
            "`--cpu` and `--normal` do not go together: `--normal` restarts without blocking mode "
            "and validators; `--cpu` keeps both and hides the GPU.",
        ),
        (
            "restart --no-replay --cells 2",
            "`--no-replay` and `--cells` do not go together: `--no-replay` replays nothing.",
        ),
        (
            "restart --cells 2,x",
            "`%cudaassert restart --cells 2,x`: give cell numbers like --cells 2,3,5 (the n of In [n]).",
        ),
    ],
)
def test_restart_misuse_says_how_to_fix_it(restart_ext, shell, line, message):
    with pytest.raises(UsageError) as e:
        shell.run_line_magic("cudaassert", line)
    assert str(e.value) == message


def test_restart_with_unknown_cells_lists_the_known_ones(restart_ext, shell):
    with pytest.raises(
        UsageError,
        match=r"`%cudaassert restart --cells 9999`: cell\(s\) 9999 are not in this "
        r"kernel's history \(known: ",
    ):
        shell.run_line_magic("cudaassert", "restart --cells 9999")


def test_a_read_only_profile_restarts_nothing_and_leaves_no_plan(restart_ext, shell, tmp_path, monkeypatch, capsys):
    (tmp_path / "ro").mkdir()
    monkeypatch.setattr(shell.profile_dir, "startup_dir", str(tmp_path / "ro" / "startup"))  # IPython makes it
    shutil.rmtree(tmp_path / "ro" / "startup")  # (IPython put a README there)
    (tmp_path / "ro" / "startup").write_text("a file where the startup directory should be")
    run_story(shell)
    capsys.readouterr()
    assert restart.request_restart(restart_ext, detect(shell)) is RestartOutcome.FAILED
    assert "[cudaassert] Cannot write the startup file" in capsys.readouterr().out
    assert not list((tmp_path / "rt" / "cudaassert").glob("plan-*.json"))


def test_an_unwritable_runtime_dir_restarts_nothing(restart_ext, shell, tmp_path, monkeypatch, capsys):
    (tmp_path / "rtfile").write_text("")
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "rtfile"))
    run_story(shell)
    capsys.readouterr()
    assert restart.request_restart(restart_ext, detect(shell)) is RestartOutcome.FAILED
    assert (
        f"[cudaassert] Cannot write the resume plan into {tmp_path / 'rtfile' / 'cudaassert'}"
        in capsys.readouterr().out
    )
    assert not (tmp_path / "startup" / startup_stub.STUB_NAME).exists()


# -- the buttons and the server path (a stand-in kernel object records do_shutdown) --------------------
class FakeButton:
    description, tooltip, disabled = "Restart & replay setup", "", False


def server_frontend(key="kid-1", runtime_file="/nonexistent/jpserver-1.json"):
    return Frontend(
        FrontendKind.SERVER, key, key, None, ServerRef("http://127.0.0.1:9/", runtime_file), "http://127.0.0.1:9/"
    )


def answers(verdict, why=""):
    """A server check that answers ``verdict`` (the real one is tested against a real server)."""
    return lambda server, kid: (Verdict(verdict), why)


def test_the_button_writes_the_plan_then_shows_restarting_then_shuts_down(restart_ext, shell, tmp_path, monkeypatch):
    kernel = FakeKernel()
    monkeypatch.setattr(shell, "kernel", kernel, raising=False)
    run_story(shell)
    actions = restart.actions_for(restart_ext, restart_ext.last, server_frontend(), checker=answers("ok"))
    assert [a.key for a in actions] == ["restart_replay", "restart_cpu"]
    assert [a.label for a in actions] == ["Restart & replay setup", "Restart on CPU"]
    assert all(a.enabled for a in actions)
    choices = actions.replay_choices
    assert [c.first_line for c in choices] == [
        "import os",
        "from fake_cuda_session import make_batch, cross_entropy",
        "runs = globals().get('runs', 0) + 1",
    ]
    choices[1].selected = False  # the panel's checkbox
    button = FakeButton()
    actions[0].callback(button)
    assert kernel.calls == [("do_shutdown", True)]
    assert (button.description, button.disabled) == ("Restarting…", True)
    assert button.tooltip.endswith(
        "[cudaassert] Restarting the kernel now; it comes back in a few seconds with the "
        f"same id. Then run a cell (the failing one [{restart_ext.last.cell}]): the setup "
        "replays first, inside that cell."
    )
    plan = json.loads((tmp_path / "rt" / "cudaassert" / "plan-kid-1.json").read_text())
    assert [c["first_line"] for c in plan["cells"]] == ["import os", "runs = globals().get('runs', 0) + 1"]


def test_a_shutdown_asked_from_another_thread_goes_through_the_kernels_loop(monkeypatch, restart_ext, shell):
    import threading

    kernel = FakeKernel()
    monkeypatch.setattr(shell, "kernel", kernel, raising=False)
    t = threading.Thread(target=restart._shutdown, args=(shell,))
    t.start()
    t.join()
    assert kernel.calls == [("add_callback", "do_shutdown", (True,))]


def test_a_server_that_does_not_know_the_kernel_gets_an_armed_plan_and_no_shutdown(restart_ext, shell, monkeypatch):
    kernel = FakeKernel()
    monkeypatch.setattr(shell, "kernel", kernel, raising=False)
    button = FakeButton()
    assert (
        restart.request_restart(restart_ext, server_frontend(), button=button, checker=answers("unknown", "HTTP 404"))
        is RestartOutcome.ARMED
    )
    assert kernel.calls == []
    assert (button.description, button.disabled) == ("Armed: restart the kernel", True)
    assert button.tooltip.endswith(
        "[cudaassert] The Jupyter server at http://127.0.0.1:9/ does not know this "
        "kernel's id, so it would not restart it. Nothing was restarted. The plan is kept "
        "for 60 min: restart the kernel from your frontend, then run a cell."
    )


@pytest.mark.parametrize(
    ("verdict", "why", "text"),
    [
        (
            "refused",
            "HTTP 403",
            "[cudaassert] The Jupyter server at http://127.0.0.1:9/ refused the token in its runtime "
            "file (HTTP 403), so this kernel's id could not be confirmed; restarting anyway: the "
            "server that launched this kernel restarts it when it exits.",
        ),
        (
            "unreachable",
            "Connection refused",
            "[cudaassert] The Jupyter server at http://127.0.0.1:9/ did not answer "
            "(Connection refused), so this kernel's id could not be confirmed; "
            "restarting anyway: the server that launched this kernel restarts it when "
            "it exits.",
        ),
    ],
)
def test_a_server_that_cannot_confirm_still_restarts_its_own_kernel(
    restart_ext, shell, monkeypatch, capsys, verdict, why, text
):
    kernel = FakeKernel()
    monkeypatch.setattr(shell, "kernel", kernel, raising=False)
    outcome = restart.request_restart(restart_ext, server_frontend(), checker=answers(verdict, why))
    assert outcome is RestartOutcome.RESTARTING
    assert text in capsys.readouterr().out and kernel.calls == [("do_shutdown", True)]


@pytest.mark.parametrize(
    ("kind", "detail", "text"),
    [
        (
            "vscode",
            "VS Code",
            "[cudaassert] Plan armed. VS Code does not restart this kernel by itself: press Restart in "
            "the notebook toolbar, then run a cell; the setup replays first, inside that cell.",
        ),
        (
            "kernel",
            "jpserver-1.json in /rt",
            "[cudaassert] No Jupyter server was found for this kernel (looked for "
            "jpserver-1.json in /rt), so it cannot restart itself. The plan is kept for "
            "60 min: restart the kernel from your frontend, then run a cell; the setup "
            "replays first, inside that cell.",
        ),
        (
            "headless",
            "KAGGLE_KERNEL_RUN_TYPE=Batch",
            "[cudaassert] This run has no interactive frontend "
            "(KAGGLE_KERNEL_RUN_TYPE=Batch), so nothing here can restart the "
            "kernel. The plan is kept for 60 min: restart this kernel and run a "
            "cell to replay the setup, or re-run the notebook with "
            "CUDA_LAUNCH_BLOCKING=1 and CUDAASSERT_VALIDATORS=1 in its "
            "environment.",
        ),
    ],
)
def test_frontends_that_do_not_restart_by_themselves_get_an_armed_plan(
    restart_ext, shell, monkeypatch, capsys, kind, detail, text
):
    kernel = FakeKernel()
    monkeypatch.setattr(shell, "kernel", kernel, raising=False)
    frontend = Frontend(FrontendKind(kind), "k-" + kind, detail=detail)
    assert restart.request_restart(restart_ext, frontend) is RestartOutcome.ARMED
    assert capsys.readouterr().out.rstrip().endswith(text) and kernel.calls == []


def test_every_frontend_kind_has_its_words():
    # the server restarts its kernel and says RESTARTING; every other kind says what the user does next
    for kind in FrontendKind:
        restarts_itself = Frontend(kind, "k").restarts_itself
        assert restarts_itself != (kind in restart.ARMED), kind
    assert all(isinstance(kind, FrontendKind) for kind in restart.ARMED)


def test_headless_runs_get_disabled_buttons_that_say_why(restart_ext, shell, monkeypatch):
    run_story(shell)
    actions = restart.actions_for(
        restart_ext, restart_ext.last, Frontend(FrontendKind.HEADLESS, "k", detail="launched by papermill")
    )
    assert all(not a.enabled for a in actions)
    assert actions[0].disabled_reason.startswith(
        "[cudaassert] This run has no interactive frontend (launched by papermill)"
    )


def test_no_buttons_while_the_gpu_is_alive_and_no_debug_mode_is_on(restart_ext, shell):
    shell.run_cell("x = 1", store_history=True)
    fe = detect(shell)
    actions = restart.actions_for(restart_ext, None, fe)
    assert actions == [] and actions.replay_choices == []


def test_an_empty_plan_says_the_kernel_restarts_empty(restart_ext, shell, capsys):
    shell.run_line_magic("cudaassert", "restart --no-replay")
    assert "replay before your next cell:\n  (no cells: the kernel restarts empty)\n" in capsys.readouterr().out


def test_a_button_whose_restart_failed_says_so_in_its_tooltip(restart_ext, shell, tmp_path, monkeypatch):
    (tmp_path / "rtfile").write_text("")
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "rtfile"))
    button = FakeButton()
    assert restart.request_restart(restart_ext, detect(shell), button=button) is RestartOutcome.FAILED
    assert (button.description, button.disabled) == ("Restart failed", True)
    assert "[cudaassert] Cannot write the resume plan into" in button.tooltip


def test_the_setup_listing_names_the_failing_cell_or_says_none(restart_ext, shell, capsys):
    shell.run_line_magic("cudaassert", "setup")
    assert "  (none)\n" in capsys.readouterr().out
    first = run_story(shell)
    capsys.readouterr()
    shell.run_line_magic("cudaassert", "setup show")
    assert (
        f"[cudaassert] Setup cells a restart replays (default: cells that succeeded before cell [{first + 4}]):"
        in capsys.readouterr().out
    )


def test_the_buttons_tooltips_say_what_a_click_does(restart_ext, shell, monkeypatch):
    run_story(shell)
    replay_tip, cpu_tip = (a.tooltip for a in restart.actions_for(restart_ext, restart_ext.last, server_frontend()))
    assert replay_tip == (
        "Restart the kernel with CUDA_LAUNCH_BLOCKING=1 and validators on; the 3 ticked setup "
        "cell(s) replay when you run your next cell."
    )
    assert cpu_tip == (
        "Restart with the GPU hidden (CUDA_VISIBLE_DEVICES=) and validators on; the 3 ticked setup "
        "cell(s) replay on the CPU."
    )
    restart_ext.resumed = replay.Resumed(plan_for("k1", mode=Mode.DEBUG))
    restart_ext.state.reset()
    (normal,) = restart.actions_for(restart_ext, None, server_frontend())
    assert normal.tooltip == ("Restart without blocking mode and validators; the 3 ticked setup cell(s) replay.")
