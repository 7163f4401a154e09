"""``--rerun-on-failure`` in one process: the same command again with blocking and validators, the finding beside."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from helpers import kernel_env

PY = sys.executable
# On the GPU double's first run the assert fires; in the rerun (CUDA_LAUNCH_BLOCKING=1) the real call runs on the
# CPU under the validators, which is what the GPU would do with checks on: stop cross_entropy before launch.
SCRIPT = """
import os
import torch, torch.nn.functional as F
model = torch.nn.Linear(4, 195)
labels = torch.tensor([0, 195, 1])
if os.environ.get("CUDA_LAUNCH_BLOCKING") != "1":
    from gpu_double import fail_like_gpu
    fail_like_gpu(threads=2)
loss = F.cross_entropy(model(torch.randn(3, 4)), labels)
"""
BANNER = (
    "[cudaassert] --rerun-on-failure: running `train.py` again with CUDA_LAUNCH_BLOCKING=1 and validators on, "
    "to stop the bad call before its kernel launches. This run is slower: each kernel launch waits for the "
    "previous one, and each checked call adds one small reduction and one device-to-host read."
)


def rerun(tmp_path: Path, text: str, *options: str) -> subprocess.CompletedProcess:
    (tmp_path / "train.py").write_text(textwrap.dedent(text))
    return subprocess.run(
        [PY, "-m", "cudaassert_ipy", "--rerun-on-failure", *options, "train.py"],
        cwd=tmp_path,
        env=kernel_env(),
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_a_device_assert_reruns_with_checks_and_ends_with_the_validators_finding(tmp_path):
    result = rerun(tmp_path, SCRIPT, "--report-json", "r.json")
    err = result.stderr
    assert result.returncode == 1
    first, banner = err.index("[cudaassert] GPU context dead · class label out of range"), err.index(BANNER)
    finding = err.index("ValidationIndexError: cross_entropy: target has 1 bad value")
    tail = err[err.index("[cudaassert] First run: ") :]
    assert first < banner < finding < err.index("[cudaassert] First run: ")
    assert tail.splitlines()[:2] == [
        "[cudaassert] First run: GPU context dead · class label out of range in cross_entropy",
        "[cudaassert] Rerun with CUDA_LAUNCH_BLOCKING=1 and validators: GPU alive · class label out of range in "
        "cross_entropy",
    ]
    assert "  call: cross_entropy(target=...)" in tail and "  first: 195 at [1]" in tail
    assert "  Your code: line 9: loss = F.cross_entropy(model(torch.randn(3, 4)), labels)" in tail
    assert "--rerun-on-failure (or --blocking --validators)" not in err, "no hint to do what is being done"
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["diagnosis"]["kind"] == "device_assert" and data["rerun"]["report"]["diagnosis"]["kind"] == "validator"


def test_a_run_that_succeeds_is_not_rerun(tmp_path):
    result = rerun(tmp_path, "print('ok')\n")
    assert (result.returncode, result.stdout, result.stderr) == (0, "ok\n", "")


def test_an_ordinary_exception_is_not_rerun_and_keeps_pythons_output(tmp_path):
    result = rerun(tmp_path, "raise ValueError('plain')\n")
    assert result.returncode == 1 and "[cudaassert]" not in result.stderr
    assert result.stderr.endswith("ValueError: plain\n")


def test_a_rerun_without_a_finding_says_the_first_diagnosis_stands(tmp_path):
    text = (
        "from gpu_double import fail_like_gpu\nimport os\nif os.environ.get('CUDA_LAUNCH_BLOCKING') != '1':\n"
        "    fail_like_gpu(threads=1)\n"
    )
    result = rerun(tmp_path, text)
    assert result.returncode == 0
    assert result.stderr.rstrip().endswith(
        "[cudaassert] Rerun with CUDA_LAUNCH_BLOCKING=1 and validators: it "
        "succeeded; the first run's diagnosis above stands."
    )
