"""In the restarted kernel: replay the setup inside the user's next cell.

The startup stub calls :func:`cudaassert_ipy.shell.resume.resume_at_startup` before any user code:
it claims the plan, sets its environment at once (so ``import torch`` in the replay sees
``CUDA_LAUNCH_BLOCKING=1``), loads the extension, and registers the :class:`Replayer` here.
Validators are turned on at the first cell, not at startup, because they import torch and the
kernel should report ready quickly. The replay runs in a ``pre_run_cell`` hook of the first cell
the user runs, so its output lands in that cell (startup output is lost): a progress bar, each
cell's output kept (collapsed where widgets render), a stop at the first failing cell, and a
banner saying what is on and how to go back. If that cell is one of the setup cells (the user
chose "Run All"), nothing is replayed twice."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict

from cudaassert_ipy.base.wording import PREFIX, error_line
from cudaassert_ipy.restart import keep, plan_files
from cudaassert_ipy.restart.cell_history import CellHistory, KeptOutcome, replayable_source
from cudaassert_ipy.restart.plan import Mode, PlanCell, ResumePlan
from cudaassert_ipy.view.replay_view import CellView, OnBanner, PanelSetting, progress_for

__all__ = ["INTERNAL", "ReplayHost", "Replayer", "Resumed", "is_own_magic_cell"]

ANNOUNCE = "{prefix} This kernel was restarted by cudaassert{after}, {mode_text}."
REPLAYING = (
    "{prefix} Replaying {count} setup cell(s) first (they took {seconds:.1f} s before); their output is kept{how}."
)
REPLAY_DONE = "{prefix} Replayed {count} setup cell(s) in {seconds:.1f} s. Now your cell runs."
REPLAY_STOPPED = (
    "{prefix} Replay stopped at cell [{number}] ({index} of {count}): {error}. {rest}Your cell runs next "
    "without them: fix that cell and run it (then the rest) yourself, or choose the cells with "
    "`%cudaassert setup` before the next restart."
)
NOT_REPLAYED = "Not replayed: {numbers}. "
CPU_HINT = (
    " In CPU mode, code that asks for 'cuda' fails: use `device = 'cuda' if torch.cuda.is_available() else 'cpu'`."
)
RUN_ALL_SKIP = (
    "{prefix} You are running the setup cells yourself (this cell is [{number}] of the plan), so nothing is replayed."
)
VALIDATORS_FAILED = "{prefix} The validators could not be turned on ({error}); the environment is set."
OLD_CODE = (
    "{prefix} The replay ran the patched cell [{number}] ({title}); the notebook still holds the old code: "
    "apply the patch there too (`%cudaassert fix` shows it)."
)
INTERNAL = "{prefix} The replay itself failed ({error}); your cell runs as usual. Details: {log}"


class ReplayReport(TypedDict, total=False):
    """What the replay did (``cudaassert_ipy.shell.resume.last_report``): for the benchmark and tests."""

    cells: int
    replayed: int
    ok: bool
    skipped: bool
    seconds: float  # the cells
    original_seconds: float  # the same cells before the restart
    hook_seconds: float  # all of it


@dataclass
class Resumed:
    """This kernel was started by a cudaassert restart: with which plan, and what its replay did."""

    plan: ResumePlan
    report: ReplayReport = field(default_factory=ReplayReport)

    @property
    def mode(self) -> Mode:
        return self.plan.mode


class ReplayHost(Protocol):
    """What the replay needs from the loaded extension."""

    history: CellHistory

    @property
    def config(self) -> PanelSetting: ...

    def set_validators(self, on: bool) -> None: ...

    def verify_fix(self, plan: ResumePlan) -> None: ...


def is_own_magic_cell(source: str) -> bool:
    return bool(source.strip()) and not replayable_source(source).strip()


def _view(cell: PlanCell) -> CellView:
    """What the progress view shows of a cell."""
    return {"number": cell.number, "first_line": cell.first_line}


class Replayer:
    """The first-cell hook: announce, turn validators on, replay, show what is on. It removes itself after
    its one run through ``unregister``; the extension's undo list removes it if it never ran."""

    def __init__(self, shell: Any, host: ReplayHost, resumed: Resumed, notes: list[str]) -> None:
        self.shell, self.host, self.resumed, self.notes = shell, host, resumed, notes
        self.plan = resumed.plan
        self.done = False

    def unregister(self) -> None:
        try:
            self.shell.events.unregister("pre_run_cell", self.pre_run_cell)
        except ValueError:
            return  # already gone

    def pre_run_cell(self, info: Any = None) -> None:
        source = getattr(info, "raw_cell", "") or ""
        if self.done or is_own_magic_cell(source):
            return  # `%load_ext cudaassert` first (Run All): wait for the first real cell
        self.done = True
        self.unregister()
        try:
            self._run(info, source)
        except Exception as e:  # a hook that raises gets a traceback in the user's cell; one line instead
            plan_files.log(f"replay failed: {e!r}")
            print(
                INTERNAL.format(prefix=PREFIX, error=error_line(e), log=plan_files.plan_dir() / plan_files.LOG_NAME),
                file=sys.stderr,
            )

    def _announce(self) -> None:
        for note in self.notes:
            print(note)
        diag, failing = self.plan.diagnosis, self.plan.failing
        after = ""
        if failing is not None and failing.number is not None:
            after = f" after cell [{failing.number}] failed" + (
                f" ({diag.title})" if diag is not None and diag.title else ""
            )
        print(ANNOUNCE.format(prefix=PREFIX, after=after, mode_text=self.plan.mode.text))

    def _user_reruns_setup(self, info: Any, source: str) -> PlanCell | None:
        cell_id = getattr(info, "cell_id", None)
        text = replayable_source(source).strip()
        for cell in self.plan.cells:
            if (cell_id and cell.cell_id == cell_id) or (text and cell.source.strip() == text):
                return cell
        return None

    def _run(self, info: Any, source: str) -> None:
        started = time.perf_counter()
        self._announce()
        if self.plan.validators:
            try:
                self.host.set_validators(True)
            except Exception as e:  # torch missing or broken: the environment is still worth having
                print(VALIDATORS_FAILED.format(prefix=PREFIX, error=error_line(e)))
        cells = self.plan.cells
        mine = self._user_reruns_setup(info, source)
        if mine is not None or not cells:
            keep.discard(self.plan.key)  # nothing replays: the kept values are not needed
        if mine is not None:
            print(RUN_ALL_SKIP.format(prefix=PREFIX, number=mine.number))
            self.resumed.report = {
                "cells": len(cells),
                "replayed": 0,
                "ok": True,
                "skipped": True,
                "seconds": 0.0,
                "original_seconds": 0.0,
            }
        elif cells:
            self.resumed.report = self._replay(cells)
        from cudaassert_ipy.view.display import display

        display(OnBanner(self.plan.mode.value, self.plan.failing_batch))
        fix = self.plan.fix
        if fix is not None:
            if not fix.in_notebook:
                print(OLD_CODE.format(prefix=PREFIX, number=fix.number, title=fix.title))
            if self.resumed.report.get("ok", True):
                self.host.verify_fix(self.plan)
        self.resumed.report["hook_seconds"] = time.perf_counter() - started  # validators' torch import included

    def _replay(self, cells: tuple[PlanCell, ...]) -> ReplayReport:
        original = sum(c.duration for c in cells)
        progress = progress_for(self.host, [_view(c) for c in cells])
        print(REPLAYING.format(prefix=PREFIX, count=len(cells), seconds=original, how=progress.how))
        progress.start()
        saved = {
            name: getattr(sys, name)
            for name in ("last_type", "last_value", "last_traceback", "last_exc")
            if hasattr(sys, name)
        }
        started = time.perf_counter()
        done, failure, timings = 0, None, []
        with keep.opened(self.plan.key, self.plan.created, self.shell.user_ns) as restorer:
            for i, cell in enumerate(cells):
                t0 = time.perf_counter()
                restored = restorer.restore(cell.number, cell.cell_id, cell.source)
                if restored is not None and restored.kept:  # recorded as run: a later restart keeps it again
                    with self.host.history.replaying(cell):
                        self.host.history.record(
                            KeptOutcome(
                                source=cell.source,
                                execution_count=cell.number,
                                cell_id=cell.cell_id,
                                error=None,
                                duration=cell.duration,
                            )
                        )
                    progress.kept(i, time.perf_counter() - t0)
                    done += 1
                    continue
                with self.host.history.replaying(cell), progress.cell(i):
                    result = self.shell.run_cell(cell.source, store_history=False)
                timings.append((cell.number, cell.source, time.perf_counter() - t0))
                error = getattr(result, "error_in_exec", None) or getattr(result, "error_before_exec", None)
                progress.cell_done(i, time.perf_counter() - t0, error)
                if error is not None:
                    failure = (i, cell, error)
                    break
                done += 1
        if restorer.report():
            print(restorer.report())
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
            offer = keep.suggest(timings, self.shell.user_ns)
            if offer:
                print(offer)
        else:
            i, cell, error = failure
            progress.finish(False)
            rest = [f"[{c.number}]" for c in cells[i + 1 :]]
            head = (str(error).strip().splitlines() or [""])[0]
            hint = CPU_HINT if self.plan.mode is Mode.CPU and "cuda" in head.lower() else ""
            print(
                REPLAY_STOPPED.format(
                    prefix=PREFIX,
                    number=cell.number,
                    index=i + 1,
                    count=len(cells),
                    error=error_line(error) + hint,
                    rest=NOT_REPLAYED.format(numbers=", ".join(rest)) if rest else "",
                )
            )
        return {
            "cells": len(cells),
            "replayed": done,
            "ok": failure is None,
            "skipped": False,
            "seconds": seconds,
            "original_seconds": original,
        }
