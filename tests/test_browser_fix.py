"""The patch's buttons in a real browser (issue #26): JupyterLab 4 and Notebook 7, Debian's chromium, Playwright.

The prebuilt frontend extension (cudaassert_ipy/labextension, as the wheel installs it) renders
`%cudaassert fix`'s proposal: the diff, **Apply** and **Apply, Restart & replay**. A click edits the
cell that defined the head in the notebook document itself, through the notebook's own model, so the
notebook's undo (Ctrl+Z in that cell) brings the old code back and redo the new; the kernel restarts,
and the next cell replays the patched setup and reports "fixed". The failure is PyTorch's own CPU twin
(`IndexError: Target 3 is out of bounds.`), which takes the same path as the GPU's.
"""

from __future__ import annotations

import time
import urllib.error

import pytest
from helpers.browser_harness import JUPYTERLAB, NOTEBOOK7, WebApp, lab_server, notebook_page, wait_idle
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

pytestmark = [pytest.mark.browser, pytest.mark.kernel]

BUDGET_S = 180.0
NOTEBOOK = "fix_demo.ipynb"
HEAD = "import torch\nimport torch.nn as nn\n\nhead = nn.Linear(32, 3)  # three classes, or so we thought"
CELLS = [
    "%load_ext cudaassert",
    HEAD,
    "import torch.nn.functional as F\nfrom torch.utils.data import DataLoader, TensorDataset\n\n"
    "train_ds = TensorDataset(torch.randn(40, 32), torch.arange(40) % 4)  # labels 0..3, each in 10 samples\n"
    "train_loader = DataLoader(train_ds, batch_size=8)",
    "for x, y in train_loader:\n    loss = F.cross_entropy(head(x), y)",
    "%cudaassert fix",
]
WIDE = HEAD.replace("nn.Linear(32, 3)", "nn.Linear(32, 4)")
FIXED = "[cudaassert] fixed: cell [4] ran to the end with validators on, and all 40 samples are in range."


def fix_notebook(locked: int | None = None, last: str = CELLS[-1]):
    """``locked``: the index in CELLS of a cell marked read-only (``"editable": false``); ``last``: the cell after
    the failing one."""
    cells = [new_markdown_cell("# A head one class short"), *map(new_code_cell, [*CELLS[:-1], last])]
    if locked is not None:
        cells[1 + locked].metadata["editable"] = False
    return new_notebook(
        cells=cells,
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}},
    )


def wait_saved(server, page, source: str, timeout: float = 20) -> None:
    """The page saves the notebook (Ctrl+S) and the file's head cell holds ``source``: the document itself, not
    only what the editor shows. Ctrl+S again every 5 s until it does: with two browser tests on a loaded machine,
    the press right after an undo once saved nothing (the server logged no save in 20 s; the tab stayed dirty)."""
    deadline = time.monotonic() + timeout
    pressed = 0.0
    saved: object = None
    while True:
        if time.monotonic() - pressed > 5:
            page.keyboard.press("Control+s")
            pressed = time.monotonic()
        try:
            saved = server.rest("GET", f"api/contents/{NOTEBOOK}?content=1")["content"]["cells"][2]["source"]
        except urllib.error.HTTPError as e:  # 500 "Unreadable Notebook": read while the server rewrites it in place
            saved = e
        if saved == source:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the saved notebook's cell holds {saved!r}, not {source!r}")
        time.sleep(0.2)


