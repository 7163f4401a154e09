"""timm for real, on the CPU: ``create_model(..., num_classes=3)`` trained with timm's label smoothing and a 4th class.

Under ``LabelSmoothingCrossEntropy`` a label >= num_classes is an index of ``gather``: on the CPU that is
"index 3 is out of bounds for dimension 1 with size 3", on a GPU the ScatterGatherKernel.cu assert, which
surfaces at ``loss.item()`` in the training loop, as in timm's ``train_one_epoch``
(``gpu_double_async.DeadGpu`` replays the kernel's lines on fd 2). Both must be explained as the label range
(the label-smoothing rule), with the fix in timm's words. Built with ``pretrained=False``: nothing is downloaded.
Runs in the frameworks environment:
``.venv-fw/bin/python -m pytest -m frameworks tests/test_frameworks_timm.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers.cells import diagnose_cell

from cudaassert_ipy.diagnose.pipeline import diagnose_failure, read_failure
from cudaassert_ipy.view.report import to_text

pytestmark = pytest.mark.frameworks

TIMM_FIX = (
    "the labels reach 3 with 3 classes: if you have 4 classes, create the model with timm.create_model(..., "
    "num_classes=4); if labels start at 1, subtract 1"
)
SMOOTHING = (
    "`loss_fn` (LabelSmoothingCrossEntropy) gathers each label's log-probability, so the labels are the "
    "gather's index: class label 3 is outside 0..2 (the model has 3 classes)."
)

SETUP = """
import torch
import timm
from timm.loss import LabelSmoothingCrossEntropy
from torch.utils.data import DataLoader, TensorDataset
from gpu_double_async import DeadGpu

