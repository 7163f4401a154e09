"""Batch notebook runs (papermill, nbconvert --execute, nbclient, Kaggle "Save Version"): the full static report.

A stored widget exports (HTML, GitHub, a CI artifact) as its headline only, so these runs get one output with
the whole report as text/plain and text/html, and no widget.
"""

from __future__ import annotations

import html
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from helpers import kernel_env
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

pytestmark = pytest.mark.kernel

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
LOSS_LINE = "Loss.cu:250 nll_loss_forward_reduce_cuda_kernel_2d: `t >= 0 && t < n_classes` failed in 64 threads"
FIX = "Make the labels 0-based integers in 0..C-1"
SETUP = """
import torch, torch.nn as nn
from gpu_double import fail_like_gpu
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 195))
labels = torch.tensor([3, 195, 7, 195])
"""


def notebook() -> nbformat.NotebookNode:
    return new_notebook(
        cells=[
            new_code_cell("%load_ext cudaassert"),
            new_code_cell(SETUP),
            new_code_cell("loss = fail_like_gpu()", metadata={"tags": ["raises-exception"]}),
        ],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    )


def env_for(home: Path, **extra: str) -> dict[str, str]:
    return kernel_env(IPYTHONDIR=str(home / "ipython"), JUPYTER_RUNTIME_DIR=str(home / "runtime"), **extra)


def the_report(nb: nbformat.NotebookNode) -> dict:
    outputs = nb.cells[2].outputs
    kinds = [o.output_type for o in outputs]
    displays = [o for o in outputs if o.output_type == "display_data"]
    assert "error" in kinds and len(displays) == 1, "one output after the traceback"
    assert kinds.index("error") < outputs.index(displays[0])
    assert WIDGET_VIEW not in displays[0].data
    return displays[0].data


@pytest.mark.parametrize("run_type", ["", "Batch"], ids=["nbclient-like-papermill", "kaggle-save-version"])
def test_a_batch_run_stores_the_whole_report_as_text_and_html_without_a_widget(tmp_path, run_type):
    nb = notebook()
    extra = {"KAGGLE_KERNEL_RUN_TYPE": run_type} if run_type else {}
    NotebookClient(nb, timeout=120, kernel_name="python3").execute(env=env_for(tmp_path, **extra))
    data = the_report(nb)
    plain, page = data["text/plain"], data["text/html"]
    assert "[cudaassert] GPU context dead · class label out of range in cross_entropy" in plain
    assert FIX in plain and LOSS_LINE in plain and "Evidence:" in plain
    assert FIX in page and html.escape(LOSS_LINE) in page
    assert "widgets" not in nb.metadata or not nb.metadata.widgets.get(
        "application/vnd.jupyter.widget-state+json", {}
    ).get("state")


def test_nbconvert_execute_to_html_shows_the_fix_and_the_folded_assertion_line(tmp_path):
    path = tmp_path / "story.ipynb"
    nbformat.write(notebook(), path)
    jupyter = str(Path(sys.executable).with_name("jupyter"))
    result = subprocess.run(
        [jupyter, "nbconvert", "--to", "html", "--execute", "--allow-errors", str(path)],
        cwd=tmp_path,
        env=env_for(tmp_path),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "story.html").read_text()
    assert "Fix:" in page and FIX in page
    assert html.escape(LOSS_LINE) in page
    assert WIDGET_VIEW not in page and page.count(FIX) == 1, "the static report, once, and no widget to render"
