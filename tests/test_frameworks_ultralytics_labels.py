"""Ultralytics YOLO detection for real, on the CPU: a label file with class id 2 while the data YAML says ``nc: 2``.

Ultralytics 8.0.x checked ``max_cls <= num_cls`` while caching labels (off by one), so such a label reached the
loss, where ``TaskAlignedAssigner.get_box_metrics`` indexes the class scores with it: "index 2 is out of bounds for
dimension 2 with size 2" on the CPU. Later releases drop the label with a warning; the batch here is the one 8.0.x's
loader built from the same files (``img``, ``cls``, ``bboxes``, ``batch_idx``, ``im_file``), given to
``self.model(batch)`` as ``BaseTrainer._do_train`` does. The model is the real ``DetectionModel`` built from
Ultralytics' own ``yolov8n.yaml`` (no weights, nothing downloaded), the loss the real one: no double at all.
Runs in the frameworks environment: ``.venv-fw/bin/python -m pytest -m frameworks
tests/test_frameworks_ultralytics_labels.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.frameworks

SETUP = """
import torch
from pathlib import Path
from ultralytics.cfg import get_cfg
from ultralytics.nn.tasks import DetectionModel

torch.manual_seed(0)
root = Path({root!r})
for split, boxes in {{"a": ["0 0.5 0.5 0.3 0.3"], "b": ["1 0.5 0.5 0.3 0.3", "2 0.3 0.3 0.2 0.2"]}}.items():
    (root / "images" / "train").mkdir(parents=True, exist_ok=True)
    (root / "labels" / "train").mkdir(parents=True, exist_ok=True)
    (root / "images" / "train" / f"{{split}}.jpg").write_bytes(b"")
    (root / "labels" / "train" / f"{{split}}.txt").write_text("\\n".join(boxes) + "\\n")
(root / "data.yaml").write_text("path: .\\ntrain: images/train\\nval: images/train\\nnc: 2\\nnames: [cat, dog]\\n")

model = DetectionModel("yolov8n.yaml", nc=2, verbose=False)
model.args = get_cfg()
files = sorted(str(p) for p in (root / "images" / "train").glob("*.jpg"))
rows = [(i, [float(v) for v in line.split()])
        for i, f in enumerate(files)
        for line in Path(f.replace("/images/", "/labels/")[:-4] + ".txt").read_text().splitlines()]
batch = {{"img": torch.rand(len(files), 3, 64, 64), "im_file": files,
          "batch_idx": torch.tensor([float(i) for i, _ in rows]),
          "cls": torch.tensor([[r[0]] for _, r in rows]), "bboxes": torch.tensor([r[1:] for _, r in rows])}}
