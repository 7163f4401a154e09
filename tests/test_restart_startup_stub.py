"""restart/startup_stub.py: the file in the profile's startup directory that claims the plan in a restarted kernel.

Written once, removed when no plan is pending, never raising or printing (startup output has no
cell to go to), cheap without a plan; a stub written by an older layout still claims its plan.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import ROOT
from helpers.plans import dead_pid, edit, written
from helpers.restart_story import plan_file

from cudaassert_ipy.restart import startup_stub
from cudaassert_ipy.restart.plan_files import claim
from cudaassert_ipy.shell import extension


class Profile:
    def __init__(self, startup_dir):
        self.startup_dir = str(startup_dir)


class FakeShell:
    def __init__(self, startup_dir):
        self.profile_dir = Profile(startup_dir)


def test_the_stub_is_written_once_and_removed_only_when_no_plan_is_pending(plan_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(plan_dir.parent))
    shell = FakeShell(tmp_path / "profile" / "startup")
    path = startup_stub.ensure_stub(shell)
    assert path.name == "00-cudaassert-resume.py" and path.read_text() == startup_stub.STUB_SOURCE
    assert startup_stub.ensure_stub(shell) == path
    written(plan_dir)
    assert not startup_stub.remove_if_idle(shell) and path.exists()
    claim("k1", plan_dir)
    assert startup_stub.remove_if_idle(shell) and not path.exists()
    assert not startup_stub.remove_if_idle(shell)


def test_a_foreign_file_with_the_stubs_name_is_left_alone(plan_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(plan_dir.parent))
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
    _, replay_loaded, torch_loaded, ours_loaded, printed, names = run_stub(tmp_path, tmp_path / "rt")
    assert not replay_loaded and not torch_loaded and not ours_loaded
    assert printed == "''" and names == "[]"  # prints nothing, leaves no names behind
    # its time (mostly importing jupyter_core, which a kernel has done before its startup files): bench_stub.py


def test_a_stub_that_fails_neither_raises_nor_prints_and_logs_instead(tmp_path):
    runtime = tmp_path / "rt"
    written(runtime / "cudaassert", "k1")  # a plan where plan_dir() says, so the stub goes on; then it fails
    _, replay_loaded, _, _, printed, names = run_stub(tmp_path, runtime)
    assert replay_loaded and printed == "''" and names == "[]"
    assert "startup stub failed: AttributeError(" in (runtime / "cudaassert" / "resume.log").read_text()


def test_a_stub_written_before_the_package_layout_still_claims_and_reports_its_old_plan(restart_ext, shell, tmp_path,
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

