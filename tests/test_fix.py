"""fix/ and shell/fix.py: the fix as a patch of the cell that defined the culprit, applied, replayed and verified.

The example notebooks' own cells run in the in-process shell with the extension loaded (real torch on
the CPU: the errors are PyTorch's own); "the restart" is simulated in-process as in the other replay
tests (helpers/restart_story.py); the real restarts are in bench_fix.py's kernels.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.restart_story import restart_in_process

import cudaassert_ipy
from cudaassert_ipy.fix import DECISION, NONE, PATCH_MIME, SAFE

NOTEBOOKS = Path(__file__).resolve().parent.parent / "examples" / "notebooks"


def run_until_failure(shell, name: str) -> list[tuple[int, str, str]]:
    """The notebook's code cells up to (and with) the first that fails: [(In [n], cell id, source)]."""
    nb = json.loads((NOTEBOOKS / name).read_text())
    ran = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        if source.startswith("%load_ext"):
            continue
        number = shell.execution_count
        result = shell.run_cell(source, store_history=True, cell_id=cell["id"])
        ran.append((number, cell["id"], source))
        if not result.success:
            return ran
    raise AssertionError(f"{name} did not fail")


def test_the_head_is_widened_where_its_class_count_is_written_and_no_other_cell_changes(restart_ext, shell):
    ran = run_until_failure(shell, "02_kaggle_image_classifier.ipynb")
    fix = cudaassert_ipy.proposed_fix()
    assert fix.safety == DECISION and fix.culprit == "model.head"
    assert fix.chosen.key == "widen_head" and "the data declares 196 classes" in fix.why
    number, cell_id, source = next(r for r in ran if "num_classes = 195" in r[2])
    assert (fix.execution_count, fix.cell_id, fix.old_source) == (number, cell_id, source)
    assert fix.new_source == source.replace("num_classes = 195", "num_classes = 196")  # comments and all kept
    assert "-num_classes = 195" in fix.diff and "+num_classes = 196" in fix.diff
    assert [a.key for a in fix.alternatives] == ["widen_head", "drop_rows"]  # the other choice, side by side
    assert fix.patch.why_cell.startswith(f"cell [{number}] built `model.head` (`nn.Linear(32, num_classes)`)")


def test_apply_restart_replays_the_patched_cell_and_verifies(restart_ext, shell, tmp_path, capsys):
    ran = run_until_failure(shell, "02_kaggle_image_classifier.ipynb")
    failing = ran[-1][0]
    fix = cudaassert_ipy.proposed_fix()
    shell.run_line_magic("cudaassert", "fix apply --restart")
    out = capsys.readouterr().out
    assert f"Patched cell [{fix.execution_count}] in this kernel's history" in out
    restart_in_process(shell, tmp_path)
    shell.run_cell("print('next cell')", store_history=True)
    out = capsys.readouterr().out
    assert "the notebook still holds the old code" in out
    assert (
        f"[cudaassert] fixed: cell [{failing}] ran to the end with validators on, and all 392 samples are in range."
    ) in out
    assert shell.user_ns["model"].head.out_features == 196


def test_the_apply_request_is_a_custom_mime_display_a_frontend_extension_reads(restart_ext, shell):
    from IPython.core.displaypub import CapturingDisplayPublisher

    run_until_failure(shell, "04_bce_without_sigmoid.ipynb")
    fix = cudaassert_ipy.proposed_fix()
    assert fix.safety == SAFE and "nn.BCEWithLogitsLoss()" in fix.new_source
    publisher, shell.display_pub = shell.display_pub, CapturingDisplayPublisher()
    try:
        shell.run_line_magic("cudaassert", "fix apply")
        bundles = [data for data, _ in ((o["data"], o) for o in shell.display_pub.outputs) if PATCH_MIME in data]
    finally:
        shell.display_pub = publisher
    assert bundles == [
        {
            PATCH_MIME: {
                "cell_id": fix.cell_id,
                "diff": fix.diff,
                "execution_count": fix.execution_count,
                "kind": "applied",
                "old_source": fix.old_source,
                "new_source": fix.new_source,
                "path": None,
                "version": 1,
            },
            "text/plain": fix.new_source,
        }
    ]


