"""See every failed cell through IPython's pre/post_run_cell events, and report after the traceback.

Why events and not ``set_custom_exc``: that holds a single handler (Colab installs one), misses
errors raised while displaying a result, and if it raises once IPython drops every handler.
``post_run_cell`` sees ``error_in_exec`` / ``error_before_exec``, and a *new* ``sys.last_value``
catches display errors. The normal traceback is never touched; the report follows it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from cudaassert_ipy.base.wording import PREFIX, error_line

if TYPE_CHECKING:  # the diagnosis modules load at the first failure, not with %load_ext
    from cudaassert_ipy.capture.assert_lines import AssertSite
    from cudaassert_ipy.capture.fd_tap import TapSet
    from cudaassert_ipy.diagnose.detection import Detection
    from cudaassert_ipy.shell.context_state import ContextState

__all__ = ["CellRunOutcome", "CellWatcher", "Reporter"]

# detection, assertion sites, cell source, execution count, the fd text of this cell -> diagnose and show
Reporter = Callable[["Detection", "list[AssertSite]", str, "int | None", str], None]

_clock = time.perf_counter
_modules = sys.modules
_sys_dict = sys.__dict__  # sys.last_value, read without getattr's default handling


class CellRunOutcome(NamedTuple):
    """What one cell did, for listeners such as the cell history (a NamedTuple: this is the per-cell path)."""

    source: str
    execution_count: int | None
    cell_id: str | None
    error: BaseException | None
    duration: float
    detection: Detection | None


class CellWatcher:
    """pre/post_run_cell pair. Nested run_cell (replays) is handled with a stack.

    Knows only what it needs: the fd tap (``tap``, set while one runs), the context state, a
    callback that diagnoses and shows a failure, and one that shows the dead-context banner.
    """

    def __init__(self, state: ContextState, report: Reporter, banner: Callable[[], None]) -> None:
        self.state, self.report, self.banner = state, report, banner
        self.tap: TapSet | None = None
        self._stack: list[tuple[object, tuple[int, ...], float, Any]] = []  # last_value, tap mark, start, info
        self._handled: BaseException | None = None
        self.listeners: list[Callable[[CellRunOutcome], None]] = []

    # Both run for every cell: keep them to attribute reads (the idle-overhead benchmark watches them).
    def pre_run_cell(self, info: Any = None) -> None:
        tap = self.tap
        self._stack.append((_sys_dict.get("last_value"), tap.mark() if tap is not None else (), _clock(), info))

    def post_run_cell(self, result: Any = None) -> None:
        if not self._stack:
            return
        last_before, mark, started, info = self._stack.pop()
        tap = self.tap
        if mark and tap is not None:  # keep this cell's fd output in this cell: ipykernel publishes it from a thread
            tap.settle(mark)
        validator_mode = _modules.get("cudaassert_ipy.checks.mode")  # loaded once validators were on
        if validator_mode is not None:  # an optimizer step that raised may have left them suspended
            validator_mode.resume_suspended()
        error = getattr(result, "error_in_exec", None) or getattr(result, "error_before_exec", None)
        if error is None:
            now = _sys_dict.get("last_value")
            if now is not None and now is not last_before:
                error = now  # raised while displaying the result (formatter / displayhook)
        source = getattr(info, "raw_cell", None) or ""
        detection = None
        if error is not None and error is not self._handled:
            self._handled = error
            try:
                detection = self._report(error, mark, source, result)
            except Exception as failure:  # our failure must never cost the user their traceback
                from cudaassert_ipy.view.report import DIAGNOSIS_FAILED

                print(DIAGNOSIS_FAILED.format(prefix=PREFIX, error=error_line(failure)), file=sys.stderr)
        if not self.listeners:
            return
        outcome = CellRunOutcome(
            source,
            getattr(result, "execution_count", None),
            getattr(info, "cell_id", None),
            error,
            _clock() - started,
            detection,
        )
        for listener in self.listeners[:]:
            try:
                listener(outcome)
            except Exception as failure:
                print(f"{PREFIX} a cell listener failed: {failure!r}", file=sys.stderr)

    def _report(self, error: BaseException, mark: tuple[int, ...], source: str, result: Any) -> Detection | None:
        from cudaassert_ipy.diagnose.detection import classify, is_launched

        dead = self.state.dead
        tap = self.tap
        detection = classify(error, context_dead=dead)
        if (
            detection is None
            and (tap is None or classify(error, context_dead=dead, assert_seen=True) is None)
            and not is_launched(error)
        ):  # a launcher's wrapper: the child's text may make it ours
            return None  # not ours, and not an error that an assertion line in this cell would make ours
        if detection is not None and dead and detection.kills_context:
            self.banner()
            return detection
        stderr_text = ""
        if tap is not None:
            tap.drain()
            stderr_text = tap.text_since(mark)
        from cudaassert_ipy.diagnose.pipeline import read_failure  # on failures only: keeps the loaded set small

        detection, sites = read_failure(error, stderr_text, dead)
        if detection is None:
            return None
        self.report(detection, sites, source, getattr(result, "execution_count", None), stderr_text)
        return detection
