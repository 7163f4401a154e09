"""One bug, one fix sentence, inside the frameworks too: the post-mortem of the CPU twin, the post-mortem of
the GPU failure where the framework surfaces it, the validator's message, the validator's post-mortem and
``preflight(model=...)`` word a class-count fix in the framework's terms, the same on every path.

Real transformers and Lightning on the CPU; the GPU failure is ``gpu_double_async.DeadGpu``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from cudaassert_ipy.checks import ValidationError, validators
from cudaassert_ipy.checks.preflight import preflight
from cudaassert_ipy.diagnose.detection import classify
from cudaassert_ipy.diagnose.pipeline import diagnose_failure, read_failure

pytestmark = pytest.mark.frameworks

HF_FIX = (
    "the labels reach 3 with 3 classes: if you have 4 classes, load the model with from_pretrained(..., "
    "num_labels=4, ignore_mismatched_sizes=True) and give it id2label/label2id with 4 entries; if labels start "
    "at 1, subtract 1"
)
PL_FIX = (
    "the labels reach 3 with 3 classes: if you have 4 classes, build `LitClassifier` with num_classes=4 (its "
    "hparams.num_classes=3 sizes the last layer); if labels start at 1, subtract 1"
)


def raised(call: Callable[[], Any]) -> BaseException:
    try:
        call()
    except Exception as error:  # the error under test
        return error
    raise AssertionError("the call did not fail")


def post_mortem_fix(error: BaseException, ns: dict[str, Any], stderr: str = "") -> str | None:
    detection, sites = read_failure(error, stderr)
    assert detection is not None
    return diagnose_failure(detection, sites, stderr, "", None, ns)[1].likely_fix


def on_the_gpu(call: Callable[[], Any], surfaces: set[Any], capfd: Any) -> tuple[BaseException, str]:
    from gpu_double_async import DeadGpu

    capfd.readouterr()
    with DeadGpu(surfaces=surfaces):
        error = raised(call)
    return error, capfd.readouterr().err


def validator_stop(call: Callable[[], Any]) -> ValidationError:
    with validators():
        error = raised(call)
    assert isinstance(error, ValidationError), error
    return error


def test_a_bert_classifier_gets_the_from_pretrained_fix_on_every_path(tmp_path, capfd):
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=64,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
        num_labels=3,
    )
    model = BertForSequenceClassification(config)
    data = [{"input_ids": torch.randint(5, 64, (8,)), "labels": torch.tensor(i % 4)} for i in range(8)]
    args = TrainingArguments(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        num_train_epochs=1,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
    )
    trainer = Trainer(model=model, args=args, train_dataset=data)
    ns = {"model": model, "trainer": trainer, "data": data}
    ids, labels = torch.stack([d["input_ids"] for d in data[:4]]), torch.tensor([0, 1, 2, 3])

    twin = post_mortem_fix(raised(lambda: model(input_ids=ids, labels=labels)), {**ns, "labels": labels})
    error, stderr = on_the_gpu(trainer.train, {torch.isnan}, capfd)
    gpu = post_mortem_fix(error, ns, stderr)
    stop = validator_stop(trainer.train)
    checked = post_mortem_fix(stop, ns)
    report = preflight(data, model=model, progress=False)
    assert twin == gpu == stop.hint == checked == report.labels_fix == HF_FIX
    assert f"\nLikely fix: {HF_FIX}\n" in str(stop)
    assert report.num_classes == 3 and f"  Likely fix: {HF_FIX}" in report.summary()


def test_a_lightning_module_gets_the_num_classes_hparam_fix_on_every_path(capfd):
    import lightning as L
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.utils.data import DataLoader, TensorDataset

    class LitClassifier(L.LightningModule):
        def __init__(self, num_classes: int = 3) -> None:
            super().__init__()
            self.save_hyperparameters()
            self.head = nn.Linear(8, self.hparams.num_classes)

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            x, y = batch
            loss = F.cross_entropy(self.head(x), y)
            loss.item()
            return loss

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    torch.manual_seed(0)
    dataset = TensorDataset(torch.randn(8, 8), torch.tensor([0, 1, 2, 0, 1, 2, 3, 0]))
    model = LitClassifier()

    def fit() -> None:
        trainer = L.Trainer(
            max_epochs=1,
            accelerator="cpu",
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
        )
        trainer.fit(model, DataLoader(dataset, batch_size=4))

    ns = {"model": model, "dataset": dataset}
    twin = post_mortem_fix(raised(fit), ns)
    error, stderr = on_the_gpu(fit, {torch.Tensor.item}, capfd)
    assert classify(error) is not None and error.__context__ is not None  # the teardown's error, then the first
    gpu = post_mortem_fix(error, ns, stderr)
    stop = validator_stop(fit)
    checked = post_mortem_fix(stop, ns)
    report = preflight(dataset, model=model, progress=False)
    assert twin == gpu == stop.hint == checked == report.labels_fix == PL_FIX
