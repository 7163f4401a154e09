"""The restarted kernel's entry: claim the plan, set its environment, load the extension, arm the replay.

The startup stub (restart/startup_stub.py) calls :func:`resume_at_startup`. This module wires the
restart layer (claim, plan, Replayer) to the extension: the resumed state is stored on the
Extension (``ext.resumed``) and the Replayer's hook goes through the extension's undo list, so
``%unload_ext`` leaves nothing behind in a resumed kernel either.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from cudaassert_ipy.base.wording import PREFIX, error_line
from cudaassert_ipy.restart import plan_files, startup_stub
from cudaassert_ipy.restart.frontend import kernel_key, terminal_key, vscode_key
from cudaassert_ipy.restart.plan import Mode, ResumePlan
from cudaassert_ipy.restart.replay import INTERNAL, Replayer, ReplayReport, Resumed
from cudaassert_ipy.shell import registry

if TYPE_CHECKING:
    from cudaassert_ipy.shell.extension import Extension

__all__ = ["activate", "last_report", "resume_at_startup", "resumed_mode"]

EXTENSION = "cudaassert"  # the name users load, so that `%unload_ext cudaassert` undoes a resume as well


def resumed_mode(shell: Any) -> Mode | None:
    """The mode of the restart that started this kernel, while the extension is loaded."""
    ext = registry.active(shell)
    return ext.resumed.mode if ext is not None and ext.resumed is not None else None


def last_report(shell: Any = None) -> ReplayReport:
    """What the replay did: cells, replayed, ok, skipped, seconds (the cells), hook_seconds (all of it), and
    original_seconds (the same cells before the restart). For the benchmark and tests."""
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    ext = registry.active(shell)
    return ext.resumed.report.copy() if ext is not None and ext.resumed is not None else {}


def _load(shell: Any) -> Extension:
    """Load as `%load_ext cudaassert` does (so IPython's own bookkeeping lets `%unload_ext` undo it)."""
    from cudaassert_ipy.shell import extension

    manager = getattr(shell, "extension_manager", None)
    if manager is not None and registry.active(shell) is None:
        try:
            manager.load_extension(EXTENSION)
        except ImportError:  # no `cudaassert` shim importable: load the package directly below
            pass
    return extension.load(shell)


def activate(shell: Any, plan: ResumePlan, notes: list[str], info: Any = None) -> None:
    """Set the environment now, load the extension, and arm the first-cell replay."""
    env = plan.env_dict
    validators_flag = env.pop("CUDAASSERT_VALIDATORS", None)
    os.environ.update(env)
    was_loaded = registry.active(shell) is not None
    ext = _load(shell)
    if validators_flag is not None:  # after loading: validators come on at the first cell, not at startup
        os.environ["CUDAASSERT_VALIDATORS"] = validators_flag
    ext.resumed = Resumed(plan)
    replayer = Replayer(shell, ext, ext.resumed, notes)
    ext.add_hook("pre_run_cell", replayer.pre_run_cell)
    if info is not None:  # claimed inside a cell's pre_run_cell (VS Code): join that cell now
        if not was_loaded:
            ext.watcher.pre_run_cell(info)
        replayer.pre_run_cell(info)


class _LateClaim:
    """VS Code: the notebook path is known at the first cell only; notes alone also wait for a cell.

    One-shot: it removes itself at the first cell. Registered through the extension's undo list when
    the extension is already loaded (c.InteractiveShellApp.extensions); otherwise on its own, and it is
    gone before any ``%unload_ext`` can run (the first cell, even ``%load_ext``, triggers it first).
    """

    def __init__(self, shell: Any, notes: list[str], vscode: bool) -> None:
        self.shell, self.notes, self.vscode = shell, notes, vscode

    def unregister(self) -> None:
        try:
            self.shell.events.unregister("pre_run_cell", self.pre_run_cell)
        except ValueError:
            return

    def pre_run_cell(self, info: Any = None) -> None:
        self.unregister()
        try:
            notebook = self.shell.user_ns.get("__vsc_ipynb_file__") if self.vscode else None
            claimed = plan_files.claim(vscode_key(notebook)) if notebook else plan_files.Claim()
            plan_files.log(f"first cell: notebook={notebook!r} claimed={claimed.plan is not None}")
            notes = self.notes + claimed.notes
            if claimed.plan is not None:
                activate(self.shell, claimed.plan, notes, info)
                startup_stub.remove_if_idle(self.shell)
            else:
                for note in notes:
                    print(note)
        except Exception as e:
            plan_files.log(f"late claim failed: {e!r}")
            print(
                INTERNAL.format(prefix=PREFIX, error=error_line(e), log=plan_files.plan_dir() / plan_files.LOG_NAME),
                file=sys.stderr,
            )


def resume_at_startup(shell: Any) -> None:
    """Called by the startup stub when the plan directory holds plans: is one of them ours?"""
    directory = plan_files.plan_dir()
    in_kernel = getattr(shell, "kernel", None) is not None
    key = kernel_key() if in_kernel else terminal_key()
    claimed = plan_files.claim(key, directory)
    if claimed.plan is not None:
        activate(shell, claimed.plan, claimed.notes)
    else:
        vscode = in_kernel and any(k.startswith("vsc-") for k in plan_files.pending_keys(directory))
        if vscode or claimed.notes:
            late = _LateClaim(shell, claimed.notes, vscode)
            ext = registry.active(shell)
            if ext is not None:
                ext.add_hook("pre_run_cell", late.pre_run_cell)
            else:
                shell.events.register("pre_run_cell", late.pre_run_cell)
    plan_files.log(
        f"startup: key={key} claimed={claimed.plan is not None} notes={len(claimed.notes)} "
        f"CUDA_LAUNCH_BLOCKING={os.environ.get('CUDA_LAUNCH_BLOCKING')} torch={'torch' in sys.modules}",
        directory,
    )
    startup_stub.remove_if_idle(shell, directory)
