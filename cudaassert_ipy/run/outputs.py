"""Where a run's diagnosis goes besides stderr: ``--report-json`` and torchelastic's error file.

torchrun's agent reads each failed worker's ``TORCHELASTIC_ERROR_FILE`` for its "Root Cause (first
observed failure)" summary, and shows ``extraInfo.py_callstack`` there. We write the exact structure
``torch.distributed.elastic.multiprocessing.errors.error_handler.ErrorHandler.record_exception``
writes, with our report after the traceback, so the summary shows the cause and the fix.
Failing to write either file costs one line on stderr, never the run's own outcome.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import TYPE_CHECKING, Any

from cudaassert_ipy.base.atomic_file import write_atomic
from cudaassert_ipy.base.wording import PREFIX, error_line
from cudaassert_ipy.run.rank import RankInfo

if TYPE_CHECKING:
    from cudaassert_ipy.diagnose.diagnosis import Diagnosis

__all__ = [
    "ERROR_FILE_FAILED",
    "REPORT_DIR_NOT_WRITABLE",
    "REPORT_FAILED",
    "check_report_path",
    "error_file_data",
    "write_error_file",
    "write_report_json",
]

REPORT_FAILED = "{prefix} cannot write the JSON report to {path} ({error}); the report on stderr is complete."
REPORT_DIR_NOT_WRITABLE = "{prefix} --report-json {path}: {reason}; the run goes on and the report goes to stderr only."
ERROR_FILE_FAILED = (
    "{prefix} cannot write torchelastic's error file {path} ({error}); torchrun's summary will show only "
    "the exception, the report above has the cause."
)


def check_report_path(path: str) -> str | None:
    """A one-line warning when ``path`` cannot be written, before the run starts (None when it looks fine)."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        reason = "is a directory"
    elif not os.path.isdir(folder):
        reason = f"the directory {folder} does not exist"
    elif not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        reason = "is not writable"
    else:
        return None
    return REPORT_DIR_NOT_WRITABLE.format(prefix=PREFIX, path=path, reason=reason)


def report_data(
    diagnosis: Diagnosis | None,
    rank: RankInfo,
    exit_code: int,
    report_text: str,
    exception: BaseException | None = None,
    rerun: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON report: the outcome, the rank, and the frozen Diagnosis as plain data."""
    return {
        "failed": exit_code != 0,
        "exit_code": exit_code,
        "cuda_failure": diagnosis is not None,
        "exception": error_line(exception) if exception is not None else None,
        "rank": rank.as_dict(),
        "diagnosis": dataclasses.asdict(diagnosis) if diagnosis is not None else None,
        "report": report_text or None,
        "rerun": rerun,
    }


def write_report_json(path: str, data: dict[str, Any]) -> str | None:
    """Write the report atomically; a one-line message on failure."""
    try:  # the mode open() gives: a report the user asked for, readable like any file they write
        write_atomic(path, json.dumps(data, indent=2, default=str), mode=0o666)
    except OSError as e:
        return REPORT_FAILED.format(prefix=PREFIX, path=path, error=e.strerror or e)
    return None


def error_file_data(exception: BaseException, callstack: str, report_text: str) -> dict[str, Any]:
    """``record_exception``'s structure; the agent's summary prints ``py_callstack``, so the report goes there."""
    return {
        "message": {
            "message": f"{type(exception).__name__}: {exception}",
            "extraInfo": {
                "py_callstack": callstack.rstrip("\n") + "\n\n" + report_text + "\n",
                "timestamp": str(int(time.time())),
            },
        }
    }


def write_error_file(path: str, data: dict[str, Any]) -> str | None:
    try:
        with open(path, "w") as fp:
            json.dump(data, fp)
    except OSError as e:
        return ERROR_FILE_FAILED.format(prefix=PREFIX, path=path, error=e.strerror or e)
    return None
