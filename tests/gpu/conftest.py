"""The GPU suite: real device-side asserts on a real CUDA device (``bash scripts/gpu-tests.sh``).

``CUDAASSERT_GPU_TEST_DEVICE`` picks the device: ``cuda`` (the default) or ``cpu``, the dry run of CI's stage
``gpu-dry``, where the same cases run with the CPU twins (the readable errors PyTorch raises on the CPU for the same
bad inputs) and a test that only a GPU can answer says so. On ``cuda``, every test is skipped when, and only when,
PyTorch sees no CUDA device; the reason is always "no CUDA device". Nothing in this directory uses the test double.

``CUDAASSERT_GPU_SUMMARY=PATH`` writes each test's outcome, seconds and what it recorded (the diagnosed cause,
whether it is the expected one) to PATH as JSON after every test, so that a run cut short still leaves its summary.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers.gpu_device import ON_GPU

NO_CUDA = "no CUDA device"
SUMMARY_VAR = "CUDAASSERT_GPU_SUMMARY"


@pytest.fixture(autouse=True)
def _needs_a_cuda_device() -> None:
    if ON_GPU and not torch.cuda.is_available():
        pytest.skip(NO_CUDA)


class _Summary:
    """Collects the reports (on the xdist controller, from every worker) and rewrites the JSON after each."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.cases: dict[str, dict[str, Any]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        case = self.cases.setdefault(
            report.nodeid,
            {
                "case": report.nodeid.split("::", 1)[-1],
                "outcome": "passed",
                "seconds": 0.0,
                "file": report.nodeid.split("::", 1)[0],
            },
        )
        case["seconds"] = round(case["seconds"] + report.duration, 2)
        if report.failed:
            case["outcome"] = "failed" if report.when == "call" else "error"
            case["message"] = report.longreprtext.strip().splitlines()[-1][:500] if report.longreprtext else ""
        elif report.skipped and case["outcome"] == "passed":
            case["outcome"] = "skipped"
            longrepr = report.longrepr
            case["message"] = str(longrepr[2] if isinstance(longrepr, tuple) else longrepr)[:500]
        for key, value in report.user_properties:
            case[key] = value
        self.path.write_text(json.dumps(list(self.cases.values()), indent=1), encoding="utf-8")


def pytest_configure(config: pytest.Config) -> None:
    path = os.environ.get(SUMMARY_VAR)
    if path and not os.environ.get("PYTEST_XDIST_WORKER"):
        config.pluginmanager.register(_Summary(Path(path)), "cudaassert-gpu-summary")
