"""JupyterLab 4 on 127.0.0.1 and Debian's chromium driven by Playwright, for the browser tests.

``lab_server`` starts Lab (through ``helpers.server_harness.jupyter_server``: own HOME, token, always
killed) with one notebook and its kernel already running, so the page attaches to that kernel
(no kernel dialog, no race). ``notebook_page`` opens it and waits until the kernel is idle; a
failure leaves ``failure.png`` in pytest's tmp dir.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import nbformat

from helpers.server_harness import Server, jupyter_server

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
THEMES = "@jupyterlab/apputils-extension/themes"
#: no news prompt, no update check, no notification toasts over the outputs
LAB_SETTINGS = {"@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False,
                                                                "doNotDisturbMode": True}}
LAB_ARGS = ("--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate")


@contextlib.contextmanager
def lab_server(home: Path, name: str, notebook: nbformat.NotebookNode, theme: str = "JupyterLab Light",
               **env: str) -> Iterator[tuple[Server, str]]:
    """JupyterLab serving ``notebook`` as ``name``; yields (server, id of the notebook's kernel)."""
    for plugin, settings in {**LAB_SETTINGS, THEMES: {"theme": theme}}.items():
        path = home / "lab-settings" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings))
    (home / "root").mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, home / "root" / name)
    with jupyter_server(home, app="jupyterlab", args=LAB_ARGS, JUPYTERLAB_SETTINGS_DIR=str(home / "lab-settings"),
                        JUPYTERLAB_WORKSPACES_DIR=str(home / "lab-workspaces"), **env) as server:
        session = server.rest("POST", "api/sessions", {"path": name, "type": "notebook", "name": name,
                                                       "kernel": {"name": "python3"}}, timeout=30)
        yield server, session["kernel"]["id"]


@contextlib.contextmanager
def notebook_page(server: Server, name: str, tmp_path: Path, budget_s: float,
                  viewport: dict[str, int]) -> Iterator[tuple[Any, Callable[[], float]]]:
    """Chromium on the notebook, its kernel idle; yields (page, milliseconds left of ``budget_s``)."""
    from playwright.sync_api import expect, sync_playwright

    assert shutil.which(CHROMIUM), "Debian's chromium is missing: apt-get install -y chromium (.ci/run does)"
    deadline = time.monotonic() + budget_s

    def left_ms() -> float:
        return max(1000.0, (deadline - time.monotonic()) * 1000)

    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport=viewport)
        page = context.pages[0] if context.pages else context.new_page()
        try:
            page.goto(f"{server.url}lab/tree/{name}?token={server.token}", timeout=left_ms())
            expect(page.locator(".jp-Notebook .jp-Cell").first).to_be_visible(timeout=left_ms())
            # Lab attaches to the session's kernel a moment after the page shows: running earlier asks for a kernel
            wait_idle(page, left_ms)
            yield page, left_ms
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)  # kept in pytest's tmp dir
            raise
        finally:
            context.close()


def wait_idle(page: Any, left_ms: Callable[[], float]) -> None:
    from playwright.sync_api import expect

    expect(page.locator(".jp-StatusBar-Widget", has_text="Python 3 (ipykernel) | Idle").first).to_be_visible(
        timeout=left_ms())
