"""The runner, ``python -m cudaassert_ipy script.py``, in real subprocesses: behaves as ``python``, explains CUDA."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import ROOT, kernel_env

PY = sys.executable
LOSS_LINE = "Loss.cu:250 nll_loss_forward_reduce_cuda_kernel_2d: `t >= 0 && t < n_classes` failed in 64 threads"
DOUBLE = """
import torch
from gpu_double import fail_like_gpu
model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 195))
labels = torch.tensor([3, 195, 7])
fail_like_gpu()
"""
CPU_LABEL = """
import torch, torch.nn.functional as F
model = torch.nn.Linear(4, 5)
labels = torch.tensor([0, 5, 1])
loss = F.cross_entropy(model(torch.randn(3, 4)), labels)
"""


def script(tmp_path: Path, text: str, name: str = "train.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def run(
    args: list[str], cwd: Path, runner: bool = True, timeout: float = 120, **kw: object
) -> subprocess.CompletedProcess:
    cmd = [PY, "-m", "cudaassert_ipy", *args] if runner else [PY, *args]
    env = kernel_env(**kw.pop("env", {}))  # type: ignore[arg-type]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, **kw)  # type: ignore[call-overload]


def test_a_script_sees_the_argv_main_file_and_path_that_plain_python_gives_it(tmp_path):
    s = script(
        tmp_path,
        """
        import sys
        print(sys.argv, __name__, __file__, sys.path[0], sys.modules["__main__"].__file__)
        print(input())
    """,
    )
    plain = run([s.name, "--lr", "3"], tmp_path, runner=False, input="typed\n")
    ours = run([s.name, "--lr", "3"], tmp_path, input="typed\n")
    assert ours.returncode == plain.returncode == 0
    assert ours.stdout == plain.stdout and "typed" in ours.stdout
    assert ours.stderr == ""


def test_the_module_form_runs_a_module_as_python_dash_m_does(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    script(pkg, "import sys\nprint(sys.argv[1:], __name__, sys.path[0])\n", "train.py")
    plain = run(["-m", "pkg.train", "a", "b"], tmp_path, runner=False)
    ours = run(["-m", "pkg.train", "a", "b"], tmp_path)
    assert ours.stdout == plain.stdout == f"['a', 'b'] __main__ {tmp_path}\n"


def test_sys_exit_3_exits_3(tmp_path):
    s = script(tmp_path, "import sys\nprint('bye')\nsys.exit(3)\n")
    result = run([s.name], tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (3, "bye\n", "")


def test_an_ordinary_exception_is_printed_exactly_as_python_prints_it(tmp_path):
    s = script(tmp_path, "def f():\n    raise ValueError('plain bad')\n\nf()\n")
    plain, ours = run([s.name], tmp_path, runner=False), run([s.name], tmp_path)
    assert ours.returncode == plain.returncode == 1
    assert ours.stderr == plain.stderr and "cudaassert" not in ours.stderr


def test_a_syntax_error_is_printed_exactly_as_python_prints_it(tmp_path):
    s = script(tmp_path, "def (:\n")
    plain, ours = run([s.name], tmp_path, runner=False), run([s.name], tmp_path)
    assert ours.returncode == plain.returncode == 1
    assert ours.stderr == plain.stderr and "SyntaxError" in ours.stderr


def test_a_missing_script_gets_pythons_message_and_exit_code_2(tmp_path):
    result = run(["nope.py"], tmp_path)
    assert result.returncode == 2
    assert (
        result.stderr == f"python -m cudaassert_ipy: can't open file '{tmp_path / 'nope.py'}': "
        "[Errno 2] No such file or directory\n"
    )


def test_a_missing_module_gets_no_module_named_and_exit_code_1(tmp_path):
    result = run(["-m", "no_such_module_xyz"], tmp_path)
    assert (result.returncode, result.stderr) == (1, "python -m cudaassert_ipy: No module named no_such_module_xyz\n")


def test_no_script_is_a_usage_error_that_says_what_to_give(tmp_path):
    result = run(["--blocking"], tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        "python -m cudaassert_ipy: error: no script to run; give a script (train.py ARGS...) or -m module ARGS..."
    )


def test_help_documents_every_option_and_torchrun(tmp_path):
    result = run(["--help"], tmp_path)
    assert result.returncode == 0
    for word in (
        "--validators",
        "--blocking",
        "--report-json",
        "--quiet",
        "--rerun-on-failure",
        "--no-children",
        "--apply-fix",
        "torchrun --nproc-per-node",
        "TORCHELASTIC_ERROR_FILE",
        "import cudaassert_ipy.auto",
    ):
        assert word in result.stdout


def test_a_keyboard_interrupt_prints_its_traceback_and_ends_by_sigint_as_python_does(tmp_path):
    s = script(tmp_path, "def train():\n    raise KeyboardInterrupt\n\ntrain()\n")
    plain, ours = run([s.name], tmp_path, runner=False), run([s.name], tmp_path)
    assert ours.returncode == plain.returncode == -signal.SIGINT
    assert ours.stderr == plain.stderr and "KeyboardInterrupt" in ours.stderr


def test_a_device_assert_gets_the_report_after_the_unchanged_traceback(tmp_path):
    s = script(tmp_path, DOUBLE)
    result = run([s.name], tmp_path)
    assert result.returncode == 1
    err = result.stderr
    trace_end = err.index("Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.")
    report = err.index("[cudaassert] The GPU context of this process is dead")
    assert err.index("Traceback (most recent call last):") < trace_end < report
    assert f'File "{s}", line 6, in <module>' in err and "runpy" not in err and "cudaassert_ipy/run" not in err
    assert "[cudaassert] GPU context dead · class label out of range in cross_entropy" in err
    assert LOSS_LINE in err
    assert "Your code: line 6: fail_like_gpu()" in err
    assert "Fix: Make the labels 0-based integers" in err
    assert (
        "[cudaassert] To stop the bad call before it launches, run it again with --rerun-on-failure (or "
        f"--blocking --validators): python -m cudaassert_ipy --rerun-on-failure {s.name}"
    ) in err


def test_the_cpu_twin_of_a_bad_label_names_the_label_and_the_layer(tmp_path):
    s = script(tmp_path, CPU_LABEL)
    result = run([s.name], tmp_path)
    assert result.returncode == 1
    assert result.stderr.index("IndexError: Target 5 is out of bounds.") < result.stderr.index("[cudaassert]")
    assert "[cudaassert] CPU error · class label out of range in cross_entropy" in result.stderr
    assert "the model's last layer `model` has out_features=5" in result.stderr


def test_quiet_prints_only_the_headline_and_the_fix(tmp_path):
    s = script(tmp_path, DOUBLE)
    result = run(["--quiet", s.name], tmp_path)
    tail = result.stderr[result.stderr.index("[cudaassert]") :]
    assert tail.splitlines()[0] == "[cudaassert] GPU context dead · class label out of range in cross_entropy"
    assert tail.splitlines()[1].startswith("Fix: Make the labels 0-based integers") and len(tail.splitlines()) == 2


def test_report_json_holds_the_outcome_the_rank_and_the_diagnosis(tmp_path):
    s = script(tmp_path, DOUBLE)
    out = tmp_path / "report.json"
    result = run(["--report-json", str(out), s.name], tmp_path)
    data = json.loads(out.read_text())
    assert (result.returncode, data["exit_code"], data["failed"], data["cuda_failure"]) == (1, 1, True, True)
    assert data["diagnosis"]["cause_id"] == "nll_loss_target_out_of_range"
    assert data["diagnosis"]["assert_sites"][0].startswith(LOSS_LINE)
    assert data["rank"]["rank"] is None and data["report"].startswith("[cudaassert] The GPU context")
    ok = script(tmp_path, "print('fine')\n", "ok.py")
    run(["--report-json", str(out), ok.name], tmp_path)
    assert json.loads(out.read_text())["failed"] is False


def test_report_json_in_an_unwritable_place_warns_before_the_run_and_keeps_the_exit_code(tmp_path):
    s = script(tmp_path, "import sys\nprint('ran')\nsys.exit(3)\n")
    target = tmp_path / "missing" / "r.json"
    result = run(["--report-json", str(target), s.name], tmp_path)
    assert (result.returncode, result.stdout) == (3, "ran\n")
    assert (
        f"[cudaassert] --report-json {target}: the directory {target.parent} does not exist; the run goes on "
        "and the report goes to stderr only." in result.stderr
    )
    assert (
        f"[cudaassert] cannot write the JSON report to {target} (No such file or directory); the report on "
        "stderr is complete." in result.stderr
    )


def test_torchelastic_error_file_pointing_nowhere_costs_one_line_and_nothing_else(tmp_path):
    s = script(tmp_path, DOUBLE)
    result = run([s.name], tmp_path, env={"TORCHELASTIC_ERROR_FILE": str(tmp_path / "no" / "error.json")})
    assert result.returncode == 1 and LOSS_LINE in result.stderr
    assert (
        f"[cudaassert] cannot write torchelastic's error file {tmp_path / 'no' / 'error.json'} (No such file or "
        "directory); torchrun's summary will show only the exception, the report above has the cause." in result.stderr
    )


def test_the_error_file_has_the_structure_record_exception_writes_with_the_report_in_the_callstack(tmp_path):
    from torch.distributed.elastic.multiprocessing.errors.error_handler import ErrorHandler

    reference_file = tmp_path / "reference.json"
    os.environ["TORCHELASTIC_ERROR_FILE"] = str(reference_file)
    try:
        try:
            raise RuntimeError("CUDA error: device-side assert triggered")
        except RuntimeError as e:
            ErrorHandler().record_exception(e)
    finally:
        del os.environ["TORCHELASTIC_ERROR_FILE"]
    reference = json.loads(reference_file.read_text())
    s = script(tmp_path, DOUBLE)
    ours_file = tmp_path / "error.json"
    run([s.name], tmp_path, env={"TORCHELASTIC_ERROR_FILE": str(ours_file)})
    ours = json.loads(ours_file.read_text())

    def shape(d: object) -> object:
        return {k: shape(v) for k, v in d.items()} if isinstance(d, dict) else type(d).__name__

    assert shape(ours) == shape(reference)
    assert ours["message"]["message"].startswith("AcceleratorError: CUDA error: device-side assert triggered")
    stack = ours["message"]["extraInfo"]["py_callstack"]
    assert stack.index("Traceback (most recent call last):") < stack.index("[cudaassert] GPU context dead")
    assert LOSS_LINE in stack and "Fix: Make the labels 0-based integers" in stack
    assert re.fullmatch(r"\d{10}", ours["message"]["extraInfo"]["timestamp"])


def test_validators_stop_the_bad_label_before_the_call_and_blocking_sets_cuda_launch_blocking(tmp_path):
    s = script(tmp_path, "import os\nprint('CLB', os.environ.get('CUDA_LAUNCH_BLOCKING'))\n" + CPU_LABEL)
    result = run(["--validators", "--blocking", s.name], tmp_path)
    assert result.returncode == 1 and result.stdout == "CLB 1\n"
    assert "ValidationIndexError: cross_entropy: target has 1 bad value" in result.stderr
    assert "[cudaassert] GPU alive · class label out of range in cross_entropy" in result.stderr


def test_the_cudaassert_run_console_script_takes_the_same_arguments(tmp_path):
    """The wrapper pip writes for ``[project.scripts]``, made from pyproject.toml's entry."""
    text = (ROOT / "pyproject.toml").read_text()
    entry = re.search(r'^cudaassert-run = "([\w.]+):(\w+)"$', text, re.M)
    assert entry, "pyproject.toml declares the cudaassert-run console script"
    wrapper = tmp_path / "bin" / "cudaassert-run"
    wrapper.parent.mkdir()
    wrapper.write_text(f"#!{PY}\nimport sys\nfrom {entry[1]} import {entry[2]}\nsys.exit({entry[2]}())\n")
    wrapper.chmod(0o755)
    s = script(tmp_path, DOUBLE)
    result = subprocess.run(
        [str(wrapper), "--quiet", s.name], cwd=tmp_path, env=kernel_env(), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1
    assert "[cudaassert] GPU context dead · class label out of range in cross_entropy" in result.stderr
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "train.py").write_text("import sys\nprint(sys.argv[1:])\n")
    module = subprocess.run(
        [str(wrapper), "-m", "pkg.train", "x"],
        cwd=tmp_path,
        env=kernel_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (module.returncode, module.stdout) == (0, "['x']\n"), module.stderr
    missing = subprocess.run(
        [str(wrapper), "nope.py"], cwd=tmp_path, env=kernel_env(), capture_output=True, text=True, timeout=60
    )
    assert missing.returncode == 2 and missing.stderr.startswith("cudaassert-run: can't open file")


@pytest.mark.parametrize("option", ["--report-json"])
def test_an_option_missing_its_value_is_an_argparse_error(tmp_path, option):
    result = run([option], tmp_path)
    assert result.returncode == 2 and "expected one argument" in result.stderr


def test_a_bad_label_from_a_dataloader_is_traced_to_its_dataset_index(tmp_path):
    s = script(
        tmp_path,
        """
        import torch, torch.nn.functional as F
        from torch.utils.data import DataLoader, TensorDataset
        y = torch.tensor([0, 1, 2, 3, 4, 0, 1, 9, 2, 3, 4, 0])
        loader = DataLoader(TensorDataset(torch.randn(12, 4), y), batch_size=4)
        model = torch.nn.Linear(4, 5)
        for xb, yb in loader:
            loss = F.cross_entropy(model(xb), yb)
    """,
    )
    result = run([s.name], tmp_path)
    assert result.returncode == 1
    assert "batch 1 of epoch 0 from `loader`: `loader.dataset[7]` has class label 9" in result.stderr