"""


@pytest.fixture
def yolo(shell: Any, monkeypatch: Any, tmp_path: Any, tmp_path_factory: Any) -> Any:
    monkeypatch.setenv("YOLO_OFFLINE", "1")
    monkeypatch.setenv("YOLO_CONFIG_DIR", str(tmp_path_factory.mktemp("yolo-config")))
    result = shell.run_cell(SETUP.format(root=str(tmp_path / "pets")), store_history=True)
    assert result.error_in_exec is None, result.error_in_exec
    return shell


def test_a_class_id_equal_to_nc_names_the_class_id_nc_the_image_and_its_label_file_line(yolo, loaded, capsys, tmp_path):
    capsys.readouterr()
    result = yolo.run_cell("loss, items = model(batch)  # as BaseTrainer._do_train does", store_history=True)
    assert isinstance(result.error_in_exec, IndexError)
    assert str(result.error_in_exec) == "index 2 is out of bounds for dimension 2 with size 2"
    out = capsys.readouterr().out
    root = tmp_path / "pets"
    label, image = root / "labels" / "train" / "b.txt", root / "images" / "train" / "b.jpg"
    assert (
        f"Cause: class id 2 in {label} line 2 (image {image}), but `nc: 2` allows 0..1. Likely fix: add the "
        "class to the data YAML (nc: 3 and 3 names) or correct that label file (class ids 0..1)."
    ) in out
    assert "  model: nc=2, names: 2 entries: ['0', '1']" in out
    assert f"  batch's bad label: class id 2 in {label} line 2 (image {image})" in out


def test_the_fix_is_a_patch_of_the_data_yaml_shown_as_a_diff_and_written_only_when_asked(
    yolo, loaded, capsys, tmp_path
):
    import re

    import cudaassert_ipy

    data_yaml = tmp_path / "pets" / "data.yaml"
    before = data_yaml.read_text()
    # BaseTrainer gives the model its args (``self.model.args = self.args``): the data YAML's path with them
    yolo.run_cell("model.args.data = str(root / 'data.yaml')", store_history=True)
    result = yolo.run_cell("loss, items = model(batch)  # as BaseTrainer._do_train does", store_history=True)
    assert isinstance(result.error_in_exec, IndexError)
    capsys.readouterr()
    fix = cudaassert_ipy.proposed_fix()
    (alt,) = [a for a in fix.alternatives if a.key == "widen_head"]
    assert alt.patch is not None and alt.patch.path == str(data_yaml) and alt.patch.number is None
    yolo.run_line_magic("cudaassert", "fix")
    out = capsys.readouterr().out
    assert f"set nc: 3 in the data YAML {data_yaml} and list 3 names" in out
    assert f"+++ b/{data_yaml}" in out and "-nc: 2" in out and "+nc: 3" in out
    assert "+names: [cat, dog, class_2]" in out
    assert data_yaml.read_text() == before  # shown, not applied
    (n,) = re.findall(r"\[(\d+)\][^\n]*set nc: 3 in the data YAML", out)
    yolo.run_line_magic("cudaassert", f"fix apply --choose {n}")
    assert f"Patched {data_yaml}" in capsys.readouterr().out
    assert data_yaml.read_text() == before.replace("nc: 2\nnames: [cat, dog]", "nc: 3\nnames: [cat, dog, class_2]")


def test_the_runner_shows_the_data_yaml_patch_as_a_diff_against_the_file_and_writes_nothing_undecided(tmp_path):
    # the label files hold class 2 once in three boxes (a new class?) and the YAML names two classes (a stray line?)
    import json
    import subprocess
    import sys

    from helpers import kernel_env

    root = tmp_path / "pets"
    script = tmp_path / "train.py"
    script.write_text(
        SETUP.format(root=str(root)) + "model.args.data = str(root / 'data.yaml')\n"
        "loss, items = model(batch)  # as BaseTrainer._do_train does\n"
    )
    env = kernel_env(YOLO_OFFLINE="1", YOLO_CONFIG_DIR=str(tmp_path / "yolo-config"))
    result = subprocess.run(
        [sys.executable, "-m", "cudaassert_ipy", "--apply-fix", "--report-json", "r.json", "train.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    err = result.stderr
    data_yaml = root / "data.yaml"
    assert f"set nc: 3 in the data YAML {data_yaml} and list 3 names" in err, err
    assert f"+++ b/{data_yaml}" in err and "+names: [cat, dog, class_2]" in err
    assert "[cudaassert] --apply-fix: nothing was written (the data does not decide" in err
    assert "nc: 2\nnames: [cat, dog]\n" in data_yaml.read_text()
    fix = json.loads((tmp_path / "r.json").read_text())["fix"]
    assert str(data_yaml) in [a["path"] for a in fix["alternatives"]]


def test_label_files_holding_the_class_as_often_as_the_others_make_the_data_yaml_patch_the_default(
    yolo, loaded, capsys, tmp_path
):
    import cudaassert_ipy

    root = tmp_path / "pets"
    for i in range(30):  # the rest of the training set: classes 0, 1 and 2 alike
        (root / "images" / "train" / f"more{i}.jpg").write_bytes(b"")
        (root / "labels" / "train" / f"more{i}.txt").write_text(f"{i % 3} 0.5 0.5 0.3 0.3\n")
    data_yaml = root / "data.yaml"
    yolo.run_cell("model.args.data = str(root / 'data.yaml')", store_history=True)
    result = yolo.run_cell("loss, items = model(batch)  # as BaseTrainer._do_train does", store_history=True)
    assert isinstance(result.error_in_exec, IndexError)
    fix = cudaassert_ipy.proposed_fix()
    assert fix.chosen.key == "widen_head" and fix.patch.path == str(data_yaml)
    assert fix.why == "the data decides: label 2 is in 11 of 33 samples, as common as the other classes"
    capsys.readouterr()
    yolo.run_line_magic("cudaassert", "fix apply")  # the default: no --choose needed
    assert f"Patched {data_yaml}" in capsys.readouterr().out
    assert "nc: 3\nnames: [cat, dog, class_2]\n" in data_yaml.read_text()