def test_the_resize_goes_right_after_the_tokenizer_grew(restart_ext, shell):
    ran = run_until_failure(shell, "03_token_ids_vs_vocab.ipynb")
    fix = cudaassert_ipy.proposed_fix()
    grew = next(r for r in ran if "tokenizer.add_tokens" in r[2])
    assert fix.safety == SAFE and fix.execution_count == grew[0]
    assert fix.new_source.startswith(
        'tokenizer.add_tokens(["<user>", "<bot>"])\nmodel.resize_token_embeddings(len(tokenizer))\n'
    )


def test_a_void_255_is_ignored_not_a_wider_head(restart_ext, shell):
    run_until_failure(shell, "05_segmentation_ignore_255.ipynb")
    fix = cudaassert_ipy.proposed_fix()
    assert fix.chosen.key == "ignore_index"
    assert "criterion = nn.CrossEntropyLoss(ignore_index=255)  # the mistake" in fix.new_source
    assert "widen_head" not in [a.key for a in fix.alternatives]


def test_a_handful_of_rows_with_negative_labels_are_dropped_and_named(restart_ext, shell):
    run_until_failure(shell, "06_cuda_debug_and_preflight.ipynb")
    fix = cudaassert_ipy.proposed_fix()
    assert fix.chosen.key == "drop_rows" and "(17, 256, 731)" in fix.chosen.title
    assert "if i not in {17, 256, 731}" in fix.new_source


def test_when_the_data_does_not_decide_nothing_is_applied_by_default(restart_ext, shell, capsys):
    shell.run_cell(
        "import torch, torch.nn as nn, torch.nn.functional as F\nlabels = torch.arange(40) % 4\nx = torch.randn(40, 8)",
        store_history=True,
    )
    shell.run_cell("head = nn.Linear(8, 3)", store_history=True)
    shell.run_cell("loss = F.cross_entropy(head(x), labels)", store_history=True)
    fix = cudaassert_ipy.proposed_fix()
    assert fix.safety == DECISION and fix.default is None and fix.patch is None
    assert fix.alternatives[0].patch.new_source == "head = nn.Linear(8, 4)"
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="choose an alternative"):
        shell.run_line_magic("cudaassert", "fix apply")
    shell.run_line_magic("cudaassert", "fix apply --choose 1")
    assert "Patched cell" in capsys.readouterr().out


def test_nothing_is_proposed_without_a_failure_and_says_why_in_one_line(loaded, shell, capsys):
    fix = cudaassert_ipy.proposed_fix()
    assert fix.safety == NONE and fix.alternatives == () and "\n" not in fix.why
    shell.run_line_magic("cudaassert", "fix")
    assert capsys.readouterr().out.strip() == f"[cudaassert] {fix.why}"


def _bundles(shell, line: str) -> list[dict]:
    from IPython.core.displaypub import CapturingDisplayPublisher

    publisher, shell.display_pub = shell.display_pub, CapturingDisplayPublisher()
    try:
        shell.run_line_magic("cudaassert", line)
        return [o["data"] for o in shell.display_pub.outputs if PATCH_MIME in o["data"]]
    finally:
        shell.display_pub = publisher


def test_the_proposal_the_buttons_render_is_a_bundle_beside_the_same_text(restart_ext, shell):
    run_until_failure(shell, "02_kaggle_image_classifier.ipynb")
    fix = cudaassert_ipy.proposed_fix()
    (bundle,) = _bundles(shell, "fix")
    from cudaassert_ipy.shell.fix import fix_text

    assert bundle["text/plain"] == fix_text(fix)  # where no extension runs, `%cudaassert fix` reads as before
    proposal = bundle[PATCH_MIME]
    assert (proposal["kind"], proposal["version"], proposal["safety"], proposal["culprit"]) == (
        "proposal",
        1,
        DECISION,
        "model.head",
    )
    first, second = proposal["alternatives"]
    assert (first["choose"], first["default"], first["title"]) == (1, True, fix.chosen.title)
    assert first["patch"] == {**fix.patch.request(), "kind": "applied"} and first["patch"]["cell_id"] == fix.cell_id
    assert (second["choose"], second["default"]) == (2, False)
    assert json.loads(json.dumps(proposal)) == proposal  # plain JSON, as the kernel sends it