@pytest.mark.parametrize("app", [JUPYTERLAB, NOTEBOOK7], ids=["jupyterlab4", "notebook7"])
def test_apply_restart_and_replay_edits_the_cell_undo_restores_it_and_the_replay_reports_fixed(app: WebApp, tmp_path):
    from playwright.sync_api import expect

    with (
        lab_server(tmp_path / "home", NOTEBOOK, fix_notebook(), app=app) as (server, kernel_id),
        notebook_page(server, NOTEBOOK, tmp_path, BUDGET_S, {"width": 1300, "height": 2000}, app=app) as (
            page,
            left_ms,
        ),
    ):
        cells = page.locator(".jp-Notebook .jp-Cell")
        defining, failing, fix = cells.nth(2), cells.nth(4), cells.nth(5)
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        expect(failing.locator(".jp-Cell-outputArea")).to_contain_text(
            "IndexError: Target 3 is out of bounds.", timeout=left_ms()
        )
        wait_idle(page, left_ms, app)  # Run All stopped at the failure: `%cudaassert fix` is run on its own
        fix.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
        proposal = fix.locator(".cudaassert-fix")
        expect(proposal).to_contain_text("[1] (default) set out_features=4", timeout=left_ms())
        expect(proposal).to_contain_text("label 3 is in 10 of 40 samples")
        expect(proposal.locator(".cudaassert-fix-add").first).to_have_text(
            "+head = nn.Linear(32, 4)  # three classes, or so we thought"
        )
        wait_idle(page, left_ms, app)

        proposal.locator(".cudaassert-fix-apply-restart").first.click()
        editor = defining.locator(".jp-InputArea-editor")
        # 1. the defining cell is edited in the document
        expect(editor).to_contain_text("head = nn.Linear(32, 4)", timeout=left_ms())
        expect(proposal.locator(".cudaassert-fix-status").first).to_contain_text(
            "Applied: cell [2] edited (Undo reverts it); the kernel restarts"
        )
        dialog = page.locator(".jp-Dialog-content", has_text="Kernel Restarting")
        expect(dialog).to_be_visible(timeout=left_ms())
        dialog.get_by_role("button", name="Ok").click()
        wait_idle(page, left_ms, app)
        assert kernel_id in [k["id"] for k in server.rest("GET", "api/kernels")]
        wait_saved(server, page, WIDE)

        # 2. the notebook's own undo restores the old code (and redo the new)
        editor.locator(".cm-content").click()
        page.keyboard.press("Control+z")
        expect(editor).to_contain_text("head = nn.Linear(32, 3)", timeout=left_ms())
        wait_saved(server, page, HEAD)
        page.keyboard.press("Control+Shift+z")
        expect(editor).to_contain_text("head = nn.Linear(32, 4)", timeout=left_ms())

        # 3. the next cell replays the patched setup and verifies
        failing.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
        output = failing.locator(".jp-Cell-outputArea")
        expect(output).to_contain_text("This kernel was restarted by cudaassert", timeout=left_ms())
        expect(output).to_contain_text("Setup replayed: 2/2", timeout=left_ms())
        expect(output).to_contain_text(FIXED, timeout=left_ms())
        expect(output).not_to_contain_text("the notebook still holds the old code")
        wait_idle(page, left_ms, app)
        assert "Error displaying" not in page.content()


def test_apply_refuses_a_cell_edited_since_and_a_read_only_one_and_applies_as_an_undoable_edit(tmp_path):
    from playwright.sync_api import expect

    with (
        lab_server(tmp_path / "home", NOTEBOOK, fix_notebook(locked=2)) as (server, _),
        notebook_page(server, NOTEBOOK, tmp_path, BUDGET_S, {"width": 1300, "height": 2000}) as (page, left_ms),
    ):
        cells = page.locator(".jp-Notebook .jp-Cell")
        defining, failing, fix = cells.nth(2), cells.nth(4), cells.nth(5)
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        expect(failing.locator(".jp-Cell-outputArea")).to_contain_text("Target 3 is out of bounds.", timeout=left_ms())
        wait_idle(page, left_ms)
        fix.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
        alternatives = fix.locator(".cudaassert-fix-alternative")
        widen, drop = alternatives.nth(0), alternatives.nth(1)
        expect(drop).to_contain_text("drop the 10 bad row(s) of `train_ds`", timeout=left_ms())
        wait_idle(page, left_ms)

        # the user edited the cell after the proposal: nothing is applied, here or in the kernel
        editor = defining.locator(".jp-InputArea-editor")
        editor.locator(".cm-content").click()
        page.keyboard.press("Control+End")
        page.keyboard.type("  # tuned")
        widen.locator(".cudaassert-fix-apply").click()
        expect(widen.locator(".cudaassert-fix-status")).to_have_text(
            "Cell [2] was edited since the patch was proposed: nothing was applied; run `%cudaassert fix` again."
        )
        expect(editor).to_contain_text("head = nn.Linear(32, 3)  # three classes, or so we thought  # tuned")

        # a cell marked read-only is not edited either
        drop.locator(".cudaassert-fix-apply").click()
        expect(drop.locator(".cudaassert-fix-status")).to_have_text(
            'Cell [3] is read-only (its "editable" metadata is false): nothing was applied.'
        )

        # back to the proposed code, Apply edits the cell as one undoable step, and the kernel is not restarted
        editor.locator(".cm-content").click()
        page.keyboard.press("Control+z")
        expect(editor).not_to_contain_text("# tuned")
        widen.locator(".cudaassert-fix-apply").click()
        expect(widen.locator(".cudaassert-fix-status")).to_have_text(
            "Applied: cell [2] edited (Undo reverts it); the kernel replays the patched code after a restart.",
            timeout=left_ms(),
        )
        expect(editor).to_contain_text("head = nn.Linear(32, 4)")
        wait_saved(server, page, WIDE)
        editor.locator(".cm-content").click()
        page.keyboard.press("Control+z")
        expect(editor).to_contain_text("head = nn.Linear(32, 3)")
        wait_saved(server, page, HEAD)
        expect(page.locator(".jp-Dialog-content")).to_have_count(0)  # no restart


