"""The framework adapters' machinery, without any framework: it imports none, words fixes from one place, and
reads ZeRO-3 shapes. The adapters themselves are tested with the real frameworks (test_frameworks_*.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import torch
import torch.nn as nn

from cudaassert_ipy.checks.errors import NonFiniteError, ValidationIndexError
from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.detection import classify
from cudaassert_ipy.diagnose.evidence import collect
from cudaassert_ipy.diagnose.hints import LabelFacts
from cudaassert_ipy.diagnose.validator_stop import ValidatorStop, stop_of
from cudaassert_ipy.frameworks import ADAPTERS, ClassHead, class_head_near, class_head_of
from cudaassert_ipy.frameworks.generic import true_shape, unwrap_model

FRAMEWORKS = [
    "transformers",
    "accelerate",
    "lightning",
    "pytorch_lightning",
    "peft",
    "fastai",
    "keras",
    "timm",
    "ultralytics",
    "deepspeed",
]


def test_importing_the_adapters_imports_no_framework_and_not_torch():
    code = (
        f"import json, sys\nimport cudaassert_ipy.frameworks\n"
        f"print(json.dumps({{m: m in sys.modules for m in {['torch', *FRAMEWORKS]!r}}}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {m: False for m in ["torch", *FRAMEWORKS]}


def test_every_adapter_has_a_module_of_its_name_and_the_generic_one_runs_last():
    names = [a.name for a in ADAPTERS]
    assert names[-1] == "generic" and len(set(names)) == len(names)
    for name in names:
        assert __import__(f"cudaassert_ipy.frameworks.{name}", fromlist=["ADAPTER"]).ADAPTER.name == name


def test_without_its_framework_imported_an_adapter_finds_no_head_for_a_plain_model():
    assert class_head_of(nn.Linear(4, 3)) is None
    assert class_head_near(sys._getframe()) is None


def test_the_framework_templates_are_the_generic_ones_with_the_framework_words_in_place():
    words = hints.GENERIC_CLASS_WORDS
    fields = {"top": 9, "n_classes": 3, "more": 10, "last": 2}
    assert hints.CLASS_TEMPLATES_AS["ONE_MORE_CLASS"].format(
        set_classes=words["output"].format(n=10), **fields
    ) == hints.ONE_MORE_CLASS.format(**fields)
    assert hints.CLASS_TEMPLATES_AS["REMAP_LABELS"].format(
        set_classes=words["output"].format(n=10), **fields
    ) == hints.REMAP_LABELS.format(**fields)
    declared = {"declared_text": "the dataset lists 4 classes", "n_classes": 3}
    assert hints.CLASS_TEMPLATES_AS["DECLARED_CLASSES"].format(
        set_classes=words["set"].format(n=4), **declared
    ) == hints.DECLARED_CLASSES.format(declared=4, **declared)


def test_each_framework_words_its_class_count_fix_in_its_own_terms():
    def fix(framework: str, setting: str = "", owner: str = "") -> str:
        return hints.class_labels(LabelFacts(bad=(3,), n_classes=3, head=ClassHead(framework, 3, setting, owner)))

    assert (
        "from_pretrained(..., num_labels=4, ignore_mismatched_sizes=True) and give it id2label/label2id "
        "with 4 entries" in fix("transformers", "num_labels")
    )
    assert "build `LitClassifier` with num_classes=4 (its hparams.num_classes=3 sizes the last layer)" in fix(
        "lightning", "num_classes", "LitClassifier"
    )
    assert "timm.create_model(..., num_classes=4)" in fix("timm")
    assert "dls.c is 3" in fix("fastai")
    assert "nc: 4 in the data YAML" in fix("ultralytics")
    assert "Dense(4)" in fix("keras")


def test_a_head_of_another_size_than_the_failing_layer_keeps_the_generic_words():
    other = ClassHead("transformers", now=10, setting="num_labels")
    assert hints.class_labels(LabelFacts(bad=(3,), n_classes=3, head=other)) == hints.class_labels(
        LabelFacts(bad=(3,), n_classes=3)
    )
    assert hints.set_classes(ClassHead("a framework with no words yet"), 3) is None


def test_a_zero3_parameter_reads_its_true_shape_from_ds_shape():
    layer = nn.Linear(16, 5)
    # what DeepSpeed ZeRO-3 does to a partitioned parameter (partition_parameters.py): frees it, keeps the shape
    layer.weight.ds_shape = layer.weight.shape
    layer.weight.data = torch.empty(0)
    assert tuple(layer.weight.shape) == (0,) and true_shape(layer.weight) == (5, 16)
    try:
        raise IndexError("Target 5 is out of bounds.")
    except IndexError as error:
        detection = classify(error)
    assert detection is not None
    ev = collect(detection, user_ns={"weight": layer.weight, "head": layer})
    assert {t.name: t.shape for t in ev.tensors}["weight"] == (5, 16)
    assert ev.linears[0].get("out_features") == 5


def test_wrappers_are_unwrapped_to_the_users_module():
    inner = nn.Linear(2, 3)
    assert unwrap_model(nn.DataParallel(nn.DataParallel(inner))) is inner


def test_a_validator_error_hands_the_diagnosis_one_typed_stop():
    error = ValidationIndexError(
        op="cross_entropy",
        argument="target",
        valid="0..2",
        n_bad=1,
        examples=[((1,), 3)],
        cause_id="nll_loss_target_out_of_range",
        hint="fix it",
        facts=LabelFacts(bad=(3,), n_classes=3),
    )
    assert stop_of(error) == ValidatorStop(
        "cross_entropy",
        "target",
        "0..2",
        1,
        (((1,), 3),),
        "nll_loss_target_out_of_range",
        "fix it",
        LabelFacts(bad=(3,), n_classes=3),
    )
    detection = classify(error)
    assert detection is not None and detection.stop == stop_of(error)
    not_a_stop = NonFiniteError(
        op="log",
        n_nan=1,
        n_inf=0,
        shape=(2,),
        dtype="torch.float32",
        filename=None,
        lineno=None,
        line="",
        cell_label="",
        inputs_finite=True,
        hint="",
    )
    assert stop_of(not_a_stop) is None and stop_of(IndexError("Target 3 is out of bounds.")) is None