torch.manual_seed(0)
model = timm.create_model("resnet18", pretrained=False, num_classes=3)
loss_fn = LabelSmoothingCrossEntropy(smoothing=0.1)
labels = torch.tensor([0, 1, 2, 3, 0, 1, 2, 0])  # class 3 is new: the model was created for 3 classes
loader = DataLoader(TensorDataset(torch.randn(8, 3, 32, 32), labels), batch_size=4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
losses = []

def train_one_epoch():
    for input, target in loader:
        loss = loss_fn(model(input), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
"""


@pytest.fixture
def tm(shell: Any) -> Any:
    result = shell.run_cell(SETUP, store_history=True)
    assert result.error_in_exec is None, result.error_in_exec
    return shell


def test_label_smoothing_on_the_cpu_explains_the_gather_as_the_label_range_in_timms_words(tm, loaded, capsys):
    capsys.readouterr()
    result = tm.run_cell("train_one_epoch()", store_history=True)
    assert isinstance(result.error_in_exec, RuntimeError)
    assert str(result.error_in_exec) == "index 3 is out of bounds for dimension 1 with size 3"
    out = capsys.readouterr().out
    assert "[cudaassert] CPU error · " in out and " in LabelSmoothingCrossEntropy" in out
    assert f"Cause: {SMOOTHING}" in out
    assert f"Likely fix: {TIMM_FIX}." in out
    assert "  model: num_classes=3, classifier `fc`: Linear(out_features=3)" in out
    assert "  loss_fn: LabelSmoothingCrossEntropy(smoothing=0.1): labels >= num_classes fail in gather" in out
    assert "  labels: 1 bad value(s); first: 3 at [3]" in out


def test_a_gpu_gather_assert_at_loss_item_is_the_label_range_under_label_smoothing(tm, capfd):
    error, d = diagnose_cell(tm, "with DeadGpu(surfaces={torch.Tensor.item}):\n    train_one_epoch()", capfd)
    assert type(error).__name__ == "AcceleratorError"
    assert d.kind == "device_assert" and d.cause_id == "scatter_gather_index_out_of_range_v2"
    assert d.specific is not None and d.specific.startswith(SMOOTHING)
    assert d.likely_fix == TIMM_FIX
    facts = dict(d.facts)
    assert facts["model"] == "num_classes=3, classifier `fc`: Linear(out_features=3)"
    assert facts["labels"] == "1 bad value(s); first: 3 at [3]"
    text = to_text(d)
    assert (
        'ScatterGatherKernel.cu:163 operator(): `idx_dim >= 0 && idx_dim < index_size && "scatter gather kernel '
        'index out of bounds"` failed in 4 threads'
    ) in text
    assert "Your code: line 21: losses.append(loss.item())" in text


def test_without_smoothing_the_nll_assert_gets_the_same_timm_fix(tm, capfd):
    tm.run_cell("loss_fn = torch.nn.CrossEntropyLoss()", store_history=True)
    _, d = diagnose_cell(tm, "with DeadGpu(surfaces={torch.Tensor.item}):\n    train_one_epoch()", capfd)
    assert d.cause_id == "nll_loss_target_out_of_range"
    assert d.likely_fix == TIMM_FIX


def test_a_gather_with_no_label_smoothing_loss_around_is_left_to_the_scatter_rule(tm, capfd):
    tm.run_cell(
        """
table = torch.randn(4, 3)
rows = torch.tensor([[0], [1], [3]])
def lookup():
    picked = table.gather(1, rows)
    return picked.sum().item()
""",
        store_history=True,
    )
    tm.user_ns.pop("loss_fn")
    _, d = diagnose_cell(tm, "with DeadGpu(surfaces={torch.Tensor.item}):\n    lookup()", capfd)
    assert d.cause_id == "scatter_gather_index_out_of_range_v2"
    assert d.specific is None or "label" not in d.specific


def test_a_classifier_that_cannot_be_read_is_one_could_not_read_line_and_the_rest_stands(tm, loaded, capsys):
    tm.run_cell(
        """
def pruned():
    raise RuntimeError("classifier was pruned")
model.get_classifier = pruned
""",
        store_history=True,
    )
    capsys.readouterr()
    tm.run_cell("train_one_epoch()", store_history=True)
    out = capsys.readouterr().out
    assert (
        "Note: Could not read model.get_classifier() (RuntimeError: classifier was pruned); the rest of this "
        "report stands."
    ) in out
    assert f"Likely fix: {TIMM_FIX}." in out and "  model: num_classes=3" in out


def test_the_hf_trainers_label_smoother_gather_is_the_label_range_too(shell, loaded, capsys, tmp_path):
    """The same rule for the HF Trainer's ``LabelSmoother`` (``label_smoothing_factor``): its gather fails on 3."""
    result = shell.run_cell(
        f"""
import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

torch.manual_seed(0)
config = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                    max_position_embeddings=32, num_labels=3)
data = [{{"input_ids": torch.randint(5, 64, (8,)), "labels": torch.tensor(i % 4)}} for i in range(8)]
args = TrainingArguments(output_dir={str(tmp_path)!r}, per_device_train_batch_size=4, num_train_epochs=1, report_to=[],
                         use_cpu=True, save_strategy="no", logging_strategy="no", disable_tqdm=True,
                         label_smoothing_factor=0.1)
trainer = Trainer(model=BertForSequenceClassification(config), args=args, train_dataset=data)
""",
        store_history=True,
    )
    assert result.error_in_exec is None, result.error_in_exec
    capsys.readouterr()
    result = shell.run_cell("trainer.train()", store_history=True)
    assert str(result.error_in_exec) == "index 3 is out of bounds for dimension 1 with size 3"
    out = capsys.readouterr().out
    assert (
        "Cause: The Trainer's LabelSmoother gathers each label's log-probability, so the labels are the gather's "
        "index: class label 3 is outside 0..2 (the model has 3 classes)."
    ) in out
    assert (
        "Likely fix: the labels reach 3 with 3 classes: if you have 4 classes, load the model with "
        "from_pretrained(..., num_labels=4, ignore_mismatched_sizes=True) and give it id2label/label2id with 4 "
        "entries; if labels start at 1, subtract 1."
    ) in out


def test_with_plain_cross_entropy_one_fix_on_every_path(tm, capfd):
    """Twin, GPU, validator and preflight word the timm fix alike: the validator finds the model in the notebook's
    namespace (it is not on the stack when the loss is checked)."""
    from cudaassert_ipy.checks import ValidationError, validators
    from cudaassert_ipy.checks.preflight import preflight

    tm.run_cell("loss_fn = torch.nn.CrossEntropyLoss()", store_history=True)

    def post_mortem(error: BaseException, stderr: str = "") -> str | None:
        detection, sites = read_failure(error, stderr)
        assert detection is not None
        return diagnose_failure(detection, sites, stderr, "", None, tm.user_ns)[1].likely_fix

    def run_error(code: str) -> BaseException:
        result = tm.run_cell(code, store_history=True)
        assert result.error_in_exec is not None
        return result.error_in_exec

    twin = post_mortem(run_error("train_one_epoch()"))
    _, d = diagnose_cell(tm, "with DeadGpu(surfaces={torch.Tensor.item}):\n    train_one_epoch()", capfd)
    with validators():
        stop = run_error("train_one_epoch()")
    assert isinstance(stop, ValidationError), stop
    report = preflight(tm.user_ns["loader"].dataset, model=tm.user_ns["model"], progress=False)
    assert twin == d.likely_fix == stop.hint == post_mortem(stop) == report.labels_fix == TIMM_FIX


def test_under_label_smoothing_the_validators_gather_stop_words_the_same_label_fix(tm, capfd):
    """The validator stops the smoothing loss's ``gather`` and, as the index is the class labels, gives the label
    fix in timm's words: the same sentence as the CPU twin's and the GPU failure's post-mortems."""
    from cudaassert_ipy.checks import ValidationError, validators

    def post_mortem(error: BaseException) -> str | None:
        detection, sites = read_failure(error, "")
        assert detection is not None
        return diagnose_failure(detection, sites, "", "", None, tm.user_ns)[1].likely_fix

    twin = tm.run_cell("train_one_epoch()", store_history=True).error_in_exec
    assert twin is not None
    _, gpu = diagnose_cell(tm, "with DeadGpu(surfaces={torch.Tensor.item}):\n    train_one_epoch()", capfd)
    with validators():
        stop = tm.run_cell("train_one_epoch()", store_history=True).error_in_exec
    assert isinstance(stop, ValidationError), stop
    assert "index (the class labels)" in str(stop) and "3" in str(stop)
    assert post_mortem(twin) == gpu.likely_fix == stop.hint == post_mortem(stop) == TIMM_FIX


def test_mixups_one_hot_scatter_under_soft_target_loss_is_the_label_range_too(tm, loaded, capsys):
    tm.run_cell(
        """
from timm.data import Mixup
from timm.loss import SoftTargetCrossEntropy

mixup_fn = Mixup(mixup_alpha=0.8, num_classes=3)
loss_fn = SoftTargetCrossEntropy()

def train_mixup():
    for input, target in loader:
        input, target = mixup_fn(input, target)
        loss = loss_fn(model(input), target)
        losses.append(loss.item())
""",
        store_history=True,
    )
    capsys.readouterr()
    result = tm.run_cell("train_mixup()", store_history=True)
    assert str(result.error_in_exec) == "index 3 is out of bounds for dimension 1 with size 3"  # one_hot's scatter_
    out = capsys.readouterr().out
    assert (
        "Cause: `loss_fn` (SoftTargetCrossEntropy) takes one-hot (Mixup) targets, so the labels are one_hot's "
        "scatter index: class label 3 is outside 0..2 (the model has 3 classes)."
    ) in out
    assert f"Likely fix: {TIMM_FIX}." in out
    assert "  mixup_fn: Mixup(num_classes=3): labels >= num_classes fail in one_hot's scatter" in out


def test_under_label_smoothing_the_patch_widens_create_models_num_classes(loaded, tm):  # loaded first: SETUP recorded
    import cudaassert_ipy

    tm.run_cell("train_one_epoch()", store_history=True)
    alt = cudaassert_ipy.proposed_fix().alternatives[0]
    assert alt.key == "widen_head"
    assert '+model = timm.create_model("resnet18", pretrained=False, num_classes=4)' in alt.patch.diff
