"""Shared test helpers: where the repository is, and the environment a real kernel gets.

Import the rest by module: ``helpers.kernels`` (real kernels through jupyter_client),
``helpers.server_harness`` (a real Jupyter server and a websocket frontend),
``helpers.browser_harness`` (JupyterLab 4 and Notebook 7 in headless Chromium),
``helpers.cells`` (a cell diagnosed as the extension would, for the framework tests),
``helpers.plans`` and ``helpers.restart_story`` (resume plans on disk, the restart simulated in
process), ``helpers.validator_outcomes`` and ``helpers.index_cases`` (the validators' property
tests). Fixtures live in ``conftest.py``.

The GPU test double (``gpu_double``, ``fake_cuda_session``) and the log samples stay beside the
tests: kernels, notebooks and scripts under test import them by those names.
"""

from __future__ import annotations

import os
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent


def kernel_env(**extra: str) -> dict[str, str]:
    """Environment for a real kernel: our tests importable, and ipykernel's fd capture left on."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(extra)
    return env
