"""Ultralytics YOLO for real, on the CPU: a YOLOv8 classifier built for ``nc=3`` fed a batch with class 3.

The model is built locally from Ultralytics' own ``yolov8n-cls.yaml`` (no weights, nothing downloaded;
``YOLO_OFFLINE=1`` keeps Ultralytics from asking the network, ``YOLO_CONFIG_DIR`` keeps its settings file in a
temporary directory). The batch is the dict the trainer gives ``self.model(batch)`` in ``_do_train``
(``img``, ``cls``, ``im_file``). The CPU twin runs through the loaded extension; the GPU failure surfaces
inside the model's forward (the loss's ``loss.detach()``, the next call after the kernel), with the kernel's
lines on fd 2 (``gpu_double_async.DeadGpu``). A real ``ClassificationTrainer`` over a folder of images gives
the facts ``trainer.data["nc"]``/``["names"]``. Runs in the frameworks environment:
``.venv-fw/bin/python -m pytest -m frameworks tests/test_frameworks_ultralytics.py``.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest
from helpers.cells import diagnose_cell

from cudaassert_ipy.frameworks import ClassHead, Stack, gather
from cudaassert_ipy.view.report import to_text

pytestmark = pytest.mark.frameworks

YOLO_FIX = (
    "the labels reach 3 with 3 classes: if you have 4 classes, set nc: 4 in the data YAML and list 4 names; "
    "if labels start at 1, subtract 1"
)
FILES = "4 image(s): birds/train/finch/0.jpg, birds/train/robin/0.jpg, birds/train/wren/0.jpg, birds/train/jay/0.jpg"

SETUP = """
import torch
from ultralytics.nn.tasks import ClassificationModel
from gpu_double_async import DeadGpu

torch.manual_seed(0)
model = ClassificationModel("yolov8n-cls.yaml", nc=3, verbose=False)
batch = {"img": torch.randn(4, 3, 32, 32), "cls": torch.tensor([0, 1, 2, 3]),  # class 3: a 4th kind of bird
         "im_file": ["birds/train/finch/0.jpg", "birds/train/robin/0.jpg", "birds/train/wren/0.jpg",
                     "birds/train/jay/0.jpg"]}

def train_step(batch):
    loss, loss_items = model(batch)  # as BaseTrainer._do_train does
    return loss.sum()