def test_the_buttons_apply_run_the_magic_and_the_replay_then_trusts_the_notebook(restart_ext, shell, tmp_path, capsys):
    ran = run_until_failure(shell, "02_kaggle_image_classifier.ipynb")
    fix = cudaassert_ipy.proposed_fix()
    (applied,) = _bundles(shell, "fix apply --choose 1 --restart --in-notebook")  # what the Apply buttons send
    assert applied[PATCH_MIME] == fix.patch.request()
    out = capsys.readouterr().out
    assert "Patched cell" in out and "copy the patched cell" not in out
    restart_in_process(shell, tmp_path)
    shell.run_cell("print('next cell')", store_history=True)
    out = capsys.readouterr().out
    assert "the notebook still holds the old code" not in out
    assert f"[cudaassert] fixed: cell [{ran[-1][0]}] ran to the end" in out


def test_in_notebook_goes_with_fix_apply_only(restart_ext, shell):
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="--in-notebook only goes with `%cudaassert fix apply`"):
        shell.run_line_magic("cudaassert", "fix --in-notebook")


def test_a_dataset_preflight_cannot_read_leaves_the_verification_to_the_failing_cell(
    restart_ext, shell, tmp_path, capsys, monkeypatch
):
    monkeypatch.delenv("CUDAASSERT_TEST_PRETEND_GPU")  # the CPU error itself, no GPU double
    shell.run_cell(
        "import torch, torch.nn as nn, torch.nn.functional as F\n"
        "class Birds:  # declares the classes, yields no samples\n"
        "    classes = [f'species_{i}' for i in range(196)]\n"
        "train_ds = Birds()\n"
        "model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 195))\n"
        "labels = torch.tensor([3, 195, 7, 195])",
        store_history=True,
    )
    failing = shell.execution_count
    assert not shell.run_cell("loss = F.cross_entropy(model(torch.randn(4, 8)), labels)", store_history=True).success
    assert cudaassert_ipy.proposed_fix().chosen.key == "widen_head"
    shell.run_line_magic("cudaassert", "fix apply --restart --full")
    restart_in_process(shell, tmp_path)
    capsys.readouterr()
    shell.run_cell("pass", store_history=True)
    out = capsys.readouterr().out
    assert f"[cudaassert] fixed: cell [{failing}] ran to the end with validators on." in out
    assert "The replay itself failed" not in out


def test_a_class_count_left_to_its_default_is_passed_at_the_call(restart_ext, shell, monkeypatch):
    monkeypatch.delenv("CUDAASSERT_TEST_PRETEND_GPU")
    shell.run_cell(
        "import torch, torch.nn as nn, torch.nn.functional as F\n"
        "class Net(nn.Module):\n"
        "    def __init__(self, width=16, num_classes=3):\n"
        "        super().__init__()\n"
        "        self.head = nn.Linear(width, num_classes)\n"
        "    def forward(self, x):\n"
        "        return self.head(x)",
        store_history=True,
    )
    shell.run_cell("model = Net(16)", store_history=True)
    shell.run_cell("loss = F.cross_entropy(model(torch.randn(4, 16)), torch.tensor([0, 1, 2, 3]))", store_history=True)
    alt = cudaassert_ipy.proposed_fix().alternatives[0]
    assert alt.key == "widen_head" and alt.patch.new_source == "model = Net(16, num_classes=4)"


def test_the_panels_scan_of_the_data_has_a_budget_past_which_the_data_gives_no_evidence():
    import torch

    from cudaassert_ipy.fix.survey import OutOfTime, survey_from, survey_labels

    data = torch.utils.data.TensorDataset(torch.randn(50, 2), torch.arange(50) % 4)
    assert survey_labels("data", data, 3).bad_rows == tuple(range(3, 50, 4))
    with pytest.raises(OutOfTime):
        survey_labels("data", data, 3, budget_s=-1.0)
    assert survey_from({"data": data}, ["data"], 3, budget_s=-1.0) is None
    assert survey_from({"data": data}, ["data"], 3).n_samples == 50


