"""The example notebooks run top to bottom in a real kernel and show the diagnosis each one is about.

Every notebook is executed with nbclient on the CPU (``CUDA_VISIBLE_DEVICES=`` hides any GPU, so
the CPU-twin path runs everywhere). Errors are allowed only in cells tagged ``raises-exception``,
and each of those must really fail, with the expected exception and the expected diagnosis in its
outputs. Cells tagged ``fix`` must run cleanly. The static tests keep the committed notebooks
equal to ``examples/make_notebooks.py`` and free of outputs.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
import pytest
from helpers import ROOT, kernel_env

NB_DIR = ROOT / "examples" / "notebooks"
GENERATOR = ROOT / "examples" / "make_notebooks.py"
FAILS = "raises-exception"
FIX = "fix"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
CPU_ALIVE = "[cudaassert] This error was raised on the CPU, so no GPU context was harmed."
VALIDATOR_ALIVE = "[cudaassert] A validator caught this input before any device-side assert: the GPU is still alive."


@dataclass(frozen=True)
class Expected:
    """What one notebook must show: per tagged cell, the error it raises and text in its outputs."""

    errors: dict[str, str]  # tag -> exception class name (cells tagged raises-exception)
    texts: dict[str, tuple[str, ...]]  # tag -> substrings of that cell's outputs
    panels: tuple[str, ...] = field(default=())  # tags whose output must carry the full static report


EXPECTED: dict[str, Expected] = {
    "01_quickstart": Expected(
        errors={"bad-train": "IndexError"},
        texts={
            "bad-train": (
                CPU_ALIVE,
                "[cudaassert] CPU error · class label out of range in cross_entropy",
                "cross_entropy got class label 3, but the model's last layer `model.2` has out_features=3, "
                "so labels must be 0..2.",
                "Likely fix: the labels reach 3 with 3 classes: if you have 4 classes, make the last layer output 4 "
                "logits (out_features=4); if labels start at 1, subtract 1.",
                "Exception: IndexError: Target 3 is out of bounds.",
            ),
            "status": ("GPU context: alive", "validators: off"),
            "preflight": ("labels (valid: 0..2): 1 sample with bad values.", "sample indices: 137 "),
            FIX: ("trained 3 epochs on 299 rows",),
        },
        panels=("bad-train",),
    ),
    "02_kaggle_image_classifier": Expected(
        errors={
            "bad-train": "IndexError",
            "validator-stops": "ValidationIndexError",
            "one-step": "ValidationIndexError",
        },
        texts={
            "bad-train": (
                "[cudaassert] CPU error · class label out of range in cross_entropy",
                "cross_entropy got class label 195, but the model's last layer `model.head` has out_features=195, "
                "so labels must be 0..194.",
                "Likely fix: the dataset lists 196 classes but the model outputs 195: set out_features=196.",
                "train_ds.classes: 196 entries",
            ),
            "fix-proposal": (
                "Proposed fix for `model.head` (decision): the data decides",
                '-num_classes = 195  # "the labels go up to 195"',
                '+num_classes = 196  # "the labels go up to 195"',
                "Apply it with `%cudaassert fix apply` (add `--restart` to restart, replay and verify).",
            ),
            "status": ("GPU context: alive",),
            "setup-list": (
                "Setup cells a restart replays",
                "] class SyntheticCars(Dataset):",
                '] num_classes = 195  # "the labels go up to 195"',
            ),
            "validators-on": ("cudaassert validators are on",),
            "validator-stops": (
                VALIDATOR_ALIVE,
                "[cudaassert] GPU alive · class label out of range in cross_entropy",
                "cross_entropy: target has ",
                "valid: 0..194",
                "make the last layer output 196 logits (out_features=196)",
            ),
            "bad-samples": (
                "train_ds[39",
                ": targets = 195 (valid 0..194 or ignore_index=-100), batch ",
                " of train_loader",
            ),
            "one-step": (
                "Bad samples:",
                "from `one_batch`: `train_ds[39",
                "has class label 195 (position ",
                "of `targets`; valid: 0..194 or ignore_index=-100)",
            ),
            FIX: (
                "head: Linear(in_features=32, out_features=196, bias=True); 2 epochs trained, the validators stopped "
                "nothing",
                "cudaassert validators are off",
            ),
        },
        panels=("bad-train", "validator-stops"),
    ),
    "03_token_ids_vs_vocab": Expected(
        errors={"bad-forward": "IndexError", "check-ids": "ValidationIndexError"},
        texts={
            "bad-forward": (
                CPU_ALIVE,
                "index out of range in an embedding or index_select",
                "Token ids reach 22, but `model.embed_tokens` has num_embeddings=22 (valid 0..21).",
                "Likely fix: the tokenizer has 24 tokens but the embedding only 22 rows: call "
                "model.resize_token_embeddings(len(tokenizer)).",
            ),
            "check-ids": (
                "check_token_ids: ids has 6 bad values; valid: 0..21 (vocab_size=22).",
                "resize_token_embeddings",
            ),
            FIX: ("Embedding(24, 32, padding_idx=0)",),
        },
    ),
    "04_bce_without_sigmoid": Expected(
        errors={"bad-train": "RuntimeError"},
        texts={
            "bad-train": (
                CPU_ALIVE,
                "[cudaassert] CPU error · BCELoss input outside [0, 1] in binary_cross_entropy",
                "these look like raw logits. Likely fix: the input must be probabilities in [0, 1], not logits: pass "
                "the raw logits to nn.BCEWithLogitsLoss / F.binary_cross_entropy_with_logits (numerically stable), "
                "or apply torch.sigmoid first.",
                "Exception: RuntimeError: all elements of input should be between 0 and 1",
            ),
            FIX: ("accuracy",),
        },
    ),
    "05_segmentation_ignore_255": Expected(
        errors={"bad-train": "IndexError"},
        texts={
            "bad-train": (
                CPU_ALIVE,
                "cross_entropy got class label 255, but the input has 4 classes (shape (8, 4, 32, 32)), "
                "so labels must be 0..3.",
                "255 is the 'void' label of VOC-style segmentation masks: pass ignore_index=255 to the loss.",
            ),
            FIX: (
                "labels (valid: 0..3 or ignore_index=255)",
                "Nothing out of range",
                "pixel accuracy on labelled pixels",
            ),
        },
    ),
    "06_cuda_debug_and_preflight": Expected(
        errors={"cuda-debug-stops": "ValidationIndexError", "nan-stops": "NonFiniteError"},
        texts={
            "cuda-debug-stops": (
                "cross_entropy: target has 1 bad value; valid: 0..9 (or ignore_index=-100). First bad: target[17]=10.",
                VALIDATOR_ALIVE,
                "(Caught by cudaassert validators: on a GPU this input triggers a device-side assert; raised as "
                "this Python error instead, so no GPU context is harmed.)",
                "batch 0 of epoch 0 from `train_loader`: `train_ds[17]` has class label 10 (position 17 of `yb`; "
                "valid: 0..9 or ignore_index=-100); 1 bad sample in that batch, no earlier batch was recorded.",
            ),
            "bad-samples": (
                "BadSample(dataset_index=17, sample='train_ds[17]', field='yb', value=10",
                "failing batch: 50 samples; labels out of range: [10]",
            ),
            "preflight": (
                "preflight: scanned 1000 samples",
                "labels (valid: 0..9): 3 samples with bad values.",
                "sample indices: 17, 256, 731 ",
                "bad samples: [17, 256, 731]",
            ),
            "preflight-clean": ("preflight: scanned 997 samples", "Nothing out of range"),
            FIX: ("3 epochs with validators on, nothing stopped",),
            "nan-stops": ("torch.log produced 1 inf in its output", "log_weights = torch.log(weights)"),
            "nan-fixed": ("probabilities: [0.2, 0.0, 0.8]",),
        },
    ),
    # these two need the real frameworks: executed in the frameworks environment (see FRAMEWORKS below)
    "07_hf_trainer": Expected(
        errors={"bad-train": "IndexError"},
        texts={
            "bad-train": (
                CPU_ALIVE,
                "[cudaassert] CPU error · class label out of range in cross_entropy",
                "cross_entropy got class label 3, but the model's last layer `trainer.model.classifier` has "
                "out_features=3, so labels must be 0..2.",
                "Likely fix: the dataset lists 4 classes but the model outputs 3: load the model with "
                "from_pretrained(..., num_labels=4, ignore_mismatched_sizes=True) and give it id2label/label2id with "
                "4 entries.",
                "trainer.model.config: num_labels=3, problem_type=single_label_classification, id2label: 3 entries",
                "train_ds.features['label'].classes: 4 entries",
                "`dataset[37]` has class label 3",
            ),
            "fix-proposal": (
                "Proposed fix for `trainer.model.classifier` (decision): the data decides",
                "-trainer = make_trainer(num_labels=3)",
                "+trainer = make_trainer(num_labels=4)",
                "Apply it with `%cudaassert fix apply`",
            ),
            "preflight": ("sample indices: 37 ", "from_pretrained(..., num_labels=4, ignore_mismatched_sizes=True)"),
            FIX: ("trained 16 steps with 4 labels",),
        },
        panels=("bad-train",),
    ),
    "08_lightning": Expected(
        errors={"bad-train": "IndexError"},
        texts={
            "bad-train": (
                CPU_ALIVE,
                "cross_entropy got class label 3, but the model's last layer `model.head` has out_features=3, so "
                "labels must be 0..2.",
                "Likely fix: the labels reach 3 with 3 classes: if you have 4 classes, build `LitClassifier` with "
                "num_classes=4 (its hparams.num_classes=3 sizes the last layer); if labels start at 1, subtract 1.",
                "Your code: line 14: loss = F.cross_entropy(self(x), y)",
                "model.hparams: num_classes=3",
                "`train_ds[201]` has class label 3",
            ),
            FIX: ("trained 16 steps with num_classes=4",),
        },
        panels=("bad-train",),
    ),
}
#: Notebooks that import a training framework: their execution is marked `frameworks`.
FRAMEWORKS = {"07_hf_trainer", "08_lightning"}


# -- helpers -------------------------------------------------------------------------------------
def _load_generator() -> Any:
    spec = importlib.util.spec_from_file_location("make_notebooks", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("make_notebooks", module)
    spec.loader.exec_module(module)
    return module


def _read(name: str) -> Any:
    return nbformat.read(NB_DIR / f"{name}.ipynb", as_version=4)


def _tags(cell: Any) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def _code_cells(nb: Any) -> list[Any]:
    return [c for c in nb.cells if c.cell_type == "code"]


def _output_text(cell: Any) -> str:
    """Everything a reader sees under the cell, as text: streams, text/plain of displays, the error."""
    parts = []
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
            parts.append(out.text)
        elif out.output_type in ("display_data", "execute_result"):
            parts.append(out.data.get("text/plain", ""))
        elif out.output_type == "error":
            parts.append(f"{out.ename}: {out.evalue}\n" + "\n".join(out.traceback))
    return _ANSI.sub("", "\n".join(parts))


def _errors(cell: Any) -> list[Any]:
    return [o for o in cell.get("outputs", []) if o.output_type == "error"]


def _execute(name: str, cwd: Path) -> Any:
    from nbclient import NotebookClient

    nb = _read(name)
    # the CPU-twin path even on a machine with a GPU; the kernel's IPython profile and runtime dir are its own
    env = kernel_env(CUDA_VISIBLE_DEVICES="", IPYTHONDIR=str(cwd / "ipython"), JUPYTER_RUNTIME_DIR=str(cwd / "runtime"))
    env.pop("CUDAASSERT_VALIDATORS", None)
    client = NotebookClient(
        nb, timeout=300, startup_timeout=120, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}
    )
    client.execute(env=env)  # errors outside raises-exception cells raise CellExecutionError here
    return nb


# -- static: the committed notebooks -------------------------------------------------------------
def test_the_committed_notebooks_are_exactly_what_the_generator_writes_without_outputs():
    gen = _load_generator()
    assert sorted(gen.NOTEBOOKS) == sorted(EXPECTED)
    assert sorted(p.stem for p in NB_DIR.glob("*.ipynb")) == sorted(EXPECTED)
    for name, cells in gen.NOTEBOOKS.items():
        on_disk = (NB_DIR / f"{name}.ipynb").read_text(encoding="utf-8")
        assert on_disk == gen.render(gen.build(name, cells)), f"{name}: run python examples/make_notebooks.py"
        nb = nbformat.reads(on_disk, as_version=4)
        nbformat.validate(nb)
        for cell in _code_cells(nb):
            assert cell.outputs == [] and cell.execution_count is None, f"{name}: {cell.id} has outputs"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_notebook_loads_the_extension_first_picks_its_device_and_tags_its_failing_cells(name):
    nb = _read(name)
    code = _code_cells(nb)
    assert code[0].source.strip() == "%load_ext cudaassert"
    sources = "\n".join(c.source for c in code)
    assert 'device = "cuda" if torch.cuda.is_available() else "cpu"' in sources
    assert "gpu_double" not in sources and "fail_like_gpu" not in sources  # the real thing, never the test double
    expected = EXPECTED[name]
    failing = [c for c in code if FAILS in _tags(c)]
    assert {t for c in failing for t in _tags(c) if t != FAILS} == set(expected.errors)
    last_failure = max(code.index(c) for c in failing)
    assert any(FIX in _tags(c) for c in code[last_failure:]), "the story ends with the fix working"
    for tag in expected.texts:
        assert any(tag in _tags(c) for c in code), f"{name}: no cell tagged {tag!r}"


# -- executed: the story, as the user sees it ----------------------------------------------------
@pytest.mark.kernel
@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.frameworks) if n in FRAMEWORKS else n for n in sorted(EXPECTED)]
)
def test_the_notebook_runs_top_to_bottom_and_shows_its_diagnosis_then_the_fix_works(name, tmp_path):
    nb = _execute(name, tmp_path)
    expected = EXPECTED[name]
    code = _code_cells(nb)
    for cell in code:
        tags = _tags(cell)
        assert cell.execution_count is not None, f"{cell.id} did not run"
        if FAILS in tags:
            (tag,) = [t for t in tags if t != FAILS]
            errors = _errors(cell)
            assert [e.ename for e in errors] == [expected.errors[tag]], _output_text(cell)
        else:
            assert not _errors(cell), f"{cell.id} failed:\n{_output_text(cell)}"
    for tag, needles in expected.texts.items():
        text = "\n".join(_output_text(c) for c in code if tag in _tags(c))
        for needle in needles:
            assert needle in text, f"{name} [{tag}] lacks {needle!r}; it shows:\n{text}"
    for tag in expected.panels:
        (cell,) = [c for c in code if tag in _tags(c)]
        shown = [o for o in cell.outputs if o.output_type == "display_data"]
        # nbclient is a batch run (issue #12): one static report, full text and HTML, and no widget to go stale
        reports = [o for o in shown if "[cudaassert]" in o.data.get("text/plain", "")]
        assert len(reports) == 1 and not any(WIDGET_VIEW in o.data for o in shown), f"{tag}: {shown}"
        assert "Fix:" in reports[0].data["text/plain"] and "Fix:" in reports[0].data["text/html"]
