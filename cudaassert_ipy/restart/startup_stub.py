"""The file that makes a restarted kernel pick up its resume plan, before any user code runs.

It lives in the active profile's startup directory (``get_ipython().profile_dir.startup_dir``),
exists only while a plan is pending, and costs one directory listing when none is (it imports
nothing of ours then: about 0.1 ms in a kernel, where jupyter_core is already imported). IPython runs
all startup files inside one try block, so a stub that raised would skip the files after it; and
output printed at startup has no parent cell and is usually lost. So the stub never raises and
never prints: it logs to ``<plan dir>/resume.log``.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from cudaassert_ipy.base.atomic_file import write_atomic
from cudaassert_ipy.base.wording import PREFIX
from cudaassert_ipy.restart import plan_files

__all__ = ["STUB_NAME", "STUB_SOURCE", "StubError", "ensure_stub", "remove_if_idle", "stub_path"]

STUB_NAME = "00-cudaassert-resume.py"
STUB_MARK = "# Written by cudaassert_ipy"
STUB_SOURCE = """\
# Written by cudaassert_ipy for `%cudaassert restart` (and its "Restart & replay setup" button).
# It resumes a kernel restarted by cudaassert: it does nothing unless a resume plan for this very
# kernel is waiting, and it is removed again when no plan is. Safe to delete.
# It never raises (startup files share one try block) and never prints (startup output is lost).
def _cudaassert_resume():
    try:
        import os
        try:  # where cudaassert_ipy.restart.plan_files.plan_dir() puts plans; no import of ours unless one is there
            from jupyter_core.paths import jupyter_runtime_dir
            base = jupyter_runtime_dir()
        except ImportError:
            from IPython.paths import get_ipython_dir
            base = get_ipython_dir()
        try:
            names = os.listdir(os.path.join(base, "cudaassert"))
        except OSError:
            return
        if not any(n.startswith("plan-") and n.endswith(".json") for n in names):
            return
        from cudaassert_ipy.shell.resume import resume_at_startup
        resume_at_startup(get_ipython())
    except BaseException as error:
        try:
            from cudaassert_ipy.restart.plan_files import log
            log("startup stub failed: %r" % (error,))
        except BaseException:
            return  # nowhere left to report to, and raising here would skip the other startup files


_cudaassert_resume()
del _cudaassert_resume
"""

STUB_WRITE_FAILED = (
    "{prefix} Cannot write the startup file {path} ({error}), so a restarted kernel could not replay your setup. "
    "Nothing was restarted. Make the IPython profile directory writable (or start Jupyter with IPYTHONDIR set to "
    "a writable directory), or restart by hand and re-run your setup cells."
)


class StubError(Exception):
    """The stub could not be written; the message is for the user."""


def stub_path(shell: Any) -> Path:
    return Path(shell.profile_dir.startup_dir) / STUB_NAME


def ensure_stub(shell: Any) -> Path:
    """Write (or refresh) the stub atomically. Call under ``plan_files.plan_lock``."""
    path = stub_path(shell)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_file() and path.read_text(encoding="utf-8") == STUB_SOURCE:
            return path
        write_atomic(path, STUB_SOURCE, mode=0o600)
    except OSError as e:
        raise StubError(STUB_WRITE_FAILED.format(prefix=PREFIX, path=path, error=e)) from e
    return path


def remove_if_idle(shell: Any, directory: Path | None = None) -> bool:
    """Remove our stub when no plan is pending for any kernel of this profile. True when removed.

    Never raises: it runs at unload and right after a claim, where a failure must cost nothing.
    """
    path = stub_path(shell)
    if not path.exists():
        return False
    d = directory or plan_files.plan_dir()
    try:
        lock = plan_files.plan_lock(d) if d.is_dir() else contextlib.nullcontext()
        with lock:
            if plan_files.pending_keys(d):
                return False
            if STUB_MARK not in path.read_text(encoding="utf-8"):
                return False  # not ours: leave it
            path.unlink()
    except OSError as e:
        plan_files.log(f"could not remove the startup stub {path}: {e}", d)
        return False
    return True
