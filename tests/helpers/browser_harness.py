"""JupyterLab 4 or Notebook 7 on 127.0.0.1 and Debian's chromium driven by Playwright, for the browser tests.

``lab_server`` starts the app (JupyterLab unless ``app=NOTEBOOK7``; through
``helpers.server_harness.jupyter_server``: own HOME, token, always killed) with one notebook and its
kernel already running, so the page attaches to that kernel (no kernel dialog, no race).
``notebook_page`` opens it and waits until the kernel is idle; a failure leaves ``failure.png`` in
pytest's tmp dir. ``restart_notebook`` is the restart story both apps are clicked through.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from helpers.server_harness import ROOT, Server, jupyter_server

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
THEMES = "@jupyterlab/apputils-extension/themes"
#: no news prompt, no update check, no notification toasts over the outputs
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification": {
        "fetchNews": "false",
        "checkForUpdates": False,
        "doNotDisturbMode": True,
    }
}
LAB_ARGS = ("--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate")
#: the prebuilt frontend extension of this checkout (scripts/build-frontend.sh), what the wheel installs
LABEXTENSION = ROOT / "cudaassert_ipy" / "labextension"


@dataclass(frozen=True)
class WebApp:
    """A notebook frontend a Jupyter server serves: its module, where a notebook opens, and what on the page
    says that notebook's kernel is connected and idle (a Playwright selector)."""

    module: str
    notebooks: str
    idle: str


JUPYTERLAB = WebApp("jupyterlab", "lab/tree/", '.jp-StatusBar-Widget:has-text("Python 3 (ipykernel) | Idle")')
#: Notebook 7 has no status bar: its toolbar names the kernel and shows an execution indicator
NOTEBOOK7 = WebApp(
    "notebook",
    "notebooks/",
    '.jp-NotebookPanel-toolbar:has(.jp-KernelName:has-text("Python 3 '
    '(ipykernel)")) .jp-Notebook-ExecutionIndicator[data-status="idle"]',
)

RESTART_CELLS = [
    "%load_ext cudaassert",
    "import os\nBLOCKING_AT_IMPORT = os.environ.get('CUDA_LAUNCH_BLOCKING')\nimport torch",
    "# Stands in for the GPU: on the CPU it runs F.cross_entropy for real; without validators a bad label\n"
    "# fails as a GPU does (real assertion lines, the exact AcceleratorError).\n"
    "from fake_cuda_session import make_batch, cross_entropy\nlogits, labels = make_batch()  # labels reach 195",
    "import time\ntime.sleep(0.5)  # a slow data-loading step\nprint('setup done')",
    "loss = cross_entropy(logits, labels)  # the training step",
]


def restart_notebook() -> nbformat.NotebookNode:
    """Three setup cells, then a training step that fails as a GPU does (the server must pretend a GPU)."""
    return new_notebook(
        cells=[new_markdown_cell("# Restart & replay demo"), *map(new_code_cell, RESTART_CELLS)],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}},
    )


@contextlib.contextmanager
def lab_server(
    home: Path,
    name: str,
    notebook: nbformat.NotebookNode,
    theme: str = "JupyterLab Light",
    app: WebApp = JUPYTERLAB,
    **env: str,
) -> Iterator[tuple[Server, str]]:
    """JupyterLab (or ``app``) serving ``notebook`` as ``name``; yields (server, id of the notebook's kernel).

    Notebook 7 reads the same settings directory and takes the same LabApp options."""
    for plugin, settings in {**LAB_SETTINGS, THEMES: {"theme": theme}}.items():
        path = home / "lab-settings" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings))
    (home / "root").mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, home / "root" / name)
    # the server's own JUPYTER_DATA_DIR (server_harness.isolated_env) finds this checkout's build first, whatever
    # the environment has installed, as `pip install` puts it under share/jupyter/labextensions/
    assert (LABEXTENSION / "package.json").is_file(), "no prebuilt labextension: run scripts/build-frontend.sh"
    link = home / "data" / "labextensions" / "cudaassert-ipy"
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.exists():
        link.symlink_to(LABEXTENSION, target_is_directory=True)
    with jupyter_server(
        home,
        app=app.module,
        args=LAB_ARGS,
        JUPYTERLAB_SETTINGS_DIR=str(home / "lab-settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(home / "lab-workspaces"),
        **env,
    ) as server:
        session = server.rest(
            "POST",
            "api/sessions",
            {"path": name, "type": "notebook", "name": name, "kernel": {"name": "python3"}},
            timeout=30,
        )
        yield server, session["kernel"]["id"]


@contextlib.contextmanager
def notebook_page(
    server: Server, name: str, tmp_path: Path, budget_s: float, viewport: dict[str, int], app: WebApp = JUPYTERLAB
) -> Iterator[tuple[Any, Callable[[], float]]]:
    """Chromium on the notebook, its kernel idle; yields (page, milliseconds left of ``budget_s``)."""
    from playwright.sync_api import expect, sync_playwright

    assert shutil.which(CHROMIUM), "Debian's chromium is missing: apt-get install -y chromium (.ci/run does)"
    deadline = time.monotonic() + budget_s

    def left_ms() -> float:
        return max(1000.0, (deadline - time.monotonic()) * 1000)

    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport=viewport,
        )
        page = context.pages[0] if context.pages else context.new_page()
        try:
            page.goto(f"{server.url}{app.notebooks}{name}?token={server.token}", timeout=left_ms())
            expect(page.locator(".jp-Notebook .jp-Cell").first).to_be_visible(timeout=left_ms())
            # the page attaches to the session's kernel a moment after it shows: running earlier asks for a kernel
            wait_idle(page, left_ms, app)
            yield page, left_ms
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)  # kept in pytest's tmp dir
            raise
        finally:
            context.close()


def wait_idle(page: Any, left_ms: Callable[[], float], app: WebApp = JUPYTERLAB) -> None:
    from playwright.sync_api import expect

    expect(page.locator(app.idle).first).to_be_visible(timeout=left_ms())
