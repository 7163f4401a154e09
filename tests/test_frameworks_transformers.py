"""Hugging Face transformers for real, on the CPU: a 3-label BERT classifier fed a 4th class.

The CPU twin (``labels=`` and ``Trainer``) runs through the loaded extension; the GPU failure is
raised where the Trainer surfaces it (``torch.isnan(tr_loss_step)`` in its epoch loop, with the
kernel's lines on fd 2: ``gpu_double_async.DeadGpu``), and the report must still name ``num_labels``
and the cause with no model frame on the stack. Built locally from a ``BertConfig``: nothing is
downloaded. Runs in the frameworks environment:
``.venv-fw/bin/python -m pytest -m frameworks tests/test_frameworks_transformers.py``.
"""

from __future__ import annotations

import linecache
from typing import Any

import pytest
from helpers.cells import diagnose_cell
from helpers.kernels import execute, running_kernel

from cudaassert_ipy.view.report import to_text

pytestmark = pytest.mark.frameworks

HF_FIX = (
    "the labels reach 3 with 3 classes: if you have 4 classes, load the model with from_pretrained(..., "
    "num_labels=4, ignore_mismatched_sizes=True) and give it id2label/label2id with 4 entries; if labels start "
    "at 1, subtract 1"
)

# The model is built inside a function: neither it nor its config is in the notebook's namespace, only the
# Trainer is (as in a notebook whose setup cell returns the trainer).
SETUP = """
import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments
from gpu_double_async import DeadGpu

def reviews(n=12):
    # 4 kinds of review: 0 negative, 1 neutral, 2 positive, 3 mixed (the class the model was not built for)
    g = torch.Generator().manual_seed(0)
    return [{"input_ids": torch.randint(5, 64, (8,), generator=g), "labels": torch.tensor(i % 4)} for i in range(n)]

def make_trainer(out, trainer_class=Trainer, **kw):
    torch.manual_seed(0)
    config = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32, num_labels=3)
    args = TrainingArguments(output_dir=out, per_device_train_batch_size=4, num_train_epochs=1, report_to=[],
                             use_cpu=True, save_strategy="no", logging_strategy="no", disable_tqdm=True)
    return trainer_class(model=BertForSequenceClassification(config), args=args, **kw)

train_data = reviews()
"""


@pytest.fixture
def hf(shell: Any, tmp_path: Any) -> Any:
    result = shell.run_cell(SETUP + f"OUT = {str(tmp_path)!r}\n", store_history=True)
    assert result.error_in_exec is None, result.error_in_exec
    return shell


def run_report(shell: Any, code: str, capsys: Any) -> str:
    """Run a failing cell with the extension loaded; the text report it printed."""
    capsys.readouterr()
    result = shell.run_cell(code, store_history=True)
    assert result.error_in_exec is not None
    return str(capsys.readouterr().out)


def test_a_3_label_bert_fed_label_3_through_labels_gets_the_from_pretrained_fix(hf, loaded, capsys):
    hf.run_cell("model = make_trainer(OUT).model\nbatch = train_data[:4]", store_history=True)
    out = run_report(
        hf,
        "out = model(input_ids=torch.stack([b['input_ids'] for b in batch]),\n"
        "            labels=torch.stack([b['labels'] for b in batch]))",
        capsys,
    )
    assert "[cudaassert] CPU error · class label out of range in cross_entropy" in out
    assert (
        "Cause: cross_entropy got class label 3, but the model's last layer `model.classifier` has "
        "out_features=3, so labels must be 0..2."
    ) in out
    assert f"Likely fix: {HF_FIX}." in out
    assert "  model.config: num_labels=3, problem_type=single_label_classification, id2label: 3 entries" in out
    assert "Exception: IndexError: Target 3 is out of bounds." in out


def test_a_users_subclass_of_an_hf_classifier_still_gets_the_from_pretrained_fix(hf, loaded, capsys):
    hf.run_cell(
        "class ReviewClassifier(BertForSequenceClassification):\n    pass\n\n"
        "model = ReviewClassifier(make_trainer(OUT).model.config)\nbatch = train_data[:4]",
        store_history=True,
    )
    out = run_report(
        hf,
        "out = model(input_ids=torch.stack([b['input_ids'] for b in batch]),\n"
        "            labels=torch.stack([b['labels'] for b in batch]))",
        capsys,
    )
    assert f"Likely fix: {HF_FIX}." in out


