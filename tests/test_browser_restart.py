"""One click in a real browser: JupyterLab 4 on 127.0.0.1, Debian's chromium driven by Playwright.

Run All fails on the GPU test double and shows the panel; "Restart & replay setup" turns into
"Restarting…", Lab shows its "Kernel Restarting" dialog, the kernel comes back with the same id;
running the failing cell again replays the setup inside it (progress bar, collapsed outputs) and
the validator stops the bad label with the GPU alive. Screenshots go to docs/img/restart-*.png.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers.browser_harness import RESTART_CELLS, lab_server, notebook_page, restart_notebook
from helpers.browser_harness import wait_idle as idle
from helpers.server_harness import ROOT

pytestmark = [pytest.mark.browser, pytest.mark.kernel]

IMG = ROOT / "docs" / "img"
BUDGET_S = 150.0
NOTEBOOK = "restart_demo.ipynb"


@pytest.fixture
def lab(tmp_path):
    """JupyterLab with the story notebook; its kernel pretends a GPU is there (the restart flow's checks)."""
    with lab_server(tmp_path / "home", NOTEBOOK, restart_notebook(), CUDAASSERT_TEST_PRETEND_GPU="1") as (
        server,
        kernel_id,
    ):
        yield server, kernel_id


def shoot(locator: Any, tmp_path: Path, name: str, first: Any = None) -> None:
    """A screenshot of ``locator`` (from the top of ``first`` when given) into docs/img."""
    shot = tmp_path / name
    if first is None:
        locator.scroll_into_view_if_needed()
        locator.screenshot(path=str(shot), animations="disabled")
    else:
        first.scroll_into_view_if_needed()
        top, box = first.bounding_box(), locator.bounding_box()
        clip = {"x": box["x"], "y": top["y"], "width": box["width"], "height": box["y"] + box["height"] - top["y"]}
        locator.page.screenshot(path=str(shot), clip=clip, animations="disabled")
    IMG.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, IMG / name)
    assert (IMG / name).stat().st_size > 5_000


def test_one_click_restarts_replays_the_setup_and_the_validator_names_the_bad_label(lab, tmp_path):
    from playwright.sync_api import expect

    server, kernel_id = lab
    with notebook_page(server, NOTEBOOK, tmp_path, BUDGET_S, {"width": 1300, "height": 2400}) as (page, left_ms):
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        failing = page.locator(".jp-Notebook .jp-Cell").nth(len(RESTART_CELLS))
        panel = failing.locator(".cudaassert-panel")
        expect(panel).to_be_visible(timeout=left_ms())
        expect(panel).to_contain_text("AcceleratorError: CUDA error: device-side assert triggered", timeout=left_ms())
        expect(panel.locator(".widget-checkbox")).to_have_count(3)  # the setup cells, ticked
        idle(page, left_ms)
        outputs = failing.locator(".jp-OutputArea-child")
        shoot(panel, tmp_path, "restart-1-panel.png", first=outputs.nth(outputs.count() - 2))  # headline + panel

        button = panel.locator(".cudaassert-action-restart-replay")
        button.click()
        expect(button).to_have_text("Restarting…", timeout=left_ms())
        expect(button).to_be_disabled()
        dialog = page.locator(".jp-Dialog-content", has_text="Kernel Restarting")
        expect(dialog).to_be_visible(timeout=left_ms())
        expect(dialog).to_contain_text("appears to have died. It will restart automatically.")
        shoot(dialog, tmp_path, "restart-2-dialog.png")
        dialog.get_by_role("button", name="Ok").click()
        expect(panel.locator(".jupyter-widgets-disconnected").first).to_be_attached(timeout=left_ms())
        idle(page, left_ms)
        assert kernel_id in [k["id"] for k in server.rest("GET", "api/kernels")]

        failing.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
        output = failing.locator(".jp-Cell-outputArea")
        expect(output).to_contain_text(
            "This kernel was restarted by cudaassert after cell [5] failed", timeout=left_ms()
        )
        expect(output.locator(".widget-label", has_text="Setup replayed: 3/3")).to_be_visible(timeout=left_ms())
        traceback = output.locator('[data-mime-type="application/vnd.jupyter.stderr"]', has_text="Traceback")
        expect(traceback.first).to_contain_text("ValidationIndexError", timeout=left_ms())
        new_panel = output.locator(".cudaassert-panel")
        expect(new_panel).to_contain_text("target has 1 bad value; valid: 0..194", timeout=left_ms())
        expect(output).to_contain_text("On in this kernel:")
        expect(output).to_contain_text("%cudaassert restart --normal")
        expect(new_panel.locator(".cudaassert-action-restart-normal")).to_have_text("Back to normal speed")
        idle(page, left_ms)
        shoot(output, tmp_path, "restart-3-replayed.png")
        assert "Error displaying widget" not in page.content()