def test_the_alternative_the_user_chooses_is_verified_under_its_own_facts(
    restart_ext, shell, tmp_path, capsys, monkeypatch
):
    monkeypatch.delenv("CUDAASSERT_TEST_PRETEND_GPU")
    shell.run_cell(
        "import torch, torch.nn as nn, torch.nn.functional as F\n"
        "labels = torch.arange(256) % 3\nlabels[201] = 3  # a 4th kind, new in this data\n"
        "train_ds = torch.utils.data.TensorDataset(torch.randn(256, 8), labels)\n"
        "loader = torch.utils.data.DataLoader(train_ds, batch_size=32)\n"
        "head = nn.Linear(8, 3)",
        store_history=True,
    )
    failing = shell.execution_count
    shell.run_cell("for xb, yb in loader:\n    loss = F.cross_entropy(head(xb), yb)", store_history=True)
    fix = cudaassert_ipy.proposed_fix()
    assert fix.default is None and [a.key for a in fix.alternatives] == ["widen_head", "drop_rows"]
    shell.run_line_magic("cudaassert", "fix apply --restart --choose 1")
    restart_in_process(shell, tmp_path)
    capsys.readouterr()
    shell.run_cell("pass", store_history=True)
    out = capsys.readouterr().out
    assert f"[cudaassert] fixed: cell [{failing}] ran to the end with validators on, and all 256 samples" in out


# -- Ultralytics: the class count lives in the data YAML, so the patch is a file patch of it ---------------------------
def _yolo_labels_failure(data_yaml: Path):
    """A class label 3 past `nc: 3`, with the facts the Ultralytics adapter gives the rules (its head names the data
    YAML the trainer read) and the cells of a YOLO notebook, the failing one last."""
    from cudaassert_ipy.diagnose.culprit import CLASS_LABELS, Culprit
    from cudaassert_ipy.diagnose.diagnosis import Diagnosis
    from cudaassert_ipy.diagnose.hints import LabelFacts
    from cudaassert_ipy.fix import CellSource
    from cudaassert_ipy.frameworks.base import ClassHead

    head = ClassHead("ultralytics", now=3, setting="nc", owner="trainer.model", file=str(data_yaml))
    culprit = Culprit(CLASS_LABELS, LabelFacts(bad=(3,), n_classes=3, head=head), module="trainer.model")
    d = Diagnosis(
        kind="device_assert",
        context_dead=False,
        cause_id="class_labels",
        title="class label out of range",
        headline="",
        status="",
        specific=None,
        explanation="",
        fix="",
        culprit=culprit,
    )
    cells = [
        CellSource(1, "c1", "from ultralytics import YOLO\n\nmodel = YOLO('yolov8n.yaml')"),
        CellSource(2, "c2", f"model.train(data={str(data_yaml)!r}, epochs=1, imgsz=64)", ok=False),
    ]
    return d, cells


@pytest.mark.parametrize(
    ("names", "extended"),
    [
        ("names:\n  - cat\n  - dog\n  - bird\n", "names:\n  - cat\n  - dog\n  - bird\n  - class_3\n"),
        ("names:\n  0: cat\n  1: dog\n  2: bird\n", "names:\n  0: cat\n  1: dog\n  2: bird\n  3: class_3\n"),
        (
            "names: ['cat', 'dog', 'bird']  # the annotators' classes\n",
            "names: ['cat', 'dog', 'bird', class_3]  # the annotators' classes\n",
        ),
    ],
)
def test_an_ultralytics_class_count_is_patched_in_the_data_yaml_file_and_only_when_asked(tmp_path, names, extended):
    from cudaassert_ipy.fix import derive

    data_yaml = tmp_path / "birds.yaml"
    before = f"# birds\npath: {tmp_path}\ntrain: images/train\nval: images/val\nnc: 3  # classes\n{names}"
    data_yaml.write_text(before)
    fix = derive.propose(*_yolo_labels_failure(data_yaml))
    (alt,) = [a for a in fix.alternatives if a.key == "widen_head"]
    patch = alt.patch
    assert patch is not None and patch.path == str(data_yaml) and patch.number is None and patch.cell_id is None
    assert alt.title == f"set nc: 4 in the data YAML {data_yaml} and list 4 names"
    assert patch.old_source == before
    assert patch.new_source == before.replace("nc: 3  # classes", "nc: 4  # classes").replace(names, extended)
    assert f"--- a/{data_yaml}\n+++ b/{data_yaml}\n" in patch.diff
    assert "\n-nc: 3  # classes\n" in patch.diff and "\n+nc: 4  # classes\n" in patch.diff
    assert data_yaml.read_text() == before  # proposed, not applied


