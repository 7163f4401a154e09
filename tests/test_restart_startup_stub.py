"""restart/startup_stub.py: the file in the profile's startup directory that claims the plan in a restarted kernel.

Written once, removed when no plan is pending, never raising or printing (startup output has no
cell to go to), cheap without a plan; a stub written by the unreleased layout before restart/ fails quietly.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import ROOT
from helpers.plans import written

from cudaassert_ipy.restart import startup_stub
from cudaassert_ipy.restart.plan_files import claim


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
    assert str(e.value).endswith(
        "), so a restarted kernel could not replay your setup. Nothing was restarted. Make "
        "the IPython profile directory writable (or start Jupyter with IPYTHONDIR set to a "
        "writable directory), or restart by hand and re-run your setup cells."
    )


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


def run_stub(tmp_path, runtime, source=startup_stub.STUB_SOURCE):
    stub = tmp_path / startup_stub.STUB_NAME
    stub.write_text(source)
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(runtime), "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", STUB_PROBE, str(stub)], env=env, capture_output=True, text=True, timeout=60, check=True
    ).stdout.split(" ", 5)
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


def test_a_stub_written_before_the_package_layout_fails_quietly_and_leaves_its_plan(tmp_path):
    # the layout before restart/ (never released) had the stub import cudaassert_ipy.replay, which is gone
    runtime = tmp_path / "rt"
    path = written(runtime / "cudaassert", "k1")
    old_stub = startup_stub.STUB_SOURCE.replace("cudaassert_ipy.shell.resume", "cudaassert_ipy.replay")
    assert "from cudaassert_ipy.replay import resume_at_startup" in old_stub
    _, _, _, _, printed, names = run_stub(tmp_path, runtime, old_stub)
    assert printed == "''" and names == "[]"
    # ModuleNotFoundError where cudaassert_ipy.replay is gone (an editable install of an older checkout may still
    # resolve it; then the entry point fails on the probe's missing shell): either way logged, never raised
    assert "startup stub failed: " in (runtime / "cudaassert" / "resume.log").read_text()
    assert path.exists()  # claimed by the next kernel that loads the extension, or expired
