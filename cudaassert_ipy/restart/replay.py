"""In the restarted kernel: claim the plan, set the environment, and replay the setup inside the user's next cell.

The startup stub calls :func:`resume_at_startup` before any user code: the plan's environment is
set at once (so ``import torch`` in the replay sees ``CUDA_LAUNCH_BLOCKING=1``) and the extension
is loaded. Validators are turned on at the first cell, not at startup, because they import torch
and the kernel should report ready quickly. The replay itself runs in a ``pre_run_cell`` hook of
the first cell the user runs, so its output lands in that cell (startup output is lost): a progress
bar, each cell's output kept (collapsed where widgets render), a stop at the first failing cell, and
a banner saying what is on and how to go back. If that cell is one of the setup cells (the user
chose "Run All"), nothing is replayed twice.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from cudaassert_ipy.restart import plan_files as resume_plan
from cudaassert_ipy.restart import startup_stub
from cudaassert_ipy.restart.cell_history import replayable_source
from cudaassert_ipy.restart.frontend import kernel_key, terminal_key, vscode_key
from cudaassert_ipy.view.replay_view import OnBanner, progress_for
from cudaassert_ipy.wording import PREFIX, error_line

__all__ = ["last_report", "resume_at_startup", "resumed_mode"]

ANNOUNCE = "{prefix} This kernel was restarted by cudaassert{after}, {mode_text}."
REPLAYING = ("{prefix} Replaying {count} setup cell(s) first (they took {seconds:.1f} s before); their output is "
             "kept{how}.")
REPLAY_DONE = "{prefix} Replayed {count} setup cell(s) in {seconds:.1f} s. Now your cell runs."
REPLAY_STOPPED = ("{prefix} Replay stopped at cell [{number}] ({index} of {count}): {error}. {rest}Your cell runs next "
                  "without them: fix that cell and run it (then the rest) yourself, or choose the cells with "
                  "`%cudaassert setup` before the next restart.")
NOT_REPLAYED = "Not replayed: {numbers}. "
CPU_HINT = (" In CPU mode, code that asks for 'cuda' fails: use `device = 'cuda' if torch.cuda.is_available() "
            "else 'cpu'`.")
RUN_ALL_SKIP = ("{prefix} You are running the setup cells yourself (this cell is [{number}] of the plan), so nothing "
                "is replayed.")
VALIDATORS_FAILED = "{prefix} The validators could not be turned on ({error}); the environment is set."
INTERNAL = "{prefix} The replay itself failed ({error}); your cell runs as usual. Details: {log}"


@dataclass
class Resumed:
    mode: str
    plan: dict[str, Any]
    report: dict[str, Any] = field(default_factory=dict)


_STATE: dict[int, Resumed] = {}


def resumed_mode(shell: Any) -> str | None:
    """``debug`` / ``cpu`` / ``normal`` when this kernel was started by a cudaassert restart."""
    state = _STATE.get(id(shell))
    return state.mode if state is not None else None


def last_report(shell: Any = None) -> dict[str, Any]:
    """What the replay did: cells, replayed, ok, skipped, seconds (the cells), hook_seconds (all of it), and
    original_seconds (the same cells before the restart). For the benchmark and tests."""
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    state = _STATE.get(id(shell))
    return dict(state.report) if state is not None else {}


def _mode_text(mode: str) -> str:
    from cudaassert_ipy.restart.request import MODES

    return str(MODES.get(mode, MODES["debug"])["text"])


def _unregister(shell: Any, callback: Any) -> None:
    try:
        shell.events.unregister("pre_run_cell", callback)
    except ValueError:
        return  # already gone


def _is_own_magic_cell(source: str) -> bool:
    return bool(source.strip()) and not replayable_source(source).strip()


class Replayer:
    """The first-cell hook: announce, turn validators on, replay, show what is on."""

    def __init__(self, shell: Any, ext: Any, plan: dict[str, Any], notes: list[str]) -> None:
        self.shell, self.ext, self.plan, self.notes = shell, ext, plan, notes
        self.done = False

    def pre_run_cell(self, info: Any = None) -> None:
        source = getattr(info, "raw_cell", "") or ""
        if self.done or _is_own_magic_cell(source):
            return  # `%load_ext cudaassert` first (Run All): wait for the first real cell
        self.done = True
        _unregister(self.shell, self.pre_run_cell)
        try:
            self._run(info, source)
        except Exception as e:  # a hook that raises gets a traceback in the user's cell; one line instead
            resume_plan.log(f"replay failed: {e!r}")
            print(INTERNAL.format(prefix=PREFIX, error=error_line(e),
                                  log=resume_plan.plan_dir() / resume_plan.LOG_NAME), file=sys.stderr)

    def _announce(self) -> None:
        for note in self.notes:
            print(note)
        diag, failing = self.plan.get("diagnosis") or {}, self.plan.get("failing") or {}
        after = ""
        if failing.get("number") is not None:
            after = f" after cell [{failing['number']}] failed" + (f" ({diag['title']})" if diag.get("title") else "")
        print(ANNOUNCE.format(prefix=PREFIX, after=after, mode_text=_mode_text(self.plan.get("mode", "debug"))))

    def _user_reruns_setup(self, info: Any, source: str) -> dict[str, Any] | None:
        cell_id = getattr(info, "cell_id", None)
        text = replayable_source(source).strip()
        for cell in self.plan["cells"]:
            if (cell_id and cell.get("cell_id") == cell_id) or (text and cell["source"].strip() == text):
                return cell
        return None

    def _run(self, info: Any, source: str) -> None:
        started = time.perf_counter()
        self._announce()
        if self.plan.get("validators"):
            try:
                self.ext.set_validators(True)
            except Exception as e:  # torch missing or broken: the environment is still worth having
                print(VALIDATORS_FAILED.format(prefix=PREFIX, error=error_line(e)))
        state = _STATE[id(self.shell)]
        cells = self.plan["cells"]
        mine = self._user_reruns_setup(info, source)
        if mine is not None:
            print(RUN_ALL_SKIP.format(prefix=PREFIX, number=mine.get("number")))
            state.report = {"cells": len(cells), "replayed": 0, "ok": True, "skipped": True, "seconds": 0.0,
                            "original_seconds": 0.0}
        elif cells:
            state.report = self._replay(cells)
        from IPython.display import display

        display(OnBanner(self.plan.get("mode", "debug")))
        state.report["hook_seconds"] = time.perf_counter() - started  # validators' torch import included

    def _replay(self, cells: list[dict[str, Any]]) -> dict[str, Any]:
        original = sum(float(c.get("duration") or 0) for c in cells)
        progress = progress_for(self.ext, cells)
        print(REPLAYING.format(prefix=PREFIX, count=len(cells), seconds=original, how=progress.how))
        progress.start()
        saved = {name: getattr(sys, name) for name in ("last_type", "last_value", "last_traceback", "last_exc")
                 if hasattr(sys, name)}
        started = time.perf_counter()
        done, failure = 0, None
        for i, cell in enumerate(cells):
            t0 = time.perf_counter()
            with self.ext.history.replaying(cell), progress.cell(i):
                result = self.shell.run_cell(cell["source"], store_history=False)
            error = getattr(result, "error_in_exec", None) or getattr(result, "error_before_exec", None)
            progress.cell_done(i, time.perf_counter() - t0, error)
            if error is not None:
                failure = (i, cell, error)
                break
            done += 1
        seconds = time.perf_counter() - started
        for name in ("last_type", "last_value", "last_traceback", "last_exc"):
            # a replayed failure must not be taken for a failure of the user's own cell afterwards
            if name in saved:
                setattr(sys, name, saved[name])
            elif hasattr(sys, name):
                delattr(sys, name)
        if failure is None:
            progress.finish(True)
            print(REPLAY_DONE.format(prefix=PREFIX, count=len(cells), seconds=seconds))
        else:
            i, cell, error = failure
            progress.finish(False)
            rest = [f"[{c.get('number')}]" for c in cells[i + 1:]]
            head = (str(error).strip().splitlines() or [""])[0]
            hint = CPU_HINT if self.plan.get("mode") == "cpu" and "cuda" in head.lower() else ""
            print(REPLAY_STOPPED.format(prefix=PREFIX, number=cell.get("number"), index=i + 1, count=len(cells),
                                        error=error_line(error) + hint,
                                        rest=NOT_REPLAYED.format(numbers=", ".join(rest)) if rest else ""))
        return {"cells": len(cells), "replayed": done, "ok": failure is None, "skipped": False,
                "seconds": seconds, "original_seconds": original}


def activate(shell: Any, plan: dict[str, Any], notes: list[str], info: Any = None) -> None:
    """Set the environment now, load the extension, and arm the first-cell replay."""
    from cudaassert_ipy.shell import extension

    env = dict(plan.get("env") or {})
    validators_flag = env.pop("CUDAASSERT_VALIDATORS", None)
    os.environ.update(env)
    was_loaded = extension.current(shell) is not None
    ext = extension.load(shell)
    if validators_flag is not None:  # after loading: validators come on at the first cell, not at startup
        os.environ["CUDAASSERT_VALIDATORS"] = validators_flag
    _STATE[id(shell)] = Resumed(str(plan.get("mode", "debug")), plan)
    replayer = Replayer(shell, ext, plan, notes)
    shell.events.register("pre_run_cell", replayer.pre_run_cell)
    if info is not None:  # claimed inside a cell's pre_run_cell (VS Code): join that cell now
        if not was_loaded:
            ext.watcher.pre_run_cell(info)
        replayer.pre_run_cell(info)


class _LateClaim:
    """VS Code: the notebook path is known at the first cell only; notes alone also wait for a cell."""

    def __init__(self, shell: Any, notes: list[str], vscode: bool) -> None:
        self.shell, self.notes, self.vscode = shell, notes, vscode

    def pre_run_cell(self, info: Any = None) -> None:
        _unregister(self.shell, self.pre_run_cell)
        try:
            notebook = self.shell.user_ns.get("__vsc_ipynb_file__") if self.vscode else None
            claimed = resume_plan.claim(vscode_key(notebook)) if notebook else resume_plan.Claim()
            resume_plan.log(f"first cell: notebook={notebook!r} claimed={claimed.plan is not None}")
            notes = self.notes + claimed.notes
            if claimed.plan is not None:
                activate(self.shell, claimed.plan, notes, info)
                startup_stub.remove_if_idle(self.shell)
            else:
                for note in notes:
                    print(note)
        except Exception as e:
            resume_plan.log(f"late claim failed: {e!r}")
            print(INTERNAL.format(prefix=PREFIX, error=error_line(e),
                                  log=resume_plan.plan_dir() / resume_plan.LOG_NAME), file=sys.stderr)


def resume_at_startup(shell: Any) -> None:
    """Called by the startup stub when the plan directory holds plans: is one of them ours?"""
    directory = resume_plan.plan_dir()
    in_kernel = getattr(shell, "kernel", None) is not None
    key = kernel_key() if in_kernel else terminal_key()
    claimed = resume_plan.claim(key, directory)
    if claimed.plan is not None:
        activate(shell, claimed.plan, claimed.notes)
    else:
        vscode = in_kernel and any(k.startswith("vsc-") for k in resume_plan.pending_keys(directory))
        if vscode or claimed.notes:
            late = _LateClaim(shell, claimed.notes, vscode)
            shell.events.register("pre_run_cell", late.pre_run_cell)
    resume_plan.log(f"startup: key={key} claimed={claimed.plan is not None} notes={len(claimed.notes)} "
                    f"CUDA_LAUNCH_BLOCKING={os.environ.get('CUDA_LAUNCH_BLOCKING')} torch={'torch' in sys.modules}",
                    directory)
    startup_stub.remove_if_idle(shell, directory)
