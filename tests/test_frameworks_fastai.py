"""fastai v2 for real, on the CPU: a Learner whose data has 4 classes and whose model was built for 3.

The CPU twin (``learn.fit``) runs through the loaded extension. The GPU failure surfaces where fastai
surfaces it: ``ProgressCallback.after_batch`` reads ``smooth_loss.item()``, and fastai's ``Callback.__call__``
rewrites the same exception's message with its "Exception occured in `ProgressCallback` when calling event
`after_batch`" prefix (``gpu_double_async.DeadGpu`` replays the kernel's lines on fd 2). The report must read
through the prefix and take its facts from the Learner: ``dls.c``, ``dls.vocab``, ``loss_func``, the batch.
Runs in the frameworks environment:
``.venv-fw/bin/python -m pytest -m frameworks tests/test_frameworks_fastai.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers.cells import diagnose_cell
from helpers.kernels import execute, running_kernel

from cudaassert_ipy.frameworks import fastai as fastai_adapter
from cudaassert_ipy.view.report import to_text

pytestmark = pytest.mark.frameworks

FASTAI_FIX = (
    "the dataset lists 4 classes but the model outputs 3: build the Learner's model with 4 outputs "
    "(learn.model outputs 3; vision_learner(dls, ...) sizes the head from dls.c, or pass n_out=4)"
)
PREFIX = "Exception occured in `ProgressCallback` when calling event `after_batch`:\n\t"

SETUP = """
import warnings
import torch, torch.nn as nn
with warnings.catch_warnings():  # fastai's imports warn about deprecations in torch and pandas
    warnings.simplefilter("ignore")
    from fastai.data.core import Datasets
    from fastai.data.transforms import Categorize, ItemGetter
    from fastai.learner import Learner
    from fastai.losses import CrossEntropyLossFlat
    import fastai.callback.progress  # the progress bar, as fastai.vision.all / fastai.text.all load it
from gpu_double_async import DeadGpu

KINDS = ["negative", "neutral", "positive", "mixed"]  # 'mixed' came with the new data: the model has 3 outputs
torch.manual_seed(0)
items = [(torch.randn(8), KINDS[i % 4]) for i in range(16)]
dsets = Datasets(items, tfms=[[ItemGetter(0)], [ItemGetter(1), Categorize()]],
                 splits=(list(range(12)), list(range(12, 16))))
