"""Processes a script starts (torch.multiprocessing.spawn, a DDP-style relaunch of sys.argv) are watched too."""

from __future__ import annotations

import os
import site
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

from helpers import kernel_env

PY = sys.executable
LOSS_LINE = "Loss.cu:250 nll_loss_forward_reduce_cuda_kernel_2d: `t >= 0 && t < n_classes` failed in 3 threads"
SPAWN = """
import torch.multiprocessing as mp

def work(i):
    if i == 1:
        from gpu_double import fail_like_gpu
        fail_like_gpu(threads=3)

if __name__ == "__main__":
    mp.spawn(work, nprocs=2)
"""
RELAUNCH = """
import os, subprocess, sys
if "LOCAL_RANK" not in os.environ:  # what Lightning's DDP launcher does: run sys.argv again per local rank
    child = subprocess.run([sys.executable] + sys.argv, env={**os.environ, "LOCAL_RANK": "1"})
    print("parent saw", child.returncode, flush=True)
    sys.exit(child.returncode)
import torch
from gpu_double import fail_like_gpu
model = torch.nn.Linear(4, 195)
labels = torch.tensor([3, 195, 7])
fail_like_gpu(threads=3)
"""


def run_script(tmp_path: Path, text: str, *options: str, **env: str) -> subprocess.CompletedProcess:
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(text))
    return subprocess.run(
        [PY, "-m", "cudaassert_ipy", *options, str(path)],
        cwd=tmp_path,
        env=kernel_env(**env),
        capture_output=True,
        text=True,
        timeout=180,
    )


def site_dirs() -> dict[str, list[str]]:
    dirs = {*site.getsitepackages(), sysconfig.get_paths()["purelib"]}
    return {d: sorted(os.listdir(d)) for d in dirs if os.path.isdir(d)}


def test_a_failure_in_an_mp_spawn_worker_is_diagnosed_with_the_workers_assertion_line(tmp_path):
    result = run_script(tmp_path, SPAWN)
    assert result.returncode == 1
    err = result.stderr
    assert err.index("-- Process 1 terminated with the following error:") < err.index("[cudaassert] GPU context dead")
    # the parent got only mp.spawn's wrapper: the report names the worker, whose context died, not the parent's
    assert "[cudaassert] GPU context dead in process 1 of mp.spawn · class label out of range" in err
    assert LOSS_LINE in err
    assert err.count("[cudaassert] GPU context dead") == 1


def test_a_relaunched_child_reports_its_own_failure_through_the_startup_hook(tmp_path):
    result = run_script(tmp_path, RELAUNCH)
    assert result.stdout == "parent saw 1\n" and result.returncode == 1
    err = result.stderr
    assert err.index("torch.AcceleratorError: CUDA error: device-side assert triggered") < err.index(
        "[cudaassert] GPU context dead · class label out of range"
    )
    assert "Your code: line 11: fail_like_gpu(threads=3)" in err and LOSS_LINE in err
    report = err[err.index("[cudaassert]") :]
    assert "`labels`" in report and "195" in report, "the child's own globals are its evidence"
    assert err.count("[cudaassert] GPU context dead") == 1, "the parent exited by sys.exit: no second report"


def test_no_children_leaves_the_relaunched_child_unwatched(tmp_path):
    result = run_script(tmp_path, RELAUNCH, "--no-children")
    assert result.returncode == 1 and "AcceleratorError" in result.stderr and "[cudaassert]" not in result.stderr


def test_the_hook_chains_to_an_existing_sitecustomize_and_nothing_is_installed_anywhere(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text("import sys\nsys.their_sitecustomize_ran = True\n")  # this process only
    before = site_dirs()
    child = """
    import os, subprocess, sys
    code = "import sys; print(getattr(sys, 'their_sitecustomize_ran', False), 'cudaassert_ipy.run.hook' in sys.modules)"
    print(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip())
    """
    env = {"PYTHONPATH": os.pathsep.join([str(theirs), kernel_env()["PYTHONPATH"]])}
    result = run_script(tmp_path, child, **env)
    assert result.stdout == "True True\n", result.stderr
    assert site_dirs() == before
    plain = subprocess.run(
        [PY, "-c", "import sys; print('cudaassert_ipy.run.hook' in sys.modules)"],
        env=kernel_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert plain.stdout == "False\n", "outside a run, nothing starts the hook"
