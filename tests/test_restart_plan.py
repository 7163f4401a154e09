"""The resume plan in one process: the file on disk, the startup stub, the restart and the replay.

- The plan file and the stub: modes, ownership, expiry, bad files, unwritable places. The tests
  run as root, and root writes into a chmod-0500 directory anyway, so "read-only" is simulated
  with a path whose parent is a regular file (``ENOTDIR`` for everyone, root included).
- ``%cudaassert restart`` and the buttons, in terminal IPython (a real target: the plan is armed)
  and with a stand-in kernel object that records ``do_shutdown``.
- The replay: "the restart" is simulated in-process (unload, fresh namespace, writer gone, then
  the stub's own file runs), so every message of the replay is checked here quickly; the real
  restarts are in test_restart_server.py.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
from dataclasses import replace

import pytest
from helpers import ROOT
from IPython.core.error import UsageError

from cudaassert_ipy.restart import plan_files as resume_plan
from cudaassert_ipy.restart import replay, startup_stub
from cudaassert_ipy.restart import request as restart
from cudaassert_ipy.restart.frontend import Frontend, ServerRef, Verdict, detect
from cudaassert_ipy.restart.plan import PLAN_VERSION, FrontendKind, Mode, Outcome, PlanCell, ResumePlan
from cudaassert_ipy.restart.plan_files import PlanError, claim, has_plan_files, pending_keys, write_plan
from cudaassert_ipy.shell import extension
from cudaassert_ipy.shell.resume import last_report


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def plan_for(key: str, **extra) -> ResumePlan:
    now = time.time()
    fields = {"mode": Mode.DEBUG, "cells": (PlanCell(2, None, "x = 1", 0.1),), "env": (("A", "1"),),
              "created": now, "expires": now + 60, **extra}
    return ResumePlan(key=key, **fields)


def edit(path, **fields) -> None:
    """Change fields of a written plan in place (its mode stays 0600)."""
    plan = json.loads(path.read_text())
    plan.update(fields)
    path.write_text(json.dumps(plan, indent=1))


def written(d, key="k1", plan=None, **extra):
    """A plan whose writer is gone (as after a restart)."""
    path = write_plan(plan or plan_for(key, **extra), d)
    edit(path, writer_pid=dead_pid())
    return path


def mode_of(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def d(tmp_path):
    return tmp_path / "rt" / "cudaassert"


# -- writing ----------------------------------------------------------------------------------------
def test_a_plan_is_written_0600_in_a_0700_directory_with_its_writer_and_version(d):
    path = write_plan(plan_for("k1"), d)
    assert path == d / "plan-k1.json"
    assert mode_of(d) == 0o700 and mode_of(path) == 0o600
    plan = json.loads(path.read_text())
    assert plan["writer_pid"] == os.getpid() and plan["version"] == PLAN_VERSION == 2
    assert plan["writer_start"] == resume_plan.process_start(os.getpid()) is not None
    assert not [p for p in d.iterdir() if p.name.endswith(".tmp")]


def test_writing_again_replaces_the_plan_atomically(d):
    write_plan(plan_for("k1", mode=Mode.DEBUG), d)
    write_plan(plan_for("k1", mode=Mode.CPU), d)
    assert json.loads((d / "plan-k1.json").read_text())["mode"] == "cpu"
    assert sorted(p.name for p in d.iterdir() if not p.name.startswith(".lock")) == ["plan-k1.json"]


def test_an_unwritable_plan_directory_is_a_clear_error(tmp_path):
    blocker = tmp_path / "runtime"
    blocker.write_text("a file where the runtime directory should be")
    with pytest.raises(PlanError) as e:
        write_plan(plan_for("k1"), blocker / "cudaassert")
    assert str(e.value).startswith(f"[cudaassert] Cannot write the resume plan into {blocker / 'cudaassert'} (")
    assert str(e.value).endswith("). Nothing was restarted.")


def test_a_group_writable_plan_directory_is_not_written_into(d):
    d.mkdir(parents=True)
    os.chmod(d, 0o777)
    with pytest.raises(PlanError, match=r"it is writable by others \(mode 777\)"):
        write_plan(plan_for("k1"), d)


def test_a_key_that_could_escape_the_directory_is_refused(d):
    with pytest.raises(PlanError, match=r"bad key '\.\./x'"):
        write_plan(plan_for("../x"), d)


# -- claiming ---------------------------------------------------------------------------------------
def test_a_plan_is_claimed_once_and_is_gone_afterwards(d):
    written(d)
    first = claim("k1", d)
    assert first.plan is not None and first.plan.cells[0].source == "x = 1" and first.notes == []
    assert claim("k1", d).plan is None
    assert not has_plan_files(d)


def test_another_kernels_plan_is_never_taken(d):
    written(d, "kernel-a")
    assert claim("kernel-b", d).plan is None
    assert (d / "plan-kernel-a.json").exists()
    assert claim("kernel-a", d).plan is not None


def test_a_plan_whose_writer_still_runs_is_left_for_its_restart(d):
    write_plan(plan_for("k1"), d)  # written by this very (live) process
    c = claim("k1", d)
    assert c.plan is None
    assert c.notes == [f"[cudaassert] A resume plan for this kernel was written by process {os.getpid()}, which is "
                       "still running; it was left for that restart."]
    assert (d / "plan-k1.json").exists()


def test_a_reused_pid_with_another_start_time_counts_as_gone(d):
    path = write_plan(plan_for("k1"), d)
    edit(path, writer_start="1")  # our pid, but a process that started at another time
    assert claim("k1", d).plan is not None


def test_an_expired_plan_is_removed_and_replays_nothing(d):
    path = written(d, created=time.time() - 7200, expires=time.time() - 3600)
    c = claim("k1", d)
    assert c.plan is None and not path.exists()
    assert len(c.notes) == 1
    assert c.notes[0].startswith("[cudaassert] A resume plan from ")
    assert " expired at " in c.notes[0]
    assert c.notes[0].endswith("and was removed; nothing was replayed. Run `%cudaassert restart` again if you still "
                               "want the replay.")


def test_a_plan_edited_into_invalid_json_is_kept_aside_not_lost(d):
    path = written(d)
    path.write_text('{"key": "k1", "cells": [')
    c = claim("k1", d)
    kept = d / "plan-k1.json.invalid"
    assert c.plan is None and not path.exists() and kept.read_text() == '{"key": "k1", "cells": ['
    assert c.notes == [f"[cudaassert] The resume plan {path} is not a valid plan (Expecting value: line 1 column 25 "
                       f"(char 24)). Nothing was replayed; the file was kept as {kept}."]
    path.write_text("[]")
    assert f"kept as {kept}-" in claim("k1", d).notes[0]  # a second bad file does not overwrite the first


@pytest.mark.parametrize(("fields", "why"), [
    ({"version": 7}, "version 7, expected 2"),
    ({"version": 1}, "version 1, expected 2"),  # a plan written before the typed schema
    ({"mode": "turbo"}, "'mode' is 'turbo', not one of debug, cpu, normal"),
    ({"failing_batch": ["train_loader", ["3"]]}, "'failing_batch' is not [loader name, [dataset indices]]"),
    ({"key": "other"}, "it is for 'other', not 'k1'"),
    ({"cells": "x = 1"}, "'cells' is not a list of cells with a 'source'"),
    ({"env": {"A": 1}}, "'env' is not an object of strings"),
    ({"expires": None}, "'expires' is missing"),
])
def test_a_plan_with_the_wrong_shape_is_named_and_kept(d, fields, why):
    edit(written(d), **fields)
    c = claim("k1", d)
    assert c.plan is None and f"is not a valid plan ({why})" in c.notes[0]
    assert (d / "plan-k1.json.invalid").exists()


def test_a_group_writable_plan_is_refused_and_left_alone(d):
    path = written(d)
    os.chmod(path, 0o660)
    c = claim("k1", d)
    assert c.plan is None and path.exists()
    assert c.notes == [f"[cudaassert] The resume plan {path} was refused: it is writable by its group (mode 660). "
                       "A plan holds code that would run in this kernel, so only a file owned by you and writable by "
                       "nobody else is used. Nothing was replayed; the file was left as it is."]


def test_a_plan_owned_by_someone_else_is_refused(d):
    path = written(d)
    os.chown(path, 65534, 65534)
    c = claim("k1", d)
    assert c.plan is None and path.exists()
    assert f"it is owned by uid 65534, not by you (uid {os.getuid()})" in c.notes[0]


def test_a_world_writable_plan_directory_is_refused(d):
    written(d)
    os.chmod(d, 0o777)
    c = claim("k1", d)
    assert c.plan is None and f"The resume plan {d} was refused: it is writable by others (mode 777)" in c.notes[0]


def test_a_symlinked_plan_is_refused(d, tmp_path):
    target = written(d, "elsewhere")
    os.symlink(target, d / "plan-k1.json")
    c = claim("k1", d)
    assert c.plan is None and "was refused: it is a symbolic link, not a file" in c.notes[0]


def test_pending_keys_keep_broken_plans_for_a_while_and_remove_expired_ones(d):
    written(d, "a")
    written(d, "b", expires=time.time() - 1)
    for key in "cd":
        (d / f"plan-{key}.json").write_text("nope")  # broken by hand: its kernel has to report it
        os.chmod(d / f"plan-{key}.json", 0o600)
    old = time.time() - resume_plan.PLAN_TTL - 1
    os.utime(d / "plan-d.json", (old, old))
    written(d, "e")
    os.chmod(d / "plan-e.json", 0o666)  # not safely ours: never claimable, so not pending
    assert pending_keys(d) == ["a", "c"]
    assert not (d / "plan-b.json").exists() and (d / "plan-c.json").exists() and (d / "plan-d.json").exists()


def test_has_plan_files_is_a_listing_and_false_without_a_directory(d):
    assert not has_plan_files(d)
    written(d)
    assert has_plan_files(d)


def test_the_log_is_private_and_bounded(d, monkeypatch):
    d.mkdir(parents=True)
    monkeypatch.setattr(resume_plan, "LOG_MAX", 1000)
    for i in range(100):
        resume_plan.log(f"line {i:03d} " + "x" * 40, d)
    log = d / "resume.log"
    assert mode_of(log) == 0o600
    assert log.stat().st_size < 1200 and "line 099" in log.read_text() and "line 000" not in log.read_text()


# -- the startup stub -----------------------------------------------------------------------------
class Profile:
    def __init__(self, startup_dir):
        self.startup_dir = str(startup_dir)


class FakeShell:
    def __init__(self, startup_dir):
        self.profile_dir = Profile(startup_dir)


def test_the_stub_is_written_once_and_removed_only_when_no_plan_is_pending(d, tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(d.parent))
    shell = FakeShell(tmp_path / "profile" / "startup")
    path = startup_stub.ensure_stub(shell)
    assert path.name == "00-cudaassert-resume.py" and path.read_text() == startup_stub.STUB_SOURCE
    assert startup_stub.ensure_stub(shell) == path
    written(d)
    assert not startup_stub.remove_if_idle(shell) and path.exists()
    claim("k1", d)
    assert startup_stub.remove_if_idle(shell) and not path.exists()
    assert not startup_stub.remove_if_idle(shell)


def test_a_foreign_file_with_the_stubs_name_is_left_alone(d, tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(d.parent))
    shell = FakeShell(tmp_path / "startup")
    (tmp_path / "startup").mkdir()
    (tmp_path / "startup" / startup_stub.STUB_NAME).write_text("print('mine')\n")
    assert not startup_stub.remove_if_idle(shell)


def test_an_unwritable_profile_is_a_clear_error(tmp_path):
    (tmp_path / "profile").write_text("a file where the profile directory should be")
    with pytest.raises(startup_stub.StubError) as e:
        startup_stub.ensure_stub(FakeShell(tmp_path / "profile" / "startup"))
    path = tmp_path / "profile" / "startup" / startup_stub.STUB_NAME
    assert str(e.value).startswith(f"[cudaassert] Cannot write the startup file {path} (")
    assert str(e.value).endswith("), so a restarted kernel could not replay your setup. Nothing was restarted. Make "
                                 "the IPython profile directory writable (or start Jupyter with IPYTHONDIR set to a "
                                 "writable directory), or restart by hand and re-run your setup cells.")


STUB_PROBE = r"""
import os, sys, time, io, contextlib
ns = {"get_ipython": lambda: None}
out = io.StringIO()
t0 = time.perf_counter()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
    exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), ns)
