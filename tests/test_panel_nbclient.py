"""Headless runs (nbclient, hence papermill and Kaggle "Save Version"): the panel plus its text and HTML fallbacks."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from helpers import kernel_env
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

pytestmark = pytest.mark.kernel

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
PATCH_MIME = "application/vnd.cudaassert.patch+json"
SETUP = """
import torch, torch.nn as nn
from gpu_double import fail_like_gpu
class Birds:
    classes = [f"species_{i}" for i in range(196)]
train_ds = Birds()
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 195))
labels = torch.tensor([3, 195, 7, 195])
"""


class InteractiveClient(NotebookClient):
    """nbclient as an interactive frontend would talk: cells sent with ``allow_stdin=True`` (batch runs refuse it,
    and get the static report instead: tests/test_run_batch_notebook.py), so the panel and its saved state show."""

    async def async_start_new_kernel_client(self):  # type: ignore[override]
        kc = await super().async_start_new_kernel_client()
        kc.allow_stdin = True
        return kc


def run_story(home: Path, client: type[NotebookClient] = NotebookClient, **env: str) -> nbformat.NotebookNode:
    """Run the story in a fresh kernel whose IPython profile and Jupyter runtime dir are its own."""
    nb = new_notebook(
        cells=[
            new_code_cell("%load_ext cudaassert"),
            new_code_cell(SETUP),
            new_code_cell("loss = fail_like_gpu()", metadata={"tags": ["raises-exception"]}),
        ],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    )
    env = kernel_env(IPYTHONDIR=str(home / "ipython"), JUPYTER_RUNTIME_DIR=str(home / "runtime"), **env)
    client(nb, timeout=120, kernel_name="python3").execute(env=env)
    return nb


def test_a_failing_cell_holds_the_panel_with_the_full_text_and_html_report(tmp_path):
    nb = run_story(tmp_path, InteractiveClient)
    outputs = nb.cells[2].outputs
    kinds = [o.output_type for o in outputs]
    assert "error" in kinds and outputs[kinds.index("error")].ename == "AcceleratorError"
    panels = [i for i, o in enumerate(outputs) if o.output_type == "display_data" and WIDGET_VIEW in o.data]
    assert len(panels) == 1 and panels[0] > kinds.index("error"), "one panel, after the traceback"
    data = outputs[panels[0]].data
    assert set(data) == {WIDGET_VIEW, "text/plain", "text/html"}
    plain = data["text/plain"]
    assert plain.startswith(
        "[cudaassert] The GPU context of this kernel is dead. Nothing on the GPU can be used "
        "again in this process; restart the kernel."
    )
    assert "[cudaassert] GPU context dead · class label out of range in cross_entropy" in plain
    assert "Loss.cu:250 nll_loss_forward_reduce_cuda_kernel_2d: `t >= 0 && t < n_classes` failed in 64 threads" in plain
    assert "\nGPU: " in plain  # the NVML line (or why it is unavailable)
    assert '<div class="cudaassert-report"' in data["text/html"]
    assert "class label out of range in cross_entropy" in data["text/html"]
    # nbclient saves the widget state: a frontend opening the result renders the panel, not "model not found"
    state = nb.metadata.widgets[WIDGET_STATE]["state"]
    root = state[data[WIDGET_VIEW]["model_id"]]["state"]
    assert "cudaassert-panel" in root["_dom_classes"]
    buttons = {m["state"]["description"]: m["state"] for m in state.values() if m["model_name"] == "ButtonModel"}
    # the fix section (#26): Apply and Apply, Restart & replay; nbclient is no frontend that edits cells, so the
    # patched cell is offered to copy
    assert set(buttons) == {
        "Restart & replay setup",
        "Restart on CPU",
        "Copy report",
        "Apply",
        "Apply, Restart & replay",
        "Copy patched cell",
    }
    assert not buttons["Copy report"]["disabled"] and not buttons["Apply"]["disabled"]
    assert (
        "[cudaassert] Proposed fix for `model.2` (decision): the data decides: the data declares 196 classes" in plain
    )
    assert "+model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 196))" in plain
    assert (
        'class="ca-diff-add" style="color:var(--jp-success-color1,#2e7d32)">+model = nn.Sequential' in data["text/html"]
    )  # inline: a saved notebook's HTML keeps the diff's colours
    assert all(b["tooltip"] for b in buttons.values() if b["disabled"]), "a disabled button says why"


CLICK_APPLY = """
import ipywidgets.widgets.widget as registry
# ipywidgets 8.1+ keeps its live widgets in the module, 7.x (the Colab/Kaggle pins) on the class
live = registry._instances if hasattr(registry, "_instances") else registry.Widget.widgets
apply = [w for w in list(live.values()) if getattr(w, "description", None) == "Apply"][-1]
apply.click()
"""


def test_the_apply_button_in_a_real_kernel_patches_the_history_and_its_request_lands_in_the_panel(tmp_path):
    nb = new_notebook(
        cells=[
            new_code_cell("%load_ext cudaassert"),
            new_code_cell(SETUP),
            new_code_cell("loss = fail_like_gpu()", metadata={"tags": ["raises-exception"]}),
            new_code_cell(CLICK_APPLY),
            new_code_cell("print(cudaassert_ipy.shell.extension.current().history.records[1].source)"),
        ],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    )
    nb.cells[4].source = "import cudaassert_ipy.shell.extension\n" + nb.cells[4].source
    env = kernel_env(IPYTHONDIR=str(tmp_path / "ipython"), JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"))
    InteractiveClient(nb, timeout=120, kernel_name="python3").execute(env=env)
    assert "nn.Linear(32, 196))" in nb.cells[4].outputs[0].text  # the history's cell [2] is the patched one
    state = nb.metadata.widgets[WIDGET_STATE]["state"]
    outputs = [o for m in state.values() if m["model_name"] == "OutputModel" for o in m["state"].get("outputs", [])]
    requests = [o["data"][PATCH_MIME] for o in outputs if PATCH_MIME in o.get("data", {})]
    assert len(requests) == 1 and requests[0]["execution_count"] == 2 and requests[0]["version"] == 1
    assert "nn.Linear(32, 196))" in requests[0]["new_source"]
    status = [m["state"]["value"] for m in state.values() if m["model_name"] == "HTMLModel"]
    assert any("Patched cell [2]: set" in v for v in status)


def test_a_kaggle_batch_run_gets_the_text_report_without_a_widget(tmp_path):
    nb = run_story(tmp_path, KAGGLE_KERNEL_RUN_TYPE="Batch")
    displays = [o for o in nb.cells[2].outputs if o.output_type == "display_data"]
    assert displays and all(WIDGET_VIEW not in o.data for o in displays)
    plain = displays[-1].data["text/plain"]
    assert "[cudaassert] GPU context dead · class label out of range in cross_entropy" in plain
    assert "+model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 196))" in plain  # the patch too
