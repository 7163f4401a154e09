"""The panel in a real browser: JupyterLab 4 on 127.0.0.1, driven by Playwright in Debian's chromium.

Runs the failing story, finds the rendered panel, opens "Details", and saves docs/img/panel.png.
"""

from __future__ import annotations

import contextlib
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from helpers.browser_harness import lab_server, notebook_page
from helpers.server_harness import ROOT
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

pytestmark = [pytest.mark.browser, pytest.mark.kernel]

SCREENSHOT = ROOT / "docs" / "img" / "panel.png"
BUDGET_S = 90.0
NOTEBOOK = "panel_demo.ipynb"

SETUP = """import torch, torch.nn as nn
from gpu_double import fail_like_gpu  # stands in for the GPU: real assertion lines, the exact exception

class Birds:  # a 196-class dataset
    classes = [f"species_{i}" for i in range(196)]

train_ds = Birds()
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 195))  # one class short
labels = torch.tensor([3, 195, 7, 195])"""
TRAIN = "logits = model(torch.randn(4, 8))\nloss = fail_like_gpu()  # F.cross_entropy(logits, labels) on a GPU"


def story_notebook() -> nbformat.NotebookNode:
    """The user's story: load the extension, set up, then a training cell that kills the GPU context."""
    return new_notebook(
        cells=[
            new_markdown_cell("# cudaassert panel demo"),
            new_code_cell("%load_ext cudaassert"),
            new_code_cell(SETUP),
            new_code_cell(TRAIN, metadata={"tags": ["raises-exception"]}),
        ],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}},
    )


@pytest.fixture
def lab(request, tmp_path):
    """JupyterLab (light theme unless parametrized) with the story notebook and its kernel running."""
    with lab_server(
        tmp_path / "home", NOTEBOOK, story_notebook(), theme=getattr(request, "param", "JupyterLab Light")
    ) as (server, _):
        yield server


def test_the_panel_renders_in_jupyterlab_and_details_reveal_the_raw_text(lab, tmp_path):
    from playwright.sync_api import expect

    with _notebook_page(lab, tmp_path) as (page, left_ms):
        panel = page.locator(".cudaassert-panel")
        # the headline is its own output just above the widget (readable even without the widget)
        area = page.locator(".jp-Cell-outputArea").filter(has=panel)
        expect(area.locator(".ca-head")).to_have_text(
            "GPU context dead · class label out of range in cross_entropy", timeout=left_ms()
        )
        expect(area).to_contain_text("The GPU context of this kernel is dead.")
        expect(area).to_contain_text("set out_features=196.")
        expect(panel.get_by_role("button", name="Copy report")).to_be_enabled()
        details = panel.locator(".cudaassert-details")
        expect(details).to_be_hidden()

        panel.get_by_role("button", name="Details").click()
        expect(details).to_be_visible(timeout=left_ms())
        expect(details.locator(".ca-raw")).to_contain_text("CUDA error: device-side assert triggered")
        expect(details.locator(".ca-raw")).to_contain_text(
            "block: [0,0,0], thread: [0,0,0] Assertion `t >= 0 && t < n_classes` failed."
        )
        assert "Error displaying widget" not in page.content()

        panel.scroll_into_view_if_needed()
        shot = tmp_path / "panel.png"
        _screenshot_outputs(page, area, shot)
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, SCREENSHOT)
        assert SCREENSHOT.stat().st_size > 10_000

        panel.get_by_role("button", name="Copy report").click()
        expect(panel.locator(".cudaassert-copy textarea")).to_have_value(
            re.compile(r"^\*\*The GPU context of this kernel is dead\..*### GPU context dead", re.S)
        )
        expect(panel.get_by_role("button", name="Hide report")).to_be_visible()


@pytest.mark.parametrize("lab", ["JupyterLab Dark"], indirect=True)
def test_the_panel_is_readable_in_the_dark_theme(lab, tmp_path):
    with _notebook_page(lab, tmp_path) as (page, _):
        assert page.locator("body").get_attribute("data-jp-theme-name") == "JupyterLab Dark"
        panel = page.locator(".cudaassert-panel")
        area = page.locator(".jp-Cell-outputArea").filter(has=panel)
        panel.get_by_role("button", name="Details").click()
        head = area.locator(".jp-OutputArea-child").filter(has=page.locator(".ca-head")).last
        contrasts = {
            **panel.evaluate(CONTRAST_JS, [k for k in READABLE if k != ".ca-head"]),
            **head.evaluate(CONTRAST_JS, [".ca-head"]),
        }
        _screenshot_outputs(page, area, tmp_path / "panel-dark.png")
    assert set(contrasts) == set(READABLE), contrasts
    for selector, ratio in contrasts.items():
        assert ratio >= READABLE[selector], (selector, ratio)


def _screenshot_outputs(page: Any, area: Any, path: Path) -> None:
    """The headline output and the panel below it (the traceback above them is left out)."""
    head = area.locator(".jp-OutputArea-child").filter(has=page.locator(".ca-head")).last
    top, bottom = head.bounding_box(), area.bounding_box()
    clip = {
        "x": bottom["x"],
        "y": top["y"],
        "width": bottom["width"],
        "height": bottom["y"] + bottom["height"] - top["y"],
    }
    page.screenshot(path=str(path), clip=clip, full_page=True, animations="disabled")


# WCAG contrast of each part's text against what is behind it (alpha blended), in the rendered page.
READABLE = {
    ".ca-text p": 4.5,
    ".ca-muted": 4.5,
    "pre": 4.5,
    "code": 4.5,
    ".ca-head": 3.0,
    ".ca-label": 3.0,
    ".widget-checkbox": 4.5,
}
CONTRAST_JS = """(panel, selectors) => {
  const rgba = c => { const v = c.match(/[\\d.]+/g).map(Number); return [v[0], v[1], v[2], v.length > 3 ? v[3] : 1]; };
  const background = el => {
    for (; el; el = el.parentElement) { const c = rgba(getComputedStyle(el).backgroundColor); if (c[3] > 0) return c; }
    return [255, 255, 255, 1];
  };
  const lum = c => 0.2126 * ch(c[0]) + 0.7152 * ch(c[1]) + 0.0722 * ch(c[2]);
  const ch = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
  const out = {};
  for (const sel of selectors) {
    const el = panel.querySelector(sel); if (!el) continue;
    const bg = background(el), fg = rgba(getComputedStyle(el).color);
    const mix = [0, 1, 2].map(i => fg[i] * fg[3] + bg[i] * (1 - fg[3]));
    const [hi, lo] = [lum(mix), lum(bg)].sort((a, b) => b - a);
    out[sel] = (hi + 0.05) / (lo + 0.05);
  }
  return out;
}"""


@contextlib.contextmanager
def _notebook_page(server: Any, tmp_path: Path) -> Iterator[tuple[Any, Callable[[], float]]]:
    """Chromium on the story notebook, all cells run, the panel rendered."""
    from playwright.sync_api import expect

    with notebook_page(server, NOTEBOOK, tmp_path, BUDGET_S, {"width": 1400, "height": 1400}) as (page, left_ms):
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        expect(page.locator(".cudaassert-panel")).to_be_visible(timeout=left_ms())
        yield page, left_ms