"""


@pytest.fixture
def yolo(shell: Any, monkeypatch: Any, tmp_path_factory: Any) -> Any:
    monkeypatch.setenv("YOLO_OFFLINE", "1")
    monkeypatch.setenv("YOLO_CONFIG_DIR", str(tmp_path_factory.mktemp("yolo-config")))
    result = shell.run_cell(SETUP, store_history=True)
    assert result.error_in_exec is None, result.error_in_exec
    return shell


def test_a_batch_with_class_3_on_the_cpu_gets_the_data_yaml_fix_and_the_image_files(yolo, loaded, capsys):
    capsys.readouterr()
    result = yolo.run_cell("train_step(batch)", store_history=True)
    assert isinstance(result.error_in_exec, IndexError)
    out = capsys.readouterr().out
    assert "[cudaassert] CPU error · class label out of range in cross_entropy" in out
    assert (
        "Cause: cross_entropy got class label 3, but the model's last layer `model.model.9.linear` has "
        "out_features=3, so labels must be 0..2." in out
    )
    assert f"Likely fix: {YOLO_FIX}." in out
    assert "  model: nc=3, names: 3 entries: ['0', '1', '2']" in out
    assert f"  batch['im_file']: {FILES}" in out


def test_a_gpu_failure_inside_the_models_forward_names_nc_and_the_batchs_images(yolo, capfd):
    error, d = diagnose_cell(yolo, "with DeadGpu(surfaces={torch.Tensor.detach}):\n    train_step(batch)", capfd)
    assert type(error).__name__ == "AcceleratorError"
    assert [tb.tb_frame.f_code.co_name for tb in _tbs(error.__traceback__)][-3:-1] == ["loss", "__call__"]
    assert d.kind == "device_assert" and d.cause_id == "nll_loss_target_out_of_range"
    assert d.likely_fix == YOLO_FIX
    facts = dict(d.facts)
    assert facts["batch['im_file']"] == FILES
    assert facts["model"] == "nc=3, names: 3 entries: ['0', '1', '2']"
    assert facts["batch['cls']"] == "1 bad value(s); first: 3 at [3]"  # the batch dict of Ultralytics' loss frame
    text = to_text(d)
    assert "Loss.cu:250 nll_loss_forward_reduce_cuda_kernel_2d: `t >= 0 && t < n_classes` failed in 4 threads" in text
    assert "Your code: line 12: loss, loss_items = model(batch)  # as BaseTrainer._do_train does" in text


def _tbs(tb: Any) -> list[Any]:
    out = []
    while tb is not None:
        out.append(tb)
        tb = tb.tb_next
    return out


def test_a_real_trainers_data_gives_nc_and_names(yolo, tmp_path):
    from PIL import Image

    root = tmp_path / "birds"
    for split in ("train", "val"):
        for kind in ("finch", "robin", "wren"):
            folder = root / split / kind
            folder.mkdir(parents=True)
            for i in range(2):
                Image.new("RGB", (32, 32), (i * 50, 80, 120)).save(folder / f"{i}.jpg")
    from ultralytics.models.yolo.classify import ClassificationTrainer

    trainer = ClassificationTrainer(
        overrides=dict(
            model="yolov8n-cls.yaml",
            data=str(root),
            device="cpu",
            imgsz=32,
            batch=4,
            workers=0,
            epochs=1,
            plots=False,
            val=False,
            project=str(tmp_path / "runs"),
            name="t",
            exist_ok=True,
            verbose=False,
        )
    )
    trainer.model = trainer.get_model(cfg="yolov8n-cls.yaml", verbose=False)
    seen: list[Any] = []
    trainer.add_callback("on_pretrain_routine_start", lambda t: seen.append(_frames(sys._getframe())))
    trainer.run_callbacks("on_pretrain_routine_start")  # the trainer's own frame (``run_callbacks``) is on the stack
    found = gather(Stack(seen[0], {"trainer": trainer}))
    facts = dict(found.facts)
    assert facts["trainer.data"] == "nc=3, names: 3 entries: ['finch', 'robin', 'wren']"
    assert facts["trainer.model"] == "nc=3, names: 3 entries: ['0', '1', '2']"  # names come at _setup_train
    assert dict(found.declared)["trainer.data['names']"] == 3
    assert found.head == ClassHead("ultralytics", now=3, setting="nc", owner="trainer.model")
    assert not found.missing and not found.failures


def _frames(frame: types.FrameType | None) -> tuple[types.FrameType, ...]:
    out = []
    while frame is not None:
        out.append(frame)
        frame = frame.f_back
    return tuple(reversed(out))


def test_a_model_whose_names_raise_is_one_could_not_read_line_and_the_rest_stands(yolo, loaded, capsys):
    yolo.run_cell(
        """
class LabelledModel(ClassificationModel):
    \"\"\"Class names from a label service that is down.\"\"\"
    @property
    def names(self):
        raise RuntimeError("label service down")

    @names.setter
    def names(self, value):
        pass

model = LabelledModel("yolov8n-cls.yaml", nc=3, verbose=False)
""",
        store_history=True,
    )
    capsys.readouterr()
    yolo.run_cell("train_step(batch)", store_history=True)
    out = capsys.readouterr().out
    assert "Note: Could not read model.names (RuntimeError: label service down); the rest of this report stands." in out
    assert f"Likely fix: {YOLO_FIX}." in out and "  model: nc=3" in out and f"  batch['im_file']: {FILES}" in out


def test_the_cwd_stays_clean(yolo):
    assert not (Path.cwd() / "runs").exists()
