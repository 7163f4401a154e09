"""Lightning 2.x for real, on the CPU: a LightningModule with a ``num_classes`` hparam fed a 4th class.

The CPU twin runs through the loaded extension. The GPU failure surfaces in ``training_step``
(``loss.item()``), then Lightning's own ``_call_and_handle_interrupt`` runs its real teardown
(``Strategy.teardown`` → ``lightning_module.cpu()``), which touches the dead (simulated) GPU and raises a
second CUDA error while the first is handled (``gpu_double_async.DeadGpu``). The report must diagnose the
first, point "Your code" at ``training_step``, keep its host facts, and name the teardown in one line.
Runs in the frameworks environment:
``.venv-fw/bin/python -m pytest -m frameworks tests/test_frameworks_lightning.py``.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from helpers.cells import diagnose_cell
from helpers.kernels import execute, running_kernel

from cudaassert_ipy.view.report import to_text

pytestmark = pytest.mark.frameworks

PL_FIX = (
    "the labels reach 3 with 3 classes: if you have 4 classes, build `LitClassifier` with num_classes=4 (its "
    "hparams.num_classes=3 sizes the last layer); if labels start at 1, subtract 1"
)
TEARDOWN = (
    "Lightning's teardown (moving the model to the CPU) touched the dead GPU; the failure was in `training_step`."
)

SETUP = """
import logging, warnings
import torch, torch.nn as nn, torch.nn.functional as F
import lightning as L
from torch.utils.data import DataLoader, TensorDataset
from gpu_double_async import DeadGpu
warnings.filterwarnings("ignore", module="lightning")
logging.getLogger("lightning").setLevel(logging.ERROR)

class LitClassifier(L.LightningModule):
    def __init__(self, num_classes=3):
        super().__init__()
        self.save_hyperparameters()
        self.body = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
        self.head = nn.Linear(16, self.hparams.num_classes)
        self.losses = []

    def forward(self, x):
        return self.head(self.body(x))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.losses.append(loss.item())
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

torch.manual_seed(0)
labels = torch.tensor([0, 1, 2, 0, 1, 2, 3, 0])  # class 3 is new: the module was built for 3 classes
loader = DataLoader(TensorDataset(torch.randn(8, 8), labels), batch_size=4)
model = LitClassifier()

def make_trainer(**kw):
    options = dict(max_epochs=1, accelerator="cpu", logger=False, enable_checkpointing=False,
                   enable_progress_bar=False, enable_model_summary=False)
    return L.Trainer(**{**options, **kw})