def test_fix_apply_writes_the_data_yaml_and_refuses_a_file_edited_since(restart_ext, tmp_path, capsys):
    from cudaassert_ipy.fix import derive
    from cudaassert_ipy.shell import fix as shell_fix

    data_yaml = tmp_path / "birds.yaml"
    data_yaml.write_text("nc: 3\nnames: [cat, dog, bird]\n")
    fix = derive.propose(*_yolo_labels_failure(data_yaml))
    choose = next(i for i, a in enumerate(fix.alternatives, 1) if a.key == "widen_head")
    shell_fix.apply(restart_ext, fix, choose)
    assert data_yaml.read_text() == "nc: 4\nnames: [cat, dog, bird, class_3]\n"
    assert f"Patched {data_yaml} (set nc: 4 in the data YAML" in capsys.readouterr().out
    with pytest.raises(shell_fix.FixError, match="changed since the patch was proposed"):
        shell_fix.apply(restart_ext, fix, choose)  # the file now says nc: 4: the old patch no longer applies
    assert data_yaml.read_text() == "nc: 4\nnames: [cat, dog, bird, class_3]\n"


def test_a_file_patch_applied_shows_the_request_naming_the_file_for_the_frontend_extension(
    restart_ext, shell, tmp_path
):
    from IPython.core.displaypub import CapturingDisplayPublisher

    from cudaassert_ipy.fix import derive
    from cudaassert_ipy.shell import fix as shell_fix

    data_yaml = tmp_path / "birds.yaml"
    data_yaml.write_text("nc: 3\nnames: [cat, dog, bird]\n")
    fix = derive.propose(*_yolo_labels_failure(data_yaml))
    choose = next(i for i, a in enumerate(fix.alternatives, 1) if a.key == "widen_head")
    publisher, shell.display_pub = shell.display_pub, CapturingDisplayPublisher()
    try:
        shell_fix.apply(restart_ext, fix, choose, in_notebook=True)  # what the extension's Apply button sends
        (bundle,) = [o["data"] for o in shell.display_pub.outputs if PATCH_MIME in o["data"]]
    finally:
        shell.display_pub = publisher
    request = bundle[PATCH_MIME]
    assert (request["kind"], request["path"], request["cell_id"]) == ("applied", str(data_yaml), None)
    assert request["new_source"] == data_yaml.read_text() == "nc: 4\nnames: [cat, dog, bird, class_3]\n"
    assert bundle["text/plain"].startswith(f"[cudaassert] Patched {data_yaml} (set nc: 4")


def test_a_data_yaml_in_a_form_the_text_edit_does_not_know_gives_no_file_patch(tmp_path):
    from cudaassert_ipy.fix import data_yaml

    assert data_yaml.set_nc("nc: 3\nnames: {0: cat, 1: dog, 2: bird}\n", 4) is None
    assert data_yaml.set_nc("path: x\ntrain: images\n", 4) is None
    assert data_yaml.set_nc("nc: 4\nnames: [a, b, c, d]\n", 4) is None  # already says 4


# -- labels shifted by one in a collate_fn or a Dataset's __getitem__ ------------------------------------------------
COLLATE_SETUP = """
import torch, torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0)
train_ds = TensorDataset(torch.randn(64, 8), torch.arange(64) % 4)
"""
COLLATE = """
def collate(batch):
    xs = torch.stack([x for x, _ in batch])
    labels = torch.stack([y for _, y in batch])
    return xs, labels + 1  # classes 1..4, as the annotation tool numbers them
loader = DataLoader(train_ds, batch_size=16, collate_fn=collate)
"""
STEP = """
from fake_cuda_session import cross_entropy
for xb, yb in loader:
    loss = cross_entropy(model(xb), yb)  # F.cross_entropy on a GPU
"""


