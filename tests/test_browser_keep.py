"""The panel's per-cell "keep" toggle in a real browser: JupyterLab 4 on 127.0.0.1, Debian's chromium via Playwright.

Run All fails on the GPU test double; in the panel the user presses "keep" beside one setup cell
(not marked ``# cudaassert: keep`` in its code) and leaves the other alone, then clicks "Restart &
replay setup" and accepts Lab's dialog. In the new kernel the toggled cell is restored, not run:
its values carry the old kernel's process id and the same random numbers; the other cell is
replayed and carries the new process id. The page says which cell was kept.
Screenshots go to docs/img/keep-*.png.
"""

from __future__ import annotations

import json
import re
from typing import Any

import nbformat
import pytest
from helpers.browser_harness import lab_server, notebook_page
from helpers.browser_harness import wait_idle as idle
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from test_browser_restart import shoot

pytestmark = [pytest.mark.browser, pytest.mark.kernel]

BUDGET_S = 150.0
NOTEBOOK = "keep_demo.ipynb"
# Each setup cell prints the process it ran in and what it built: run again, it would print a new
# process id and new random numbers; restored, the values still hold the old ones.
KEPT = (
    "import os, random\nimport pandas as pd\n"
    "scores = pd.DataFrame({'x': range(5), 'r': [random.random() for _ in range(5)]})\n"
    "scores_pid = os.getpid()\n"
    "print('SCORES', scores_pid, scores.to_json())"
)
REPLAYED = (
    "import os\nfrom fake_cuda_session import make_batch, cross_entropy\n"
    "logits, labels = make_batch()  # labels reach 195\n"
    "batch_pid = os.getpid()\n"
    "print('BATCH', batch_pid)"
)
FAILING = "loss = cross_entropy(logits, labels)  # the training step"
CHECK = "import os\nprint('CHECK', json.dumps([os.getpid(), scores_pid, batch_pid, scores.to_json()]))"
CELLS = ["%load_ext cudaassert", KEPT, REPLAYED, FAILING, "import json\n" + CHECK]


def story() -> nbformat.NotebookNode:
    return new_notebook(
        cells=[new_markdown_cell("# Keep across Restart & replay"), *map(new_code_cell, CELLS)],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}},
    )


@pytest.fixture
def lab(tmp_path):
    """JupyterLab with the story notebook; its kernel pretends a GPU is there (the restart flow's checks)."""
    with lab_server(tmp_path / "home", NOTEBOOK, story(), CUDAASSERT_TEST_PRETEND_GPU="1") as (server, kernel_id):
        yield server, kernel_id


def printed(cell: Any, tag: str) -> str:
    """What follows ``tag`` on the line the cell printed."""
    text = cell.locator(".jp-Cell-outputArea").inner_text()
    return next(line for line in text.splitlines() if line.startswith(tag + " ")).split(" ", 1)[1]


def test_the_keep_toggle_restores_that_cell_after_restart_and_replays_the_untoggled_one(lab, tmp_path):
    from playwright.sync_api import expect

    server, kernel_id = lab
    with notebook_page(server, NOTEBOOK, tmp_path, BUDGET_S, {"width": 1300, "height": 2400}) as (page, left_ms):
        cells = page.locator(".jp-Notebook .jp-Cell")
        kept_cell, replayed_cell, failing, check = (cells.nth(i) for i in (2, 3, 4, 5))
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        panel = failing.locator(".cudaassert-panel")
        expect(panel).to_be_visible(timeout=left_ms())
        expect(panel).to_contain_text("AcceleratorError: CUDA error: device-side assert triggered", timeout=left_ms())
        idle(page, left_ms)
        old_pid, old_scores = printed(kept_cell, "SCORES").split(" ", 1)
        assert printed(replayed_cell, "BATCH") == old_pid

        rows = panel.locator(".widget-hbox").filter(has=page.locator(".widget-checkbox"))
        expect(rows).to_have_count(2)  # the two setup cells, ticked
        keep_scores = rows.filter(has_text="[2] import os, random").locator(".widget-toggle-button")
        keep_batch = rows.filter(has_text="[3] import os").locator(".widget-toggle-button")
        expect(keep_scores).to_have_text("keep")
        expect(keep_scores).not_to_have_class(re.compile(r"\bmod-active\b"))  # no marker in the code: off
        keep_scores.click()
        expect(keep_scores).to_have_class(re.compile(r"\bmod-active\b"))
        expect(keep_batch).not_to_have_class(re.compile(r"\bmod-active\b"))
        shoot(panel, tmp_path, "keep-1-toggle.png")

        button = panel.locator(".cudaassert-action-restart-replay")
        button.click()
        expect(button).to_have_text("Restarting…", timeout=left_ms())
        # the old kernel saved the toggled cell before restarting (its note is the button's tooltip)
        expect(button).to_have_attribute("title", re.compile(r"^  \[2\] kept: `os` .*`pd` .*`scores` ", re.M))
        expect(button).not_to_have_attribute("title", re.compile(r"\[3\] kept"))
        dialog = page.locator(".jp-Dialog-content", has_text="Kernel Restarting")
        expect(dialog).to_be_visible(timeout=left_ms())
        dialog.get_by_role("button", name="Ok").click()
        expect(panel.locator(".jupyter-widgets-disconnected").first).to_be_attached(timeout=left_ms())
        idle(page, left_ms)
        assert kernel_id in [k["id"] for k in server.rest("GET", "api/kernels")]

        check.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
        output = check.locator(".jp-Cell-outputArea")
        expect(output).to_contain_text("CHECK ", timeout=left_ms())
        expect(output.locator(".widget-label", has_text="Setup replayed: 2/2")).to_be_visible(timeout=left_ms())
        expect(output).to_contain_text("[cudaassert] Kept across the restart:")
        expect(output).to_contain_text(re.compile(r"\[2\] kept: `os` [^\n]*`pd` [^\n]*`scores` [^\n]*loaded in"))
        expect(output).not_to_contain_text("[3] kept")
        idle(page, left_ms)
        shoot(output, tmp_path, "keep-2-restored.png")
        new_pid, scores_pid, batch_pid, scores = json.loads(printed(check, "CHECK"))
        assert str(new_pid) != old_pid  # a new process
        assert (str(scores_pid), scores) == (old_pid, old_scores)  # restored: the old process's values, unchanged
        assert batch_pid == new_pid  # the untoggled cell ran again in the new process
        assert "Error displaying widget" not in page.content()