ms = (time.perf_counter() - t0) * 1000
print(ms, "cudaassert_ipy.shell.resume" in sys.modules, "torch" in sys.modules, "cudaassert_ipy" in sys.modules,
      repr(out.getvalue()), sorted(k for k in ns if not k.startswith("__") and k != "get_ipython"))
"""


def run_stub(tmp_path, runtime):
    stub = tmp_path / startup_stub.STUB_NAME
    stub.write_text(startup_stub.STUB_SOURCE)
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(runtime), "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", STUB_PROBE, str(stub)], env=env, capture_output=True, text=True,
                         timeout=60, check=True).stdout.split(" ", 5)
    return float(out[0]), out[1] == "True", out[2] == "True", out[3] == "True", out[4], out[5].strip()


def test_without_a_plan_the_stub_costs_a_listing_and_imports_nothing_heavy(tmp_path):
    ms, replay_loaded, torch_loaded, ours_loaded, printed, names = run_stub(tmp_path, tmp_path / "rt")
    assert not replay_loaded and not torch_loaded and not ours_loaded
    assert printed == "''" and names == "[]"  # prints nothing, leaves no names behind
    assert ms < 200  # mostly importing jupyter_core, which a kernel has done before its startup files


def test_a_stub_that_fails_neither_raises_nor_prints_and_logs_instead(tmp_path):
    runtime = tmp_path / "rt"
    written(runtime / "cudaassert", "k1")  # a plan where plan_dir() says, so the stub goes on; then it fails
    _, replay_loaded, _, _, printed, names = run_stub(tmp_path, runtime)
    assert replay_loaded and printed == "''" and names == "[]"
    assert "startup stub failed: AttributeError(" in (runtime / "cudaassert" / "resume.log").read_text()


# == in one process: %cudaassert restart, the buttons, and the replay the stub starts =============
# Terminal IPython is a real target (plan armed, replayed after a manual restart). "The restart" is
# simulated in-process: unload, forget the namespace, mark the writer gone, and run the stub's file.

SETUP = [
    "import os\nBLOCKING_AT_IMPORT = os.environ.get('CUDA_LAUNCH_BLOCKING')\nimport torch",
    "from fake_cuda_session import make_batch, cross_entropy\nlogits, labels = make_batch()",
    "runs = globals().get('runs', 0) + 1",
    "labels.shape",
]
FAILING = "loss = cross_entropy(logits, labels)"


@pytest.fixture
def session(loaded, shell, tmp_path, monkeypatch):
    """The extension loaded in a shell whose runtime and profile directories are temporary."""
    saved_env = dict(os.environ)
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "rt"))
    monkeypatch.setenv("CUDAASSERT_TEST_PRETEND_GPU", "1")
    monkeypatch.setattr(shell.profile_dir, "startup_dir", str(tmp_path / "startup"))
    yield loaded
    for event in ("pre_run_cell", "post_run_cell"):  # a late claim a test left waiting for its first cell
        for cb in list(shell.events.callbacks[event]):
            if type(getattr(cb, "__self__", None)).__module__ == "cudaassert_ipy.shell.resume":
                shell.events.unregister(event, cb)
    os.environ.clear()
    os.environ.update(saved_env)


def run_story(shell):
    first = shell.execution_count
    for cell in SETUP:
        assert shell.run_cell(cell, store_history=True).success
    assert not shell.run_cell(FAILING, store_history=True).success
    return first


def plan_file(tmp_path):
    plans = sorted((tmp_path / "rt" / "cudaassert").glob("plan-*.json"))
    assert len(plans) == 1
    return plans[0]


def restart_in_process(shell, tmp_path):
    """What the restart does to this process: the old kernel is gone, the stub runs in the fresh namespace."""
    extension.unload(shell)
    shell.reset(new_session=False)
    shell.user_ns["__name__"] = "__main__"
    for path in (tmp_path / "rt" / "cudaassert").glob("plan-*.json"):
        if path.read_text().startswith("{\n"):  # (not the ones a test broke on purpose)
            edit(path, writer_pid=dead_pid())
    stub = tmp_path / "startup" / startup_stub.STUB_NAME
    exec(compile(stub.read_text(), str(stub), "exec"), shell.user_ns)


def test_restart_in_a_terminal_arms_the_plan_and_says_what_to_do(session, shell, tmp_path, capsys):
    first = run_story(shell)
    capsys.readouterr()
    shell.run_line_magic("cudaassert", "restart")
    out = capsys.readouterr().out
    assert "[cudaassert] Restart with CUDA_LAUNCH_BLOCKING=1 and validators on; 3 setup cell(s) replay before your " \
           "next cell:" in out
    assert f"  [{first}] import os  (" in out and f"  [{first + 2}] runs = globals().get('runs', 0) + 1  (" in out
    assert "labels.shape" not in out
    assert out.rstrip().endswith("[cudaassert] Plan armed. This IPython cannot restart itself: exit (Ctrl-D), start "
                                 "`ipython` again in this directory and terminal, and run a command; the setup "
                                 "replays first.")
    path = plan_file(tmp_path)
    assert mode_of(path) == 0o600 and path.name.startswith("plan-term-")
    plan = json.loads(path.read_text())
    assert plan["env"] == {"CUDA_LAUNCH_BLOCKING": "1", "CUDAASSERT_VALIDATORS": "1"} and plan["validators"]
    assert [c["number"] for c in plan["cells"]] == [first, first + 1, first + 2]
    assert plan["failing"]["number"] == first + 4 and plan["failing"]["source"] == FAILING
    assert plan["diagnosis"]["cause_id"] and plan["diagnosis"]["cell"] == first + 4
    assert plan["expires"] - plan["created"] == resume_plan.PLAN_TTL
    assert (tmp_path / "startup" / startup_stub.STUB_NAME).read_text() == startup_stub.STUB_SOURCE


def test_restart_options_choose_the_environment_and_the_cells(session, shell, tmp_path):
    first = run_story(shell)
    shell.run_line_magic("cudaassert", "restart --cpu")
    assert json.loads(plan_file(tmp_path).read_text())["env"] == {
        "CUDA_LAUNCH_BLOCKING": "1", "CUDAASSERT_VALIDATORS": "1", "CUDA_VISIBLE_DEVICES": ""}
    shell.run_line_magic("cudaassert", "restart --normal")
    plan = json.loads(plan_file(tmp_path).read_text())
    assert plan["env"] == {} and not plan["validators"] and plan["mode"] == "normal"
    shell.run_line_magic("cudaassert", "restart --no-replay")
    assert json.loads(plan_file(tmp_path).read_text())["cells"] == []
    shell.run_line_magic("cudaassert", f"restart --cells {first + 2},{first}")
    assert [c["number"] for c in json.loads(plan_file(tmp_path).read_text())["cells"]] == [first, first + 2]


@pytest.mark.parametrize(("line", "message"), [
    ("restart --cpu --normal", "`--cpu` and `--normal` do not go together: `--normal` restarts without blocking mode "
                               "and validators; `--cpu` keeps both and hides the GPU."),
    ("restart --no-replay --cells 2", "`--no-replay` and `--cells` do not go together: `--no-replay` replays "
                                      "nothing."),
    ("restart --cells 2,x", "`%cudaassert restart --cells 2,x`: give cell numbers like --cells 2,3,5 (the n of "
                            "In [n])."),
])
def test_restart_misuse_says_how_to_fix_it(session, shell, line, message):
    with pytest.raises(UsageError) as e:
        shell.run_line_magic("cudaassert", line)
    assert str(e.value) == message


def test_restart_with_unknown_cells_lists_the_known_ones(session, shell):
    with pytest.raises(UsageError, match=r"`%cudaassert restart --cells 9999`: cell\(s\) 9999 are not in this "
                                         r"kernel's history \(known: "):
        shell.run_line_magic("cudaassert", "restart --cells 9999")


def test_a_read_only_profile_restarts_nothing_and_leaves_no_plan(session, shell, tmp_path, monkeypatch, capsys):
    (tmp_path / "ro").mkdir()
    monkeypatch.setattr(shell.profile_dir, "startup_dir", str(tmp_path / "ro" / "startup"))  # IPython makes it
    shutil.rmtree(tmp_path / "ro" / "startup")  # (IPython put a README there)
    (tmp_path / "ro" / "startup").write_text("a file where the startup directory should be")
    run_story(shell)
    capsys.readouterr()
    assert restart.request_restart(session, detect(shell)) is Outcome.FAILED
    assert "[cudaassert] Cannot write the startup file" in capsys.readouterr().out
    assert not has_plan_files(tmp_path / "rt" / "cudaassert")


def test_an_unwritable_runtime_dir_restarts_nothing(session, shell, tmp_path, monkeypatch, capsys):
    (tmp_path / "rtfile").write_text("")
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "rtfile"))
    run_story(shell)
    capsys.readouterr()
    assert restart.request_restart(session, detect(shell)) is Outcome.FAILED
    assert f"[cudaassert] Cannot write the resume plan into {tmp_path / 'rtfile' / 'cudaassert'}" in \
        capsys.readouterr().out
    assert not (tmp_path / "startup" / startup_stub.STUB_NAME).exists()


# -- the buttons and the server path (a stand-in kernel object records do_shutdown) --------------------
class FakeKernel:
    def __init__(self):
        self.calls = []
        self.io_loop = self

    def do_shutdown(self, restart):
        self.calls.append(("do_shutdown", restart))

    def add_callback(self, fn, *args):
        self.calls.append(("add_callback", fn.__name__, args))


class FakeButton:
    description, tooltip, disabled = "Restart & replay setup", "", False


def server_frontend(key="kid-1", runtime_file="/nonexistent/jpserver-1.json"):
    return Frontend(FrontendKind.SERVER, key, key, None, ServerRef("http://127.0.0.1:9/", runtime_file),
                    "http://127.0.0.1:9/")


def answers(verdict, why=""):
    """A server check that answers ``verdict`` (the real one is tested against a real server)."""
    return lambda server, kid: (Verdict(verdict), why)


def test_the_button_writes_the_plan_then_shows_restarting_then_shuts_down(session, shell, tmp_path, monkeypatch):
    kernel = FakeKernel()
    monkeypatch.setattr(shell, "kernel", kernel, raising=False)
    run_story(shell)
    actions = restart.actions_for(session, session.last, server_frontend(), checker=answers("ok"))
    assert [a.key for a in actions] == ["restart_replay", "restart_cpu"]
    assert [a.label for a in actions] == ["Restart & replay setup", "Restart on CPU"]
    assert all(a.enabled for a in actions)
    choices = actions.replay_choices
    assert [c.first_line for c in choices] == ["import os", "from fake_cuda_session import make_batch, cross_entropy",
                                               "runs = globals().get('runs', 0) + 1"]
    choices[1].selected = False  # the panel's checkbox
    button = FakeButton()
    actions[0].callback(button)
    assert kernel.calls == [("do_shutdown", True)]
    assert (button.description, button.disabled) == ("Restarting…", True)
    assert button.tooltip.endswith("[cudaassert] Restarting the kernel now; it comes back in a few seconds with the "
                                   f"same id. Then run a cell (the failing one [{session.last.cell}]): the setup "
                                   "replays first, inside that cell.")
    plan = json.loads((tmp_path / "rt" / "cudaassert" / "plan-kid-1.json").read_text())
    assert [c["first_line"] for c in plan["cells"]] == ["import os", "runs = globals().get('runs', 0) + 1"]


def test_a_shutdown_asked_from_another_thread_goes_through_the_kernels_loop(monkeypatch, session, shell):
    import threading

    kernel = FakeKernel()
    monkeypatch.setattr(shell, "kernel", kernel, raising=False)
    t = threading.Thread(target=restart._shutdown, args=(shell,))
    t.start()
    t.join()
    assert kernel.calls == [("add_callback", "do_shutdown", (True,))]


def test_a_server_that_does_not_know_the_kernel_gets_an_armed_plan_and_no_shutdown(session, shell, monkeypatch):
    kernel = FakeKernel()
    monkeypatch.setattr(shell, "kernel", kernel, raising=False)
    button = FakeButton()
    assert restart.request_restart(session, server_frontend(), button=button,
                                   checker=answers("unknown", "HTTP 404")) is Outcome.ARMED
    assert kernel.calls == []
    assert (button.description, button.disabled) == ("Armed: restart the kernel", True)
    assert button.tooltip.endswith("[cudaassert] The Jupyter server at http://127.0.0.1:9/ does not know this "
                                   "kernel's id, so it would not restart it. Nothing was restarted. The plan is kept "
                                   "for 60 min: restart the kernel from your frontend, then run a cell.")


@pytest.mark.parametrize(("verdict", "why", "text"), [
    ("refused", "HTTP 403", "[cudaassert] The Jupyter server at http://127.0.0.1:9/ refused the token in its runtime "
                            "file (HTTP 403), so this kernel's id could not be confirmed; restarting anyway: the "
                            "server that launched this kernel restarts it when it exits."),
    ("unreachable", "Connection refused", "[cudaassert] The Jupyter server at http://127.0.0.1:9/ did not answer "
                                          "(Connection refused), so this kernel's id could not be confirmed; "
                                          "restarting anyway: the server that launched this kernel restarts it when "
                                          "it exits."),
])
def test_a_server_that_cannot_confirm_still_restarts_its_own_kernel(session, shell, monkeypatch, capsys, verdict,
                                                                    why, text):
    kernel = FakeKernel()
    monkeypatch.setattr(shell, "kernel", kernel, raising=False)
    assert restart.request_restart(session, server_frontend(), checker=answers(verdict, why)) is Outcome.RESTARTING
    assert text in capsys.readouterr().out and kernel.calls == [("do_shutdown", True)]


@pytest.mark.parametrize(("kind", "detail", "text"), [
    ("vscode", "VS Code", "[cudaassert] Plan armed. VS Code does not restart this kernel by itself: press Restart in "
                          "the notebook toolbar, then run a cell; the setup replays first, inside that cell."),
    ("kernel", "jpserver-1.json in /rt", "[cudaassert] No Jupyter server was found for this kernel (looked for "
                                         "jpserver-1.json in /rt), so it cannot restart itself. The plan is kept for "
                                         "60 min: restart the kernel from your frontend, then run a cell; the setup "
                                         "replays first, inside that cell."),
    ("headless", "KAGGLE_KERNEL_RUN_TYPE=Batch", "[cudaassert] This run has no interactive frontend "
                                                 "(KAGGLE_KERNEL_RUN_TYPE=Batch), so nothing here can restart the "
                                                 "kernel. The plan is kept for 60 min: restart this kernel and run a "
                                                 "cell to replay the setup, or re-run the notebook with "
                                                 "CUDA_LAUNCH_BLOCKING=1 and CUDAASSERT_VALIDATORS=1 in its "
                                                 "environment."),
])
def test_frontends_that_do_not_restart_by_themselves_get_an_armed_plan(session, shell, monkeypatch, capsys, kind,
                                                                       detail, text):
    kernel = FakeKernel()
    monkeypatch.setattr(shell, "kernel", kernel, raising=False)
    assert restart.request_restart(session, Frontend(FrontendKind(kind), "k-" + kind, detail=detail)) is Outcome.ARMED
    assert capsys.readouterr().out.rstrip().endswith(text) and kernel.calls == []


def test_headless_runs_get_disabled_buttons_that_say_why(session, shell, monkeypatch):
    run_story(shell)
    actions = restart.actions_for(session, session.last,
                                  Frontend(FrontendKind.HEADLESS, "k", detail="launched by papermill"))
    assert all(not a.enabled for a in actions)
    assert actions[0].disabled_reason.startswith("[cudaassert] This run has no interactive frontend (launched by "
                                                 "papermill)")


def test_no_buttons_while_the_gpu_is_alive_and_no_debug_mode_is_on(session, shell):
    shell.run_cell("x = 1", store_history=True)
    fe = detect(shell)
    assert restart.actions_for(session, None, fe) == [] and restart.actions_for(session, None, fe).replay_choices == []


# -- the replay, started by the stub ----------------------------------------------------------------
def test_after_the_restart_the_next_cell_replays_the_setup_and_the_validator_catches_the_bad_label(
        session, shell, tmp_path, capsys):
    from cudaassert_ipy.checks import ValidationIndexError, validators_enabled

    first = run_story(shell)
    shell.run_line_magic("cudaassert", "restart")
    restart_in_process(shell, tmp_path)
    assert os.environ["CUDA_LAUNCH_BLOCKING"] == "1"  # set by the stub, before any cell
    assert os.environ["CUDAASSERT_VALIDATORS"] == "1" and not validators_enabled()  # on at the first cell
    assert not has_plan_files(tmp_path / "rt" / "cudaassert")  # claimed: one-shot
    assert not (tmp_path / "startup" / startup_stub.STUB_NAME).exists()  # no plan pending: stub gone
    capsys.readouterr()
    result = shell.run_cell(FAILING, store_history=True)
    out = capsys.readouterr().out
    assert isinstance(result.error_in_exec, ValidationIndexError)
    assert shell.user_ns["runs"] == 1 and shell.user_ns["BLOCKING_AT_IMPORT"] == "1"
    assert validators_enabled()
    assert (f"[cudaassert] This kernel was restarted by cudaassert after cell [{first + 4}] failed (" in out
            and "), with CUDA_LAUNCH_BLOCKING=1 and validators on." in out)
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


def session_history(shell):
    return extension.current(shell).history.records


def test_after_the_replay_the_panel_offers_the_way_back_to_normal_speed(session, shell, tmp_path):
    run_story(shell)
    shell.run_line_magic("cudaassert", "restart")
    restart_in_process(shell, tmp_path)
    shell.run_cell(FAILING, store_history=True)
    ext = extension.current(shell)
    actions = restart.actions_for(ext, ext.last, detect(shell))
    assert [a.label for a in actions] == ["Back to normal speed"]
    assert actions.replay_choices[0].first_line == "import os"


def test_a_setup_cell_that_now_fails_stops_the_replay_and_names_it(session, shell, tmp_path, capsys):
    first = shell.execution_count
    for cell in ["a = 1", "import missing_module_xyz as m\nfrom_missing = 1", "b = 2"]:
        shell.run_cell(cell, store_history=True)
    shell.run_line_magic("cudaassert", f"restart --cells {first},{first + 2}")
    plan_path = plan_file(tmp_path)
    edit(plan_path, cells=[{"number": first, "source": "a = 1", "duration": 0.1},
                           {"number": first + 1, "source": "raise ValueError('the data moved')", "duration": 0.1},
                           {"number": first + 2, "source": "b = 2", "duration": 0.1}])
    restart_in_process(shell, tmp_path)
    capsys.readouterr()
    result = shell.run_cell("c = 3", store_history=True)
    out = capsys.readouterr().out
    assert result.success and shell.user_ns["a"] == 1 and "b" not in shell.user_ns and shell.user_ns["c"] == 3
    assert (f"[cudaassert] Replay stopped at cell [{first + 1}] (2 of 3): ValueError: the data moved. Not replayed: "
            f"[{first + 2}]. Your cell runs next without them: fix that cell and run it (then the rest) yourself, or "
            "choose the cells with `%cudaassert setup` before the next restart.") in out
    assert "[cudaassert]   ... failed (" in out
    assert not last_report(shell)["ok"]
    assert session_history(shell)[-1].ok  # the replayed failure is not pinned on the user's own cell


def test_in_cpu_mode_a_cell_that_asks_for_cuda_gets_the_device_hint(session, shell, tmp_path, capsys):
    shell.run_cell("x = 1", store_history=True)
    shell.run_line_magic("cudaassert", "restart --cpu")
    edit(plan_file(tmp_path), cells=[{"number": 1, "source": "raise RuntimeError('Found no NVIDIA driver; cuda')"}])
    restart_in_process(shell, tmp_path)
    assert os.environ["CUDA_VISIBLE_DEVICES"] == ""
    capsys.readouterr()
    shell.run_cell("y = 1", store_history=True)
    out = capsys.readouterr().out
    assert "In CPU mode, code that asks for 'cuda' fails: use `device = 'cuda' if torch.cuda.is_available() else " \
           "'cpu'`." in out
    assert "CPU mode: CUDA_VISIBLE_DEVICES= hides the GPU, so everything runs on the CPU" in out


def test_running_the_setup_cells_yourself_skips_the_replay(session, shell, tmp_path, capsys):
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


def test_a_normal_restart_replays_without_blocking_mode_or_validators(session, shell, tmp_path, capsys):
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


def test_a_bad_plan_is_reported_in_the_first_cell_and_nothing_replays(session, shell, tmp_path, capsys):
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


def test_vscode_claims_by_notebook_path_at_the_first_cell(session, shell, tmp_path, monkeypatch, capsys):
    from cudaassert_ipy.restart import frontend

    shell.user_ns["__vsc_ipynb_file__"] = "/home/me/train.ipynb"
    shell.run_cell("x = 41", store_history=True)
    assert restart.request_restart(session, frontend.Frontend(
        FrontendKind.VSCODE, frontend.vscode_key("/home/me/train.ipynb"), "v3aaaa", "/home/me/train.ipynb")
    ) is Outcome.ARMED
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


def test_a_replay_that_breaks_itself_is_one_line_and_the_cell_still_runs(session, shell, tmp_path, monkeypatch,
                                                                          capsys):
    shell.run_cell("x = 1", store_history=True)
    shell.run_line_magic("cudaassert", "restart")
    restart_in_process(shell, tmp_path)

    def broken(*args):
        raise OSError("disk on fire")

    monkeypatch.setattr(replay.Replayer, "_replay", broken)
    capsys.readouterr()
    assert shell.run_cell("y = 2", store_history=True).success
    err = capsys.readouterr().err
    assert err.startswith("[cudaassert] The replay itself failed (OSError: disk on fire); your cell runs as usual. "
                          "Details: ")
    assert err.rstrip().endswith("resume.log") and shell.user_ns["y"] == 2


def test_the_widget_progress_collapses_outputs_and_opens_a_failed_cell():
    from cudaassert_ipy.view.replay_view import WidgetProgress

    cells = [{"number": 2, "first_line": "import torch"}, {"number": 3, "first_line": "model = Net()"}]
    p = WidgetProgress(cells)
    assert p.accordion.selected_index is None and p.bar.max == 2
    with p.cell(0):
        pass
    p.cell_done(0, 0.5, None)
    assert p.bar.value == 1 and p.accordion.get_title(0) == "✓ [2] import torch (0.50 s)"
    p.cell_done(1, 0.1, ValueError("x"))
    assert p.accordion.selected_index == 1 and p.label.value == "Replay stopped at cell [3]"
    p.finish(False)
    assert p.bar.bar_style == "danger"


# -- every remaining message, and who restarts this kernel ------------------------------------------
def test_the_what_is_on_banner_names_each_setting_its_cost_and_the_way_back():
    from cudaassert_ipy.view.replay_view import OnBanner, on_text

    assert on_text("debug") == (
        "[cudaassert] On in this kernel:\n"
        "  - CUDA_LAUNCH_BLOCKING=1: each CUDA call waits for the GPU, so an error is raised at the line that caused "
        "it. Cost: GPU work runs slower (often 1.2–3x).\n"
        "  - validators: cross_entropy, indexing, embedding, gather, one_hot … check their inputs before the kernel "
        "launches, so a bad value is a Python error and the GPU stays alive. Cost: one small check and one GPU sync "
        "per checked call (one to a few per training step).\n"
        "  Back to normal speed: `%cudaassert restart --normal` (restarts and replays your setup without these).")
    html = OnBanner("cpu")._repr_mimebundle_()["text/html"]
    assert "<code>%cudaassert restart --normal</code>" in html and "CPU mode: CUDA_VISIBLE_DEVICES= hides" in html


def test_the_widget_label_counts_the_cells_as_they_replay():
    from cudaassert_ipy.view.replay_view import WidgetProgress

    p = WidgetProgress([{"number": 2, "first_line": "a = 1"}, {"number": 3, "first_line": "b = 2"}])
    assert p.label.value == "Replaying setup: 0/2"
    with p.cell(1):
        assert p.label.value == "Replaying setup: 2/2"
    p.finish(True)
    assert p.label.value == "Setup replayed: 2/2" and p.bar.bar_style == "success"


def test_an_empty_plan_says_the_kernel_restarts_empty(session, shell, capsys):
    shell.run_line_magic("cudaassert", "restart --no-replay")
    assert "replay before your next cell:\n  (no cells: the kernel restarts empty)\n" in capsys.readouterr().out


def test_a_button_whose_restart_failed_says_so_in_its_tooltip(session, shell, tmp_path, monkeypatch):
    (tmp_path / "rtfile").write_text("")
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "rtfile"))
    button = FakeButton()
    assert restart.request_restart(session, detect(shell), button=button) is Outcome.FAILED
    assert (button.description, button.disabled) == ("Restart failed", True)
    assert "[cudaassert] Cannot write the resume plan into" in button.tooltip


def test_the_setup_listing_names_the_failing_cell_or_says_none(session, shell, capsys):
    shell.run_line_magic("cudaassert", "setup")
    assert "  (none)\n" in capsys.readouterr().out
    first = run_story(shell)
    capsys.readouterr()
    shell.run_line_magic("cudaassert", "setup show")
    assert (f"[cudaassert] Setup cells a restart replays (default: cells that succeeded before cell [{first + 4}]):"
            in capsys.readouterr().out)


def test_the_buttons_tooltips_say_what_a_click_does(session, shell, monkeypatch):
    run_story(shell)
    replay_tip, cpu_tip = (a.tooltip for a in restart.actions_for(session, session.last, server_frontend()))
    assert replay_tip == ("Restart the kernel with CUDA_LAUNCH_BLOCKING=1 and validators on; the 3 ticked setup "
                          "cell(s) replay when you run your next cell.")
    assert cpu_tip == ("Restart with the GPU hidden (CUDA_VISIBLE_DEVICES=) and validators on; the 3 ticked setup "
                       "cell(s) replay on the CPU.")
    session.resumed = replay.Resumed(plan_for("k1", mode=Mode.DEBUG))
    session.state.reset()
    (normal,) = restart.actions_for(session, None, server_frontend())
    assert normal.tooltip == ("Restart without blocking mode and validators; the 3 ticked setup cell(s) replay.")


def test_validators_that_cannot_come_on_leave_a_note_and_the_replay_goes_on(session, shell, tmp_path, monkeypatch,
                                                                            capsys):
    shell.run_cell("x = 1", store_history=True)
    shell.run_line_magic("cudaassert", "restart")
    restart_in_process(shell, tmp_path)

    def no_torch(self, on):
        raise ImportError("No module named 'torch'")

    monkeypatch.setattr(extension.Extension, "set_validators", no_torch)
    capsys.readouterr()
    shell.run_cell("y = x", store_history=True)
    out = capsys.readouterr().out
    assert ("[cudaassert] The validators could not be turned on (ImportError: No module named 'torch'); the "
            "environment is set.") in out
    assert shell.user_ns["y"] == 1


class Kernelish:
    """Enough of a kernel for detect(): it only asks whether there is one."""


@pytest.fixture
def in_kernel(shell, monkeypatch, tmp_path):
    from cudaassert_ipy.restart import frontend

    monkeypatch.setattr(shell, "kernel", Kernelish(), raising=False)
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path))
    monkeypatch.setenv("JPY_PARENT_PID", "4242")
    for var in ("KAGGLE_KERNEL_RUN_TYPE", "VSCODE_PID", "JPY_SESSION_NAME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(frontend, "connection_file", lambda: str(tmp_path / "kernel-1234-abcd.json"))
    monkeypatch.setattr(frontend, "_parent_cmdline", lambda: "python -m pytest")
    return frontend


def test_a_kernel_launched_by_a_jupyter_server_is_restarted_by_it(in_kernel, shell, tmp_path):
    (tmp_path / "jpserver-4242.json").write_text(json.dumps({"pid": 4242, "url": "http://127.0.0.1:1/"}))
    fe = in_kernel.detect(shell)
    assert (fe.kind, fe.key, fe.kernel_id, fe.restarts_itself) == ("server", "1234-abcd", "1234-abcd", True)
    assert fe.server.url == "http://127.0.0.1:1/"


def test_a_runtime_file_of_another_server_is_not_ours(in_kernel, shell, tmp_path):
    (tmp_path / "jpserver-4242.json").write_text(json.dumps({"pid": 999, "url": "http://127.0.0.1:1/"}))
    fe = in_kernel.detect(shell)
    assert fe.kind == "kernel" and fe.detail.startswith("jpserver-4242.json, ") and str(tmp_path) in fe.detail


@pytest.mark.parametrize(("setup", "kind"), [
    (lambda m, ns: m.setenv("KAGGLE_KERNEL_RUN_TYPE", "Batch"), "headless"),
    (lambda m, ns: m.setenv("KAGGLE_KERNEL_RUN_TYPE", "Interactive"), "server"),
    (lambda m, ns: m.setitem(sys.modules, "google.colab", object()), "server"),
    (lambda m, ns: m.setitem(ns, "__vsc_ipynb_file__", "/nb/a.ipynb"), "vscode"),
    (lambda m, ns: m.setenv("VSCODE_PID", "1"), "vscode"),
    (lambda m, ns: None, "kernel"),
])
def test_who_restarts_the_kernel_is_read_from_the_environment(in_kernel, shell, monkeypatch, setup, kind):
    setup(monkeypatch, shell.user_ns)
    assert in_kernel.detect(shell).kind == kind


def test_vscode_plans_are_keyed_by_the_notebook_because_its_connection_file_changes(in_kernel, shell, monkeypatch):
    monkeypatch.setitem(shell.user_ns, "__vsc_ipynb_file__", "/nb/a.ipynb")
    fe = in_kernel.detect(shell)
    assert fe.key == in_kernel.vscode_key("/nb/a.ipynb") and fe.key.startswith("vsc-") and fe.notebook == "/nb/a.ipynb"


def test_papermill_and_nbclient_runs_are_headless(in_kernel, shell, monkeypatch):
    monkeypatch.setattr(in_kernel, "_parent_cmdline", lambda: "python -m papermill in.ipynb out.ipynb")
    fe = in_kernel.detect(shell)
    assert (fe.kind, fe.detail) == ("headless", "launched by papermill")


def test_plain_ipython_is_a_terminal_keyed_by_directory_and_tty(shell):
    from cudaassert_ipy.restart import frontend

    fe = frontend.detect(shell)
    assert fe.kind == "terminal" and fe.key == frontend.terminal_key() and fe.key.startswith("term-")


def test_kernel_ids_come_from_the_connection_file_name():
    from cudaassert_ipy.restart.frontend import kernel_id

    assert kernel_id("/run/kernel-5f1c-9a.json") == "5f1c-9a"
    assert kernel_id("/run/kernel-v3abcdef.json") == "v3abcdef"
    assert kernel_id("/run/other.json") is None and kernel_id("/run/kernel-.json") is None


def test_kernels_without_an_id_in_their_connection_file_are_keyed_by_the_file_or_the_host(monkeypatch):
    from cudaassert_ipy.restart import frontend

    assert frontend.kernel_key("/run/kernel-5f1c.json") == "5f1c"
    key = frontend.kernel_key("/colab/kernel_conn.json")
    assert key.startswith("conn-") and key == frontend.kernel_key("/colab/kernel_conn.json")
    monkeypatch.setattr(frontend, "connection_file", lambda: None)
    assert frontend.kernel_key().startswith("host-")


def test_a_stub_written_before_the_package_layout_still_claims_and_reports_its_old_plan(session, shell, tmp_path,
                                                                                       capsys):
    shell.run_cell("x = 1", store_history=True)
    shell.run_line_magic("cudaassert", "restart")
    path = plan_file(tmp_path)
    extension.unload(shell)  # the old kernel ends; its plan is of the schema before the typed one
    shell.reset(new_session=False)
    edit(path, version=1, writer_pid=dead_pid())
    old_stub = startup_stub.STUB_SOURCE.replace("cudaassert_ipy.shell.resume", "cudaassert_ipy.replay")
    assert "from cudaassert_ipy.replay import resume_at_startup" in old_stub
    exec(compile(old_stub, "00-cudaassert-resume.py", "exec"), shell.user_ns)
    capsys.readouterr()
    shell.run_cell("z = 1", store_history=True)
    out = capsys.readouterr().out
    assert f"[cudaassert] The resume plan {path} is not a valid plan (version 1, expected 2). Nothing was replayed; " \
           f"the file was kept as {path}.invalid." in out
    assert "x" not in shell.user_ns and "CUDA_LAUNCH_BLOCKING" not in os.environ


def test_a_plan_round_trips_through_its_file_with_the_failing_batch_and_every_typed_field(d):
    from cudaassert_ipy.restart.plan import DiagnosisSummary, FailingCell

    plan = plan_for("k1", mode=Mode.CPU, frontend=FrontendKind.VSCODE, notebook="/nb/a.ipynb", kernel_id="v3x",
                    env=tuple(Mode.CPU.env.items()), validators=True,
                    failing=FailingCell(7, "c7", "loss = f(x)", "IndexError: Target 195 is out of bounds."),
                    diagnosis=DiagnosisSummary("label_out_of_range", "class label out of range", cell=7),
                    failing_batch=("train_loader", (3, 1041, 77)))
    path = written(d, plan=plan)
    claimed = claim("k1", d).plan
    assert claimed is not None and claimed.writer_pid is not None
    assert claimed == replace(plan, writer_pid=claimed.writer_pid, writer_start=claimed.writer_start)
    assert claimed.failing_batch == ("train_loader", (3, 1041, 77)) and claimed.mode is Mode.CPU
    assert claimed.env_dict == {"CUDA_LAUNCH_BLOCKING": "1", "CUDAASSERT_VALIDATORS": "1", "CUDA_VISIBLE_DEVICES": ""}
    assert not path.exists()


def test_the_server_reference_shows_its_url_only_and_reads_the_token_just_for_the_request(tmp_path):
    runtime_file = tmp_path / "jpserver-1.json"
    runtime_file.write_text(json.dumps({"url": "http://127.0.0.1:8888/", "token": "s3cr3t-t0ken", "pid": 1}))
    ref = ServerRef("http://127.0.0.1:8888/", runtime_file)
    fe = Frontend(FrontendKind.SERVER, "k", "k", None, ref, ref.url)
    for text in (repr(ref), str(ref), repr(fe), str(fe), repr(vars(fe))):
        assert "s3cr3t" not in text and "127.0.0.1:8888" in text
    assert not hasattr(ref, "__dict__")  # nowhere to keep a token by accident
    assert ref.read_token() == "s3cr3t-t0ken"
    runtime_file.unlink()
    assert ref.read_token() == ""  # the server is gone: no token, and no error