def test_a_collate_fn_that_adds_1_to_the_labels_is_the_line_the_patch_edits(restart_ext, shell, tmp_path, capsys):
    shell.run_cell(COLLATE_SETUP, store_history=True)
    collate_cell, cell_id = shell.execution_count, "collate"
    shell.run_cell(COLLATE, store_history=True, cell_id=cell_id)
    shell.run_cell("model = nn.Linear(8, 4)", store_history=True)
    failing = shell.execution_count
    assert not shell.run_cell(STEP, store_history=True).success
    fix = cudaassert_ipy.proposed_fix()
    assert fix.safety == DECISION and fix.chosen.key == "shift_labels"
    assert fix.why == (
        "the data decides: `train_ds` holds labels 0..3, all in range; `collate` (the DataLoader's "
        "collate_fn) moves each batch's labels by +1"
    )
    assert (fix.execution_count, fix.cell_id) == (collate_cell, cell_id)
    assert fix.new_source == COLLATE.replace("return xs, labels + 1  #", "return xs, labels  #")  # the comment kept
    assert fix.chosen.title == (
        "take out the `+ 1` that `collate` (the DataLoader's collate_fn) applies to the labels (labels 0..3)"
    )
    widen = fix.alternatives[1]  # the other meaning, side by side, with its own patch
    assert widen.key == "widen_head" and widen.patch.new_source == "model = nn.Linear(8, 5)"
    shell.run_line_magic("cudaassert", "fix apply --restart")
    restart_in_process(shell, tmp_path)
    capsys.readouterr()
    shell.run_cell("pass", store_history=True)
    out = capsys.readouterr().out
    assert f"[cudaassert] fixed: cell [{failing}] ran to the end with validators on, and all 64 samples" in out
    assert shell.user_ns["model"].out_features == 4  # the head kept its 4 classes


def test_a_getitem_that_subtracts_1_from_0_based_labels_is_taken_out_not_the_rows_dropped(restart_ext, shell):
    shell.run_cell(
        COLLATE_SETUP + "class Pets(torch.utils.data.Dataset):\n"
        "    def __init__(self, x, y):\n"
        "        self.x, self.y = x, y\n"
        "    def __len__(self):\n"
        "        return len(self.x)\n"
        "    def __getitem__(self, i):\n"
        "        label = int(self.y[i])\n"
        "        label -= 1  # the CSV is 1-based\n"
        "        return self.x[i], label\n"
        "pets = Pets(torch.randn(64, 8), torch.arange(64) % 4)\n"
        "loader = DataLoader(pets, batch_size=16)\n"
        "model = nn.Linear(8, 4)",
        store_history=True,
    )
    assert not shell.run_cell(STEP, store_history=True).success
    fix = cudaassert_ipy.proposed_fix()
    assert fix.chosen.key == "shift_labels" and "widen_head" not in [a.key for a in fix.alternatives]
    assert fix.why == (
        "the data decides: the labels `Pets.__getitem__` returns run -1..2: its -1 moves them out of 0..3"
    )
    assert "        label -= 1  # the CSV is 1-based\n" not in fix.new_source
    assert "        label = int(self.y[i])\n        return self.x[i], label\n" in fix.new_source


def test_a_label_shift_without_the_datas_evidence_is_offered_but_not_chosen():
    from cudaassert_ipy.diagnose.culprit import CLASS_LABELS, Culprit
    from cudaassert_ipy.diagnose.diagnosis import Diagnosis
    from cudaassert_ipy.diagnose.hints import LabelFacts
    from cudaassert_ipy.fix import CellSource, derive

    culprit = Culprit(CLASS_LABELS, LabelFacts(bad=(4,), n_classes=4), module="model", module_type="Linear")
    d = Diagnosis(
        kind="device_assert",
        context_dead=False,
        cause_id="class_labels",
        title="class label out of range",
        headline="",
        status="",
        specific=None,
        explanation="",
        fix="",
        culprit=culprit,
    )
    cells = [
        CellSource(1, "a", COLLATE_SETUP + COLLATE),
        CellSource(2, "b", "model = nn.Linear(8, 4)"),
        CellSource(3, "c", STEP, ok=False),
    ]
    fix = derive.propose(d, cells)  # no scan of the data: nothing says which meaning the author had
    assert fix.default is None and {a.key for a in fix.alternatives} == {"widen_head", "shift_labels"}
    shift = next(a for a in fix.alternatives if a.key == "shift_labels")
    assert shift.evidence == ("`collate` (the DataLoader's collate_fn) moves the labels by +1 (`labels + 1`)")
    assert "return xs, labels  # classes" in shift.patch.new_source