def test_a_typed_fix_apply_edits_the_notebooks_cell_on_one_click(tmp_path):
    from playwright.sync_api import expect

    with (
        lab_server(tmp_path / "home", NOTEBOOK, fix_notebook(last="%cudaassert fix apply")) as (server, _),
        notebook_page(server, NOTEBOOK, tmp_path, BUDGET_S, {"width": 1300, "height": 2000}) as (page, left_ms),
    ):
        cells = page.locator(".jp-Notebook .jp-Cell")
        defining, failing, typed = cells.nth(2), cells.nth(4), cells.nth(5)
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        expect(failing.locator(".jp-Cell-outputArea")).to_contain_text("Target 3 is out of bounds.", timeout=left_ms())
        wait_idle(page, left_ms)
        typed.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
        expect(typed.locator(".jp-Cell-outputArea")).to_contain_text(
            "Patched cell [2] in this kernel's history", timeout=left_ms()
        )
        applied = typed.locator(".cudaassert-fix")
        expect(applied.locator(".cudaassert-fix-add")).to_have_text(
            "+head = nn.Linear(32, 4)  # three classes, or so we thought"
        )
        editor = defining.locator(".jp-InputArea-editor")
        expect(editor).to_contain_text("head = nn.Linear(32, 3)")  # nothing happens without a click
        applied.get_by_role("button", name="Edit cell [2] in the notebook").click()
        expect(applied.locator(".cudaassert-fix-status")).to_have_text("Edited cell [2] (Undo reverts it).")
        expect(editor).to_contain_text("head = nn.Linear(32, 4)")
        wait_saved(server, page, WIDE)
        editor.locator(".cm-content").click()
        page.keyboard.press("Control+z")
        expect(editor).to_contain_text("head = nn.Linear(32, 3)")
        wait_saved(server, page, HEAD)


@pytest.mark.frameworks
def test_a_file_patchs_apply_writes_the_data_yaml_on_disk_names_it_and_edits_no_cell(tmp_path):
    """Ultralytics (the frameworks environment): the class count is the data YAML's ``nc:``, so the patch is a file
    patch; Apply asks the kernel, which writes the file, and the status says so; no cell of the notebook changes."""
    from playwright.sync_api import expect
    from test_frameworks_ultralytics_labels import SETUP

    root = tmp_path / "pets"
    data_yaml = root / "data.yaml"
    setup = SETUP.format(root=str(root)) + "model.args.data = str(root / 'data.yaml')\n"
    cells = [
        "%load_ext cudaassert",
        setup,
        "loss, items = model(batch)  # as BaseTrainer._do_train does",
        "%cudaassert fix",
    ]
    notebook = new_notebook(cells=list(map(new_code_cell, cells)), metadata=fix_notebook().metadata)
    with (
        lab_server(
            tmp_path / "home", NOTEBOOK, notebook, YOLO_OFFLINE="1", YOLO_CONFIG_DIR=str(tmp_path / "yolo-config")
        ) as (server, _),
        notebook_page(server, NOTEBOOK, tmp_path, BUDGET_S, {"width": 1300, "height": 2000}) as (page, left_ms),
    ):
        nb_cells = page.locator(".jp-Notebook .jp-Cell")
        failing, fix = nb_cells.nth(2), nb_cells.nth(3)
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        expect(failing.locator(".jp-Cell-outputArea")).to_contain_text("index 2 is out of bounds", timeout=left_ms())
        wait_idle(page, left_ms)
        fix.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
        widen = fix.locator(".cudaassert-fix-alternative", has_text=f"set nc: 3 in the data YAML {data_yaml}")
        expect(widen.locator(".cudaassert-fix-add").first).to_have_text("+nc: 3", timeout=left_ms())
        wait_idle(page, left_ms)
        before = data_yaml.read_text()
        widen.locator(".cudaassert-fix-apply").click()
        expect(widen.locator(".cudaassert-fix-status")).to_have_text(
            f"Patched {data_yaml} on disk (no cell of this notebook changes): run the training again to check.",
            timeout=left_ms(),
        )
        assert data_yaml.read_text() == before.replace("nc: 2\nnames: [cat, dog]", "nc: 3\nnames: [cat, dog, class_2]")
        page.keyboard.press("Control+s")
        deadline = time.monotonic() + 20
        while True:  # the saved document, once it holds the proposal's output (saved after the click)
            try:
                saved = server.rest("GET", f"api/contents/{NOTEBOOK}?content=1")["content"]["cells"]
            except urllib.error.HTTPError:  # read while the server rewrites it in place
                saved = None
            if saved is not None and saved[3]["outputs"]:
                break
            assert time.monotonic() < deadline, "the notebook was not saved"
            time.sleep(0.2)
        assert [c["source"] for c in saved[:4]] == cells  # no cell changed (Shift+Enter added an empty one)
