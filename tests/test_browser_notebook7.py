"""The same click in Notebook 7: the README says it works as in JupyterLab 4, and this test holds it to that.

Notebook 7 (``python -m notebook``, Lab's components in a single-document page, no status bar)
on 127.0.0.1 in Debian's chromium driven by Playwright: Run All fails on the GPU test double and
shows the panel; "Restart & replay setup" turns into "Restarting…", Notebook 7 shows the same
"Kernel Restarting" dialog, the kernel comes back with the same id; running the failing cell
again replays the setup inside it and the validator stops the bad label with the GPU alive.
"""

from __future__ import annotations

import pytest
from helpers.browser_harness import NOTEBOOK7, RESTART_CELLS, lab_server, notebook_page, restart_notebook, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.kernel]

BUDGET_S = 150.0
NOTEBOOK = "restart_demo.ipynb"


@pytest.fixture
def notebook7(tmp_path):
    """Notebook 7 with the restart story; its kernel pretends a GPU is there (the restart flow's checks)."""
    with lab_server(
        tmp_path / "home", NOTEBOOK, restart_notebook(), app=NOTEBOOK7, CUDAASSERT_TEST_PRETEND_GPU="1"
    ) as (server, kernel_id):
        yield server, kernel_id


def test_in_notebook_7_one_click_restarts_and_the_next_run_replays_the_setup_and_names_the_bad_label(
    notebook7, tmp_path
):
    from playwright.sync_api import expect

    server, kernel_id = notebook7
    with notebook_page(server, NOTEBOOK, tmp_path, BUDGET_S, {"width": 1300, "height": 2400}, app=NOTEBOOK7) as (
        page,
        left_ms,
    ):
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        failing = page.locator(".jp-Notebook .jp-Cell").nth(len(RESTART_CELLS))
        panel = failing.locator(".cudaassert-panel")
        expect(panel).to_be_visible(timeout=left_ms())
        expect(panel).to_contain_text("AcceleratorError: CUDA error: device-side assert triggered", timeout=left_ms())
        expect(panel.locator(".widget-checkbox")).to_have_count(3)  # the setup cells, ticked
        wait_idle(page, left_ms, NOTEBOOK7)

        button = panel.locator(".cudaassert-action-restart-replay")
        button.click()
        expect(button).to_have_text("Restarting…", timeout=left_ms())
        expect(button).to_be_disabled()
        dialog = page.locator(".jp-Dialog-content", has_text="Kernel Restarting")
        expect(dialog).to_be_visible(timeout=left_ms())
        expect(dialog).to_contain_text("appears to have died. It will restart automatically.")
        dialog.get_by_role("button", name="Ok").click()
        expect(panel.locator(".jupyter-widgets-disconnected").first).to_be_attached(timeout=left_ms())
        wait_idle(page, left_ms, NOTEBOOK7)
        assert kernel_id in [k["id"] for k in server.rest("GET", "api/kernels")]

        failing.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
        output = failing.locator(".jp-Cell-outputArea")
        expect(output).to_contain_text(
            "This kernel was restarted by cudaassert after cell [5] failed", timeout=left_ms()
        )
        expect(output.locator(".widget-label", has_text="Setup replayed: 3/3")).to_be_visible(timeout=left_ms())
        expect(output).to_contain_text("setup done")  # the replayed cells' own output, in this cell
        traceback = output.locator('[data-mime-type="application/vnd.jupyter.stderr"]', has_text="Traceback")
        expect(traceback.first).to_contain_text("ValidationIndexError", timeout=left_ms())
        new_panel = output.locator(".cudaassert-panel")
        expect(new_panel).to_contain_text("target has 1 bad value; valid: 0..194", timeout=left_ms())
        expect(output).to_contain_text("On in this kernel:")
        expect(new_panel.locator(".cudaassert-action-restart-normal")).to_have_text("Back to normal speed")
        wait_idle(page, left_ms, NOTEBOOK7)
        assert "Error displaying widget" not in page.content()