trainer = make_trainer()
"""
STEP_LINE = "loss = F.cross_entropy(self(x), y)"


@pytest.fixture
def lit(shell: Any) -> Any:
    result = shell.run_cell(SETUP, store_history=True)
    assert result.error_in_exec is None, result.error_in_exec
    return shell


def test_fit_on_the_cpu_with_a_bad_label_gets_the_num_classes_hparam_fix(lit, loaded, capsys):
    capsys.readouterr()
    result = lit.run_cell("trainer.fit(model, loader)", store_history=True)
    assert isinstance(result.error_in_exec, IndexError)
    out = capsys.readouterr().out
    assert "[cudaassert] CPU error · class label out of range in cross_entropy" in out
    assert (
        "Cause: cross_entropy got class label 3, but the model's last layer `model.head` has out_features=3, so "
        "labels must be 0..2."
    ) in out
    assert f"Likely fix: {PL_FIX}." in out
    assert "  model.hparams: num_classes=3" in out and "  model.head: out_features=3" in out
    assert "Follow-on" not in out  # on the CPU the teardown works: nothing else failed


def test_a_gpu_failure_in_the_step_then_lightnings_teardown_reports_the_first_and_names_the_teardown(lit, capfd):
    error, d = diagnose_cell(lit, "with DeadGpu(surfaces={torch.Tensor.item}):\n    trainer.fit(model, loader)", capfd)
    first = error.__context__
    assert type(error).__name__ == type(first).__name__ == "AcceleratorError"
    names = [tb.tb_frame.f_code.co_name for tb in _tbs(error.__traceback__)]
    assert "_teardown" in names and "training_step" not in names  # the top error is Lightning's teardown
    assert d.follow_ons == (TEARDOWN,)
    assert d.user_line is not None and d.user_line[2] == "self.losses.append(loss.item())"
    assert d.kind == "device_assert" and d.cause_id == "nll_loss_target_out_of_range"
    assert d.likely_fix == PL_FIX
    facts = dict(d.facts)
    assert facts["model.head"] == "out_features=3" and facts["model.hparams"] == "num_classes=3"
    assert facts["trainer"] == "epoch 0, global step 1, stage train"
    text = to_text(d)
    assert text.splitlines()[1:3] == [
        "[cudaassert] GPU context dead · class label out of range in cross_entropy",
        f"Follow-on: {TEARDOWN}",
    ]
    assert "Your code: line 23: self.losses.append(loss.item())" in text
    assert "Loss.cu:250 nll_loss_forward_reduce_cuda_kernel_2d: `t >= 0 && t < n_classes` failed in 4 threads" in text


def test_a_checkpoint_on_exception_that_touches_the_dead_gpu_is_said_to_be_missing(lit, capfd, tmp_path):
    result = lit.run_cell(
        f"from lightning.pytorch.callbacks import OnExceptionCheckpoint\n"
        f"trainer = make_trainer(enable_checkpointing=True, "
        f"callbacks=[OnExceptionCheckpoint({str(tmp_path)!r})])",
        store_history=True,
    )
    assert result.error_in_exec is None, result.error_in_exec
    _, d = diagnose_cell(lit, "with DeadGpu(surfaces={torch.Tensor.item}):\n    trainer.fit(model, loader)", capfd)
    assert d.follow_ons == (
        "Lightning's checkpoint on exception (`OnExceptionCheckpoint.on_exception`) touched the dead GPU, so the "
        "checkpoint was not written and is missing; the failure was in `training_step`.",
    )
    assert not os.listdir(tmp_path)
    assert d.likely_fix == PL_FIX


def _tbs(tb: Any) -> list[Any]:
    out = []
    while tb is not None:
        out.append(tb)
        tb = tb.tb_next
    return out


@pytest.mark.kernel
def test_in_a_real_kernel_the_teardown_is_a_follow_on_and_the_first_error_is_explained():
    with running_kernel() as kc:
        reply, _ = execute(kc, "%load_ext cudaassert")
        assert reply["status"] == "ok"
        reply, _ = execute(kc, SETUP, timeout=300)
        assert reply["status"] == "ok", reply
        reply, msgs = execute(
            kc, "with DeadGpu(surfaces={torch.Tensor.item}):\n    trainer.fit(model, loader)", timeout=120
        )
        assert reply["status"] == "error" and reply["ename"] == "AcceleratorError"
        traceback = "\n".join(m["content"]["traceback"][-1] for m in msgs if m["type"] == "error")
        assert "AcceleratorError" in traceback
        plain = [m for m in msgs if m["type"] == "display_data"][-1]["content"]["data"]["text/plain"]
        assert plain.splitlines()[1:3] == [
            "[cudaassert] GPU context dead · class label out of range in cross_entropy",
            f"Follow-on: {TEARDOWN}",
        ]
        assert f"Likely fix: {PL_FIX}." in plain
        assert "Your code: line 23: self.losses.append(loss.item())" in plain
        assert "model.hparams: num_classes=3" in plain and "model.head: out_features=3" in plain


def test_hparams_that_raise_when_read_are_one_could_not_read_line_and_the_rest_stands(lit, loaded, capsys):
    """A read an adapter makes through a call (the hparams container's ``get``) reaches the report's "Could not
    read" line like an attribute that raises (frameworks/lightning.py reads it through ``Reader.call``)."""
    result = lit.run_cell(
        """
class ClosedStore(dict):
    def get(self, key, default=None):
        raise RuntimeError("hparams store closed")

model._hparams = ClosedStore(num_classes=3)
""",
        store_history=True,
    )
    assert result.error_in_exec is None, result.error_in_exec
    capsys.readouterr()
    result = lit.run_cell("trainer.fit(model, loader)", store_history=True)
    assert isinstance(result.error_in_exec, IndexError)
    out = capsys.readouterr().out
    assert (
        "Note: Could not read model.hparams (RuntimeError: hparams store closed), trainer.lightning_module.hparams "
        "(RuntimeError: hparams store closed); the rest of this report stands."
    ) in out
    assert (
        "Cause: cross_entropy got class label 3, but the model's last layer `model.head` has out_features=3, so "
        "labels must be 0..2."
    ) in out
    assert "  model.head: out_features=3" in out and "model.hparams:" not in out
    assert (
        "Likely fix: the labels reach 3 with 3 classes: if you have 4 classes, make the last layer output 4 "
        "logits (out_features=4)" in out
    )  # no hparam read: the generic words
