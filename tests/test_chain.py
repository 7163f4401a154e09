"""The first error wins: a CUDA error raised by cleanup while the first one is handled is a follow-on.

Real exception chains from real cells (an in-process IPython shell, no extension loaded: each test runs
the pipeline itself on the cell's error and its fd 2 text). The GPU is the only stand-in: the failing
kernel's lines and the exact error texts (``gpu_double``), surfacing late and then sticky
(``gpu_double_async.DeadGpu``), so that torch's own ``Module.cpu()`` fails for real on the dead "GPU".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from cudaassert_ipy.diagnose.detection import Kind, classify
from cudaassert_ipy.diagnose.diagnosis import Diagnosis
from cudaassert_ipy.diagnose.pipeline import diagnose_failure, read_failure
from cudaassert_ipy.frameworks import ADAPTERS, Adapter, Found, Reader, Stack
from cudaassert_ipy.view.report import to_text

SETUP = """
import torch, torch.nn as nn, torch.nn.functional as F
from gpu_double import FOLLOW_ON_WORDINGS, make_exception
from gpu_double_async import DeadGpu
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
labels = torch.tensor([0, 2, 3, 1])

def step(x, y):
    loss = F.cross_entropy(model(x), y)
    return loss.item()

def fit():
    try:
        step(torch.randn(4, 8), labels)
    except BaseException:
        model.cpu()  # cleanup that touches the dead GPU
        raise
"""
DEAD = "with DeadGpu(surfaces={torch.Tensor.item}):\n    "


def run_cell(shell: Any, code: str, capfd: Any) -> tuple[BaseException, str]:
    capfd.readouterr()
    result = shell.run_cell(code, store_history=True)
    assert result.error_in_exec is not None, "the cell did not fail"
    return result.error_in_exec, capfd.readouterr().err


def diagnose_cell(shell: Any, code: str, capfd: Any, adapters: Sequence[Adapter] = ADAPTERS) -> Diagnosis:
    """The cell's error and its fd 2 text through the same pipeline the extension runs."""
    error, text = run_cell(shell, code, capfd)
    detection, sites = read_failure(error, text)
    assert detection is not None
    _, diagnosis = diagnose_failure(detection, sites, text, code, 2, shell.user_ns, adapters=adapters)
    return diagnosis


@pytest.fixture
def cells(shell: Any) -> Any:
    result = shell.run_cell(SETUP, store_history=True)
    assert result.error_in_exec is None
    return shell


def test_a_cuda_error_from_cleanup_is_a_follow_on_and_the_first_error_is_diagnosed(cells, capfd):
    error, text = run_cell(cells, DEAD + "fit()", capfd)
    assert error.__context__ is not None and type(error.__context__).__name__ == "AcceleratorError"
    detection, sites = read_failure(error, text)
    assert detection is not None and detection.exception is error.__context__
    assert detection.top is error and detection.later == (error,)
    _, d = diagnose_failure(detection, sites, text, "fit()", 2, cells.user_ns)
    assert d.follow_ons == ("moving the model (`Module.cpu()`) touched the dead GPU; the failure was in `step`.",)
    assert d.user_line is not None and d.user_line[2] == "return loss.item()"
    assert d.likely_fix == (
        "the labels reach 3 with 3 classes: if you have 4 classes, make the last layer output "
        "4 logits (out_features=4); if labels start at 1, subtract 1"
    )
    assert ("model.2", "out_features=3") in d.facts
    text = to_text(d)
    assert text.splitlines()[2] == (
        "Follow-on: moving the model (`Module.cpu()`) touched the dead GPU; the failure was in `step`."
    )
    assert "Your code: line 9: return loss.item()" in text


def test_a_suppressed_context_still_leads_to_the_first_error(cells, capfd):
    code = DEAD + (
        "try:\n        fit()\n    except RuntimeError:\n"
        "        raise RuntimeError('training failed: ' + 'CUDA error: device-side assert triggered') "
        "from None"
    )
    d = diagnose_cell(cells, code, capfd)
    assert d.user_line is not None and d.user_line[2] == "return loss.item()"
    assert d.cause_id == "nll_loss_target_out_of_range"
    assert len(d.follow_ons) == 2  # Module.cpu() in fit, and the re-raise around it
    assert d.follow_ons[0].startswith("moving the model (`Module.cpu()`) touched the dead GPU")
    assert d.follow_ons[1] == (
        "The later `RuntimeError: training failed: CUDA error: device-side assert triggered` "
        "(in `<module>`) touched the dead GPU too; the failure was in `step`."
    )


def test_a_wrapper_raised_from_the_cuda_error_is_not_a_follow_on(cells, capfd):
    code = (
        DEAD + "try:\n        step(torch.randn(4, 8), labels)\n    except Exception as e:\n"
        "        raise ValueError('step failed') from e"
    )
    d = diagnose_cell(cells, code, capfd)
    assert d.kind == "device_assert" and d.follow_ons == ()
    assert d.exception_line.startswith("AcceleratorError: CUDA error: device-side assert triggered")


