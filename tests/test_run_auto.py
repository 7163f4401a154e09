"""``import cudaassert_ipy.auto``: the runner's report for ``python -c`` and ``ipython script.py``."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from helpers import kernel_env

PY = sys.executable
IPYTHON = str(Path(sys.executable).with_name("ipython"))
LOSS_LINE = "Loss.cu:250 nll_loss_forward_reduce_cuda_kernel_2d: `t >= 0 && t < n_classes` failed in 2 threads"
SCRIPT = """
import cudaassert_ipy.auto
import torch
from gpu_double import fail_like_gpu
labels = torch.tensor([3, 195])
fail_like_gpu(threads=2)
"""


def test_python_dash_c_with_the_import_gets_the_report_after_the_traceback():
    code = "import cudaassert_ipy.auto; from gpu_double import fail_like_gpu; fail_like_gpu(threads=2)"
    result = subprocess.run([PY, "-c", code], env=kernel_env(), capture_output=True, text=True, timeout=120)
    err = result.stderr
    assert result.returncode == 1
    assert err.index("torch.AcceleratorError: CUDA error") < err.index("[cudaassert] GPU context dead")
    assert LOSS_LINE in err


def test_a_script_with_the_import_reports_and_leaves_ordinary_errors_alone(tmp_path):
    (tmp_path / "train.py").write_text(textwrap.dedent(SCRIPT))
    result = subprocess.run(
        [PY, "train.py"], cwd=tmp_path, env=kernel_env(), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1 and LOSS_LINE in result.stderr
    assert "Your code: line 6: fail_like_gpu(threads=2)" in result.stderr
    (tmp_path / "plain.py").write_text("import cudaassert_ipy.auto\nraise ValueError('plain')\n")
    ours = subprocess.run([PY, "plain.py"], cwd=tmp_path, env=kernel_env(), capture_output=True, text=True, timeout=60)
    (tmp_path / "plain.py").write_text("import sys\nraise ValueError('plain')\n")
    theirs = subprocess.run(
        [PY, "plain.py"], cwd=tmp_path, env=kernel_env(), capture_output=True, text=True, timeout=60
    )
    assert ours.returncode == theirs.returncode == 1 and ours.stderr == theirs.stderr


def test_ipython_running_a_script_with_the_import_gets_the_report_after_ipythons_traceback(tmp_path):
    (tmp_path / "train.py").write_text(textwrap.dedent(SCRIPT))
    result = subprocess.run(
        [IPYTHON, "--no-banner", "--colors=NoColor", "train.py"],
        cwd=tmp_path,
        env=kernel_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = result.stdout + result.stderr
    assert "AcceleratorError" in out and "[cudaassert] GPU context dead · class label out of range" in result.stderr
    assert LOSS_LINE in result.stderr
