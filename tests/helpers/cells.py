"""Run a cell in the in-process shell and diagnose its error as the extension would (the framework tests)."""

from __future__ import annotations

from typing import Any

from cudaassert_ipy.diagnose.diagnosis import Diagnosis
from cudaassert_ipy.diagnose.pipeline import diagnose_failure, read_failure

__all__ = ["diagnose_cell"]


def diagnose_cell(shell: Any, code: str, capfd: Any) -> tuple[BaseException, Diagnosis]:
    """A cell's error and its fd 2 text (the kernel's assertion lines) through the extension's pipeline."""
    capfd.readouterr()
    result = shell.run_cell(code, store_history=True)
    error = result.error_in_exec
    assert error is not None
    text = capfd.readouterr().err
    detection, sites = read_failure(error, text)
    assert detection is not None
    return error, diagnose_failure(detection, sites, text, code, 3, shell.user_ns)[1]
