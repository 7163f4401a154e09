"""One case of tests/gpu/test_real_asserts.py in a process of its own, forked from a warm server.

A device-side assert kills its process's CUDA context, so each case needs a fresh process; starting
Python and importing torch and IPython for each costs seconds (tens on a loaded CPU). The cases fork
instead from a multiprocessing fork server that has imported them and never touched CUDA (a fresh
interpreter of its own, not the pytest process, which has asked torch about the device), so each case
still initialises CUDA in a process of its own. The child is an in-process IPython shell with the
extension loaded (fd tap on), one setup cell that builds CPU tensors, and one cell that moves them to
``device`` and calls the op, then synchronises; it writes what the extension concluded as JSON, and its
fds 1 and 2 go to a log file.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import traceback
from pathlib import Path
from typing import Any

PRELOAD = [
    "torch",
    "torch.nn.functional",
    "IPython.core.interactiveshell",
    "cudaassert_ipy.shell.extension",
    "helpers.assert_child",
]


def _child(out_path: str, log_path: str, cwd: str, env: dict[str, str], setup: str, trigger: str, device: str) -> None:
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    try:
        result = _run(setup, trigger, device)
    except BaseException:
        result = {"harness_error": traceback.format_exc()}
    Path(out_path).write_text(json.dumps(result), encoding="utf-8")
    sys.stdout.flush()
    sys.stderr.flush()


def _run(setup: str, trigger: str, device: str) -> dict[str, Any]:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.user_ns["device"] = device
    shell.run_line_magic("load_ext", "cudaassert")
    from cudaassert_ipy.shell import extension

    ext = extension.current(shell)
    result: dict[str, Any] = {"device": device, "tap": ext.tap is not None, "tap_note": ext.tap_note}
    ok = shell.run_cell(setup, store_history=True)
    result["setup_error"] = None if ok.success else repr(ok.error_in_exec or ok.error_before_exec)
    if ok.success:
        sync = "\nimport torch\nif device == 'cuda':\n    torch.cuda.synchronize()\n"
        res = shell.run_cell(trigger + sync, store_history=True)
        err = res.error_in_exec or res.error_before_exec
        result["error_type"] = type(err).__name__ if err is not None else None
        result["error_first_line"] = (str(err).strip().splitlines() or [""])[0] if err is not None else None
        d = ext.last
        result["dead"] = bool(ext.state.dead_since is not None)
        result["diagnosis"] = (
            None
            if d is None
            else {
                "kind": d.kind,
                "context_dead": d.context_dead,
                "cause_id": d.cause_id,
                "title": d.title,
                "specific": d.specific,
                "assert_sites": list(d.assert_sites),
                "assert_raw": list(d.assert_raw),
                "exception_line": d.exception_line,
                "error_code": d.error_code,
            }
        )
    return result


def run_case(
    name: str, setup: str, trigger: str, device: str, workdir: Path, env: dict[str, str], timeout: float
) -> dict[str, Any]:
    """Runs one case in a forked process; its JSON, with ``log`` (the tail of its fds 1 and 2) and ``exitcode``."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    out, log = workdir / f"{name}.json", workdir / f"{name}.log"
    proc = ctx.Process(
        target=_child, args=(str(out), str(log), str(workdir), env, setup, trigger, device), name=f"case-{name}"
    )
    proc.start()
    timed_out = False
    try:
        proc.join(timeout)
    finally:
        if proc.is_alive():
            timed_out = True
            proc.kill()
            proc.join(10)
    tail = log.read_text(errors="replace")[-8000:] if log.exists() else ""
    if not out.exists():
        what = f"killed after {timeout:.0f}s" if timed_out else f"exit code {proc.exitcode}"
        raise AssertionError(f"the case's process wrote nothing ({what}):\n{tail}")
    result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    result["log"], result["exitcode"] = tail, proc.exitcode
    return result