def test_the_trainer_on_the_cpu_gets_the_from_pretrained_fix_and_the_step(hf, loaded, capsys):
    hf.run_cell("trainer = make_trainer(OUT, train_dataset=train_data)", store_history=True)
    out = run_report(hf, "trainer.train()", capsys)
    assert "[cudaassert] CPU error · class label out of range in cross_entropy" in out
    assert f"Likely fix: {HF_FIX}." in out
    assert "value(s) of `inputs['labels']` are out of range (first: 3 at [" in out
    assert "  trainer.model.classifier: out_features=3" in out
    assert "  trainer.state: epoch 0, optimizer step " in out and "micro-batch 1 of 1 (gradient accumulation)" in out
    assert "Your code: line 1: trainer.train()" in out


def test_a_gpu_failure_at_the_trainers_loss_sync_names_num_labels_with_no_model_frame_on_the_stack(hf, capfd):
    hf_shell = hf
    hf_shell.run_cell("trainer = make_trainer(OUT, train_dataset=train_data)", store_history=True)
    error, d = diagnose_cell(hf_shell, "with DeadGpu(surfaces={torch.isnan}):\n    trainer.train()", capfd)
    assert type(error).__name__ == "AcceleratorError"
    stack = _stack(error.__traceback__)  # (module, function, line) outermost first
    hf = [entry for entry in stack if entry[0].startswith("transformers.")]
    assert hf[-1][0] == "transformers.trainer" and "torch.isnan(tr_loss_step)" in hf[-1][2]
    assert not any(".models." in module for module, _, _ in stack), "no model frame on the stack"
    assert "model" not in hf_shell.user_ns and "config" not in hf_shell.user_ns
    assert d.kind == "device_assert" and d.cause_id == "nll_loss_target_out_of_range"
    assert d.likely_fix == HF_FIX
    assert d.specific is not None and d.specific.startswith(
        "cross_entropy got class label 3, but the model's last layer `trainer.model.classifier` has out_features=3, "
        "so labels must be 0..2."
    )
    facts = dict(d.facts)
    assert facts["trainer.model.config"] == (
        "num_labels=3, problem_type=single_label_classification, id2label: 3 entries"
    )
    assert facts["trainer.model.classifier"] == "out_features=3"
    assert any(k == "inputs['labels']" for k in facts)
    text = to_text(d)
    assert "Loss.cu:250 nll_loss_forward_reduce_cuda_kernel_2d: `t >= 0 && t < n_classes` failed in 4 threads" in text
    assert "Your code: line 2: trainer.train()" in text
    assert d.follow_ons == ()  # the Trainer re-raises unchanged: no cleanup error


def _stack(tb: Any) -> list[tuple[str, str, str]]:
    out = []
    while tb is not None:
        code = tb.tb_frame.f_code
        line = linecache.getline(code.co_filename, tb.tb_lineno).strip()
        out.append((str(tb.tb_frame.f_globals.get("__name__")), code.co_name, line))
        tb = tb.tb_next
    return out


def test_the_datasets_class_label_names_the_4_classes_in_the_fix(hf, loaded, capsys):
    hf.run_cell(
        """
import datasets
features = datasets.Features({"input_ids": datasets.Sequence(datasets.Value("int64")),
                              "label": datasets.ClassLabel(names=["negative", "neutral", "positive", "mixed"])})
train_ds = datasets.Dataset.from_dict({"input_ids": [b["input_ids"].tolist() for b in train_data],
                                       "label": [int(b["labels"]) for b in train_data]}, features=features)
trainer = make_trainer(OUT, train_dataset=train_ds)
""",
        store_history=True,
    )
    out = run_report(hf, "trainer.train()", capsys)
    assert (
        "Likely fix: the dataset lists 4 classes but the model outputs 3: load the model with from_pretrained(..., "
        "num_labels=4, ignore_mismatched_sizes=True) and give it id2label/label2id with 4 entries."
    ) in out
    assert "  train_ds.features['label'].classes: 4 entries" in out


def test_a_config_without_num_labels_is_one_could_not_read_line_and_the_rest_stands(hf, loaded, capsys):
    hf.run_cell(
        "trainer = make_trainer(OUT, train_dataset=train_data)\ntrainer.model.config.id2label = None",
        store_history=True,
    )
    out = run_report(hf, "trainer.train()", capsys)
    assert "Note: Could not read trainer.model.config.num_labels (none); the rest of this report stands." in out
    assert f"Likely fix: {HF_FIX}." in out and "trainer.model.classifier: out_features=3" in out