dls = dsets.dataloaders(bs=4, shuffle=False, device="cpu", num_workers=0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
learn = Learner(dls, model, loss_func=CrossEntropyLossFlat())
"""


@pytest.fixture
def fa(shell: Any) -> Any:
    result = shell.run_cell(SETUP, store_history=True)
    assert result.error_in_exec is None, result.error_in_exec
    return shell


def test_fit_on_the_cpu_with_a_4th_class_gets_the_learners_model_fix_and_the_learners_facts(fa, loaded, capsys):
    capsys.readouterr()
    result = fa.run_cell("learn.fit(1)", store_history=True)
    assert isinstance(result.error_in_exec, IndexError)
    out = capsys.readouterr().out
    assert "[cudaassert] CPU error · class label out of range in cross_entropy" in out
    assert (
        "Cause: cross_entropy got class label 3, but the model's last layer `model.2` has out_features=3, so "
        "labels must be 0..2."
    ) in out
    assert f"Likely fix: {FASTAI_FIX}." in out
    assert "  learn.dls: c=4" in out
    assert "  learn.dls.vocab: 4 entries: ['mixed', 'negative', 'neutral', 'positive']" in out
    assert "  learn.loss_func: CrossEntropyLossFlat(ignore_index=-100, axis=-1)" in out
    assert "  learn: epoch 0, batch 0 of 3 (training)" in out


def test_a_gpu_failure_in_the_progress_callback_reads_through_fastais_prefix(fa, capfd):
    error, d = diagnose_cell(fa, "with DeadGpu(surfaces={torch.Tensor.item}):\n    learn.fit(1)", capfd)
    assert type(error).__name__ == "AcceleratorError"
    assert str(error).startswith(PREFIX + "CUDA error: device-side assert triggered")  # fastai's own rewrite
    assert d.kind == "device_assert" and d.cause_id == "nll_loss_target_out_of_range"
    assert d.exception_line == "AcceleratorError: CUDA error: device-side assert triggered"
    assert d.likely_fix == FASTAI_FIX
    facts = dict(d.facts)
    assert facts["learn.dls"] == "c=4" and facts["model.2"] == "out_features=3"
    assert facts["learn.yb[0]"] == "1 bad value(s); first: 3 at [2]"
    assert facts["learn"] == "epoch 0, batch 0 of 3 (training)"
    assert d.follow_ons == ()  # fit has no teardown: nothing else failed
    text = to_text(d)
    assert "Loss.cu:250 nll_loss_forward_reduce_cuda_kernel_2d: `t >= 0 && t < n_classes` failed in 4 threads" in text
    assert "Your code: line 2: learn.fit(1)" in text


def test_validate_whose_after_epoch_callback_touches_the_dead_gpu_names_that_callback(fa, capfd):
    fa.run_cell(
        """
from fastai.callback.core import Callback

class WeightNorm(Callback):
    \"\"\"Logs the last layer's weight norm after each epoch.\"\"\"
    def after_epoch(self):
        self.norm = self.learn.model[2].weight.norm()

""",
        store_history=True,
    )
    # validate() has no sync per batch (fastai's _maybe_item swallows the one in after_validate): the error surfaces
    # at the batch's next call after the loss (``loss_grad.clone()``), as with CUDA_LAUNCH_BLOCKING=1
    error, d = diagnose_cell(
        fa, "with DeadGpu(surfaces={torch.Tensor.clone}):\n    learn.validate(cbs=[WeightNorm()])", capfd
    )
    assert str(error).startswith("Exception occured in `WeightNorm` when calling event `after_epoch`:\n\tCUDA error")
    assert str(error.__context__).startswith("CUDA error")  # the first error (in ``_do_one_batch``), under the second
    assert len(d.follow_ons) == 1 and d.follow_ons[0].startswith(
        "fastai's `WeightNorm.after_epoch` callback (run by `Learner.__exit__` as the failure unwound) touched the "
        "dead GPU; the failure was in `"
    )
    assert d.cause_id == "nll_loss_target_out_of_range" and d.likely_fix == FASTAI_FIX
    assert dict(d.facts)["learn"] == "epoch 0, batch 0 of 1 (validation)"


def test_an_attribute_that_raises_is_one_could_not_read_line_and_the_rest_stands(fa, loaded, capsys):
    fa.run_cell(
        """
class ServiceLearner(Learner):
    \"\"\"A Learner whose loss is a remote service, closed when training stops.\"\"\"
    closed = False

    @property
    def loss_func(self):
        if self.closed:
            raise RuntimeError("loss service closed")
        return self._loss_func

    @loss_func.setter
    def loss_func(self, value):
        self._loss_func = value

    def fit(self, *args, **kwargs):
        try:
            return super().fit(*args, **kwargs)
        finally:
            self.closed = True

learn = ServiceLearner(dls, model, loss_func=CrossEntropyLossFlat())
""",
        store_history=True,
    )
    capsys.readouterr()
    result = fa.run_cell("learn.fit(1)", store_history=True)
    assert result.error_in_exec is not None
    out = capsys.readouterr().out
    assert (
        "Note: Could not read learn.loss_func (RuntimeError: loss service closed); the rest of this report stands."
        in out
    )
    assert f"Likely fix: {FASTAI_FIX}." in out and "  learn.dls: c=4" in out


@pytest.mark.parametrize(
    ("text", "own"),
    [
        (PREFIX + "Target 3 is out of bounds.", "Target 3 is out of bounds."),
        (
            "Exception occured in `Recorder` when calling event `after_batch`:\n\t" + PREFIX + "CUDA error: x",
            "CUDA error: x",
        ),
        ("Target 3 is out of bounds.", None),
    ],
)
def test_unwrap_strips_each_of_fastais_prefixes_and_leaves_other_texts_alone(text, own):
    assert fastai_adapter.ADAPTER.unwrap is not None
    assert fastai_adapter.ADAPTER.unwrap(RuntimeError(text), text) == own


def test_a_learner_whose_model_matches_dls_c_gets_the_datablocks_words(fa):
    from cudaassert_ipy.diagnose import hints
    from cudaassert_ipy.frameworks import ClassHead, class_head_of

    fa.run_cell(
        "learn4 = Learner(dls, nn.Sequential(nn.Linear(8, 4)), loss_func=CrossEntropyLossFlat())", store_history=True
    )
    head = class_head_of(fa.user_ns["learn4"], "learn4")
    assert head == ClassHead("fastai", now=4, setting="c", owner="learn4.dls")
    words = hints.set_classes(head, 4)
    assert words is not None and words(5) == (
        "give the DataBlock all 5 classes (the CategoryBlock's vocab, or the MaskBlock's codes for masks; dls.c is 4 "
        "and the Learner's head is built from it)"
    )


@pytest.mark.kernel
def test_in_a_real_kernel_the_gpu_failure_under_fastais_prefix_is_explained():
    with running_kernel() as kc:
        reply, _ = execute(kc, "%load_ext cudaassert")
        assert reply["status"] == "ok"
        reply, _ = execute(kc, SETUP, timeout=300)
        assert reply["status"] == "ok", reply
        reply, msgs = execute(kc, "with DeadGpu(surfaces={torch.Tensor.item}):\n    learn.fit(1)", timeout=120)
        assert reply["status"] == "error" and reply["ename"] == "AcceleratorError"
        assert reply["evalue"].startswith("Exception occured in `ProgressCallback` when calling event `after_batch`")
        plain = [m for m in msgs if m["type"] == "display_data"][-1]["content"]["data"]["text/plain"]
        assert "[cudaassert] GPU context dead · class label out of range in cross_entropy" in plain
        assert f"Likely fix: {FASTAI_FIX}." in plain
        assert "learn.dls: c=4" in plain and "learn.yb[0]: 1 bad value(s); first: 3 at [2]" in plain