# -- Hugging Face: id2label / label2id follow num_labels --------------------------------------------------------------
def _hf_labels_failure(*cells: str):
    """Label 3 with `num_labels=3`, with the head the transformers adapter gives the rules, over ``cells``."""
    from cudaassert_ipy.diagnose.culprit import CLASS_LABELS, Culprit
    from cudaassert_ipy.diagnose.diagnosis import Diagnosis
    from cudaassert_ipy.diagnose.hints import LabelFacts
    from cudaassert_ipy.fix import CellSource
    from cudaassert_ipy.frameworks.base import ClassHead

    head = ClassHead("transformers", now=3, setting="num_labels", owner="model.config")
    culprit = Culprit(
        CLASS_LABELS, LabelFacts(bad=(3,), n_classes=3, head=head), module="model.classifier", module_type="Linear"
    )
    d = Diagnosis(
        kind="device_assert",
        context_dead=False,
        cause_id="class_labels",
        title="class label out of range",
        headline="",
        status="",
        specific=None,
        explanation="",
        fix="",
        culprit=culprit,
    )
    return d, [CellSource(i, f"c{i}", src, ok=i < len(cells)) for i, src in enumerate(cells, 1)]


def _widen(*cells: str):
    from cudaassert_ipy.fix import derive

    return next(a for a in derive.propose(*_hf_labels_failure(*cells)).alternatives if a.key == "widen_head")


def test_literal_id2label_and_label2id_get_the_new_ids_when_num_labels_is_widened():
    load = (
        "model = AutoModelForSequenceClassification.from_pretrained(\n"
        "    'bert-base-uncased', num_labels=3,\n"
        "    id2label={0: 'neg', 1: 'neu', 2: 'pos'},  # the annotators' names\n"
        "    label2id={'neg': 0, 'neu': 1, 'pos': 2})"
    )
    alt = _widen(load, "trainer.train()")
    assert alt.patch.new_source == (
        "model = AutoModelForSequenceClassification.from_pretrained(\n"
        "    'bert-base-uncased', num_labels=4,\n"
        "    id2label={0: 'neg', 1: 'neu', 2: 'pos', 3: 'LABEL_3'},  # the annotators' names\n"
        "    label2id={'neg': 0, 'neu': 1, 'pos': 2, 'LABEL_3': 3}, ignore_mismatched_sizes=True)"
    )
    assert "by hand" not in alt.patch.why_cell


def test_a_label_map_written_one_entry_a_line_or_with_string_ids_keeps_its_form():
    cell = (
        'ID2LABEL = {\n    "0": "neg",\n    "1": "neu",\n    "2": "pos",\n}\n'
        "config = BertConfig(vocab_size=100, num_labels=3, id2label=ID2LABEL)"
    )
    alt = _widen(cell, "trainer.train()")
    assert alt.patch.new_source == cell.replace('"2": "pos",\n}', '"2": "pos",\n    "3": "LABEL_3",\n}').replace(
        "num_labels=3", "num_labels=4"
    )


def test_label_maps_built_by_an_expression_are_left_and_named_in_one_line():
    cell = (
        "model = AutoModelForSequenceClassification.from_pretrained(\n"
        "    'bert-base-uncased', num_labels=3, ignore_mismatched_sizes=True,\n"
        "    id2label=dict(enumerate(names)), label2id={n: i for i, n in enumerate(names)})"
    )
    alt = _widen(cell, "trainer.train()")
    assert alt.patch.new_source == cell.replace("num_labels=3", "num_labels=4")
    assert alt.patch.why_cell.endswith(
        "; `id2label` and `label2id`: not written as a literal dict, so extend by hand to 4 entries (ids 0..3)"
    )
    # built from the class count the patch changes: they follow it, nothing to say
    follows = (
        "num_labels = 3\nmodel = AutoModelForSequenceClassification.from_pretrained(\n"
        "    'bert-base-uncased', num_labels=num_labels, id2label=dict(enumerate(LABELS[:num_labels])))"
    )
    alt = _widen(follows, "trainer.train()")
    assert alt.patch.new_source.startswith("num_labels = 4\n") and "by hand" not in alt.patch.why_cell