def test_a_trainer_whose_attribute_raises_is_one_could_not_read_line_and_the_rest_stands(hf, loaded, capsys):
    hf.run_cell(
        """
class ServiceTrainer(Trainer):
    \"\"\"A Trainer whose tokenizer is a remote service, closed when training stops.\"\"\"
    closed = False

    @property
    def processing_class(self):
        if self.closed:
            raise RuntimeError("tokenizer service closed")
        return self._processing_class

    @processing_class.setter
    def processing_class(self, value):
        self._processing_class = value

    def train(self, *args, **kwargs):
        try:
            return super().train(*args, **kwargs)
        finally:
            self.closed = True

trainer = make_trainer(OUT, trainer_class=ServiceTrainer, train_dataset=train_data)
""",
        store_history=True,
    )
    out = run_report(hf, "trainer.train()", capsys)
    assert (
        "Note: Could not read trainer.processing_class (RuntimeError: tokenizer service closed); the rest of this "
        "report stands."
    ) in out
    assert f"Likely fix: {HF_FIX}." in out


def test_a_trainer_with_no_train_dataset_says_so_in_one_line_and_the_rest_stands(hf, loaded, capsys):
    hf.run_cell("trainer = make_trainer(OUT, eval_dataset=train_data)", store_history=True)
    out = run_report(hf, "trainer.evaluate()", capsys)
    assert "Note: Could not read trainer.train_dataset (none); the rest of this report stands." in out
    assert f"Likely fix: {HF_FIX}." in out


def test_token_ids_from_a_grown_tokenizer_get_resize_token_embeddings_from_the_trainers_processing_class(
    hf, loaded, capsys, tmp_path
):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *(f"w{i}" for i in range(65))]))
    hf.run_cell(
        f"""
from transformers import BertTokenizer

def tokenized():  # the tokenizer grew to 70 tokens, the model's embedding has 64 rows
    tokenizer = BertTokenizer({str(vocab)!r})
    texts = [" ".join(f"w{{i}}" for i in range(j, j + 6)) for j in range(0, 64, 8)]
    rows = [tokenizer(t)["input_ids"] for t in texts]
    return tokenizer, [{{"input_ids": torch.tensor(r), "labels": torch.tensor(k % 3)}} for k, r in enumerate(rows)]

tokenizer_, grown = tokenized()
trainer = make_trainer(OUT, train_dataset=grown, processing_class=tokenizer_)
del tokenizer_
""",
        store_history=True,
    )
    out = run_report(hf, "trainer.train()", capsys)
    assert "index out of range in an embedding or index_select" in out
    assert (
        "Likely fix: the tokenizer has 70 tokens but the embedding only 64 rows: call "
        "model.resize_token_embeddings(len(tokenizer))."
    ) in out
    assert "  trainer.processing_class: len = 70" in out


@pytest.mark.kernel
def test_in_a_real_kernel_the_trainers_gpu_failure_gets_the_num_labels_fix(tmp_path):
    with running_kernel() as kc:
        reply, _ = execute(kc, "%load_ext cudaassert")
        assert reply["status"] == "ok"
        setup = SETUP + f"OUT = {str(tmp_path)!r}\ntrainer = make_trainer(OUT, train_dataset=train_data)"
        reply, _ = execute(kc, setup, timeout=300)
        assert reply["status"] == "ok", reply
        reply, msgs = execute(kc, "with DeadGpu(surfaces={torch.isnan}):\n    trainer.train()", timeout=120)
        assert reply["status"] == "error" and reply["ename"] == "AcceleratorError"
        plain = [m for m in msgs if m["type"] == "display_data"][-1]["content"]["data"]["text/plain"]
        assert plain.startswith("[cudaassert] The GPU context of this kernel is dead.")
        assert "GPU context dead · class label out of range in cross_entropy" in plain
        assert f"Likely fix: {HF_FIX}." in plain
        assert "trainer.model.config: num_labels=3" in plain
        assert "Loss.cu:250 nll_loss_forward_reduce_cuda_kernel_2d: `t >= 0 && t < n_classes` failed" in plain