def test_a_library_error_that_surfaced_first_is_the_asserts_follow_on(cells, capfd):
    code = (
        "try:\n    raise make_exception(*FOLLOW_ON_WORDINGS['cublas sgemm'])\nexcept RuntimeError:\n"
        "    raise make_exception('AcceleratorError', 'CUDA error: device-side assert triggered')"
    )
    error, _ = run_cell(cells, code, capfd)
    detection = classify(error)
    assert detection is not None and detection.kind is Kind.DEVICE_ASSERT and detection.follow_on
    assert detection.exception is error.__context__ and detection.later == (error,)
    assert detection.note is not None and "CUBLAS_STATUS_EXECUTION_FAILED" in detection.note


@pytest.mark.parametrize(
    "code",
    [
        "try:\n    {}['k']\nexcept KeyError:\n    raise ValueError('bad')",
        "try:\n    1/0\nexcept ZeroDivisionError as e:\n    raise KeyError('k') from e",
        "try:\n    1/0\nexcept ZeroDivisionError:\n    raise KeyError('k') from None",
    ],
)
def test_ordinary_error_chains_are_not_ours(cells, capfd, code):
    error, _ = run_cell(cells, code, capfd)
    assert classify(error) is None


def test_a_plain_error_in_cleanup_is_not_a_follow_on(cells, capfd):
    code = DEAD + "try:\n        step(torch.randn(4, 8), labels)\n    finally:\n        model.nope"
    error, text = run_cell(cells, code, capfd)
    assert isinstance(error, AttributeError)
    detection, _ = read_failure(error, text)
    assert detection is not None and detection.kind is Kind.DEVICE_ASSERT and detection.later == ()


def _crashes(stack: Stack, read: Reader) -> Found:
    raise ZeroDivisionError("division by zero")


class Config:
    """An object whose attribute raises when read, as a half-initialised framework object can."""

    @property
    def num_labels(self) -> int:
        raise RuntimeError("config not loaded")


def _reads(stack: Stack, read: Reader) -> Found:
    read.get(Config(), "num_labels", "model.config", needed=True)
    read.get(stack.user_ns.get("nothing_here"), "train_dataset", "trainer", needed=True)
    return Found(facts=(("where", "the test adapter looked"),))


def test_a_crashing_adapter_is_one_note_and_the_rest_of_the_report_stands(cells, capfd):
    broken = Adapter(name="broken", packages=("torch",), found=_crashes)
    d = diagnose_cell(cells, DEAD + "fit()", capfd, adapters=(broken, *ADAPTERS))
    assert (
        "[internal] the broken adapter failed in found: ZeroDivisionError: division by zero; the rest of this "
        "report stands."
    ) in d.notes
    assert d.likely_fix is not None and "out_features=4" in d.likely_fix
    assert d.follow_ons and d.follow_ons[0].startswith("moving the model (`Module.cpu()`)")


def test_what_an_adapter_could_not_read_is_one_line_and_its_other_facts_stand(cells, capfd):
    reading = Adapter(name="reading", packages=("torch",), found=_reads)
    d = diagnose_cell(cells, DEAD + "fit()", capfd, adapters=(reading, *ADAPTERS))
    assert [n for n in d.notes if n.startswith("Could not read")] == [
        "Could not read model.config.num_labels (RuntimeError: config not loaded), trainer.train_dataset (none); "
        "the rest of this report stands."
    ]
    assert ("where", "the test adapter looked") in d.facts
    assert d.likely_fix is not None and "out_features=4" in d.likely_fix


RUNNER_SCRIPT = """
import torch, torch.nn as nn, torch.nn.functional as F
from gpu_double_async import DeadGpu
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
labels = torch.tensor([0, 2, 3, 1])

def step(x, y):
    loss = F.cross_entropy(model(x), y)
    return loss.item()

def fit():
    try:
        step(torch.randn(4, 8), labels)
    except BaseException:
        model.cpu()
        raise

with DeadGpu(surfaces={torch.Tensor.item}):
    fit()
"""


def test_the_runner_diagnoses_the_first_error_with_the_scripts_facts_and_names_the_cleanup(tmp_path):
    import subprocess
    import sys

    from helpers import kernel_env

    (tmp_path / "train.py").write_text(RUNNER_SCRIPT)
    done = subprocess.run(
        [sys.executable, "-m", "cudaassert_ipy", "train.py"],
        cwd=tmp_path,
        env=kernel_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert "During handling of the above exception, another exception occurred:" in done.stderr
    report = done.stderr.split("[cudaassert] The GPU context of this process is dead", 1)[1]
    assert "Follow-on: moving the model (`Module.cpu()`) touched the dead GPU; the failure was in `step`." in report
    assert "Your code: line 9: return loss.item()" in report
    assert "model.2: out_features=3" in report and "labels: 1 bad value(s); first: 3 at [2]" in report