# -- Ultralytics: the data YAML's names and its label files' class ids are the decision's evidence --------------------
def _yolo_dataset(root: Path, boxes: list[list[int]], names: str = "[cat, dog, bird]") -> Path:
    """A YOLO dataset: one image and label file per entry of ``boxes`` (its boxes' class ids), and its data YAML."""
    for i, ids in enumerate(boxes):
        (root / "images" / "train").mkdir(parents=True, exist_ok=True)
        (root / "labels" / "train").mkdir(parents=True, exist_ok=True)
        (root / "images" / "train" / f"{i:03}.jpg").write_bytes(b"")
        (root / "labels" / "train" / f"{i:03}.txt").write_text("".join(f"{c} 0.5 0.5 0.2 0.2\n" for c in ids))
    data_yaml = root / "data.yaml"
    data_yaml.write_text(f"path: .\ntrain: images/train\nval: images/train\nnc: 3\nnames: {names}\n")
    return data_yaml


def test_an_ultralytics_class_as_common_as_the_others_decides_for_the_data_yaml_patch(tmp_path):
    from cudaassert_ipy.fix import derive

    data_yaml = _yolo_dataset(tmp_path / "birds", [[i % 4] for i in range(80)])
    fix = derive.propose(*_yolo_labels_failure(data_yaml))
    assert fix.chosen.key == "widen_head" and fix.patch.path == str(data_yaml)
    assert fix.why == "the data decides: label 3 is in 20 of 80 samples, as common as the other classes"
    assert [a.key for a in fix.alternatives] == ["widen_head"]  # 20 boxes of class 3 are no handful of stray lines
    assert fix.patch.new_source.endswith("nc: 4\nnames: [cat, dog, bird, class_3]\n")


def test_an_ultralytics_data_yaml_naming_more_classes_than_nc_decides_for_its_count(tmp_path):
    from cudaassert_ipy.fix import derive

    data_yaml = _yolo_dataset(tmp_path / "birds", [[i % 4] for i in range(40)], names="[cat, dog, bird, owl]")
    fix = derive.propose(*_yolo_labels_failure(data_yaml))
    assert fix.chosen.key == "widen_head"
    assert fix.why == (
        f"the data decides: the data declares 4 classes (`names:` in {data_yaml}) and the labels stay below 4"
    )
    assert fix.patch.new_source.endswith("nc: 4\nnames: [cat, dog, bird, owl]\n")  # the names were there already


def test_a_few_ultralytics_label_lines_past_the_named_classes_are_named_and_nothing_is_applied(tmp_path):
    from cudaassert_ipy.fix import derive

    boxes = [[i % 3] for i in range(60)]
    boxes[7], boxes[41] = [0, 3], [3]
    data_yaml = _yolo_dataset(tmp_path / "birds", boxes)
    fix = derive.propose(*_yolo_labels_failure(data_yaml))
    labels = Path("labels") / "train"
    first = fix.alternatives[0]
    assert fix.default is None and first.key == "drop_rows" and first.patch is None
    assert first.title == (
        "correct or delete the 2 label line(s) whose class id is outside 0..2 "
        f"({labels / '007.txt'} line 2, {labels / '041.txt'} line 1)"
    )
    assert fix.why.startswith(
        f"the data decides: the data YAML {data_yaml} names 3 classes (nc: 3): class id(s) 3 "
        "have no name; 2 of 61 samples hold labels outside 0..2"
    )
    assert fix.why.endswith(
        "but no code change makes that fix (label files are data, not code: correct or delete "
        "those lines), so nothing is applied by default"
    )
    assert fix.alternatives[1].key == "widen_head" and fix.alternatives[1].patch.path == str(data_yaml)
