"""Load and unload: one object records every change it makes to IPython, and unload reverts it.

Loading imports neither torch nor ipywidgets and never touches CUDA. Loading twice (also as
``cudaassert`` and ``cudaassert_ipy``) or ``%reload_ext`` leaves exactly one set of hooks.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from traitlets import Bool, Int, List
from traitlets.config import Configurable

from cudaassert_ipy.base.wording import PREFIX, error_line
from cudaassert_ipy.restart.cell_history import CellHistory
from cudaassert_ipy.shell import registry
from cudaassert_ipy.shell.cell_watcher import CellWatcher
from cudaassert_ipy.shell.context_state import ContextState

if TYPE_CHECKING:
    from cudaassert_ipy.capture.assert_lines import AssertSite
    from cudaassert_ipy.capture.fd_tap import TapSet
    from cudaassert_ipy.data.bookmark import Bookmark
    from cudaassert_ipy.data.samples import SampleCheck
    from cudaassert_ipy.diagnose.detection import Detection
    from cudaassert_ipy.diagnose.diagnosis import Diagnosis
    from cudaassert_ipy.diagnose.gpu_state import GpuState
    from cudaassert_ipy.fix.model import ProposedFix
    from cudaassert_ipy.restart.plan import ResumePlan
    from cudaassert_ipy.restart.replay import Resumed
    from cudaassert_ipy.view.actions import Action, FixActions

__all__ = ["CudaAssert", "Extension", "current", "last_diagnosis", "load", "unload"]

SURVEY_BUDGET_S = 2.0  # the panel's scan of the training set for the patch's evidence (`%cudaassert fix`: whole)


class CudaAssert(Configurable):
    """Settings: ``%config CudaAssert.<name> = value`` or ``c.CudaAssert.<name>`` in ipython_config.py."""

    enabled = Bool(True, help="Diagnose CUDA failures after each cell (also: %cudaassert on|off).").tag(config=True)
    tap = Bool(True, help="Tee fd 1/2 to read the kernel's assertion lines (set before loading).").tag(config=True)
    tap_fds = List(Int(), default_value=[2, 1], help="File descriptors to tee (each keeps its own tail).").tag(
        config=True
    )
    tail_bytes = Int(4 * 1024 * 1024, help="Bytes of fd output kept for parsing.").tag(config=True)
    raw_lines_per_site = Int(
        3,
        help="Raw kernel assertion lines shown in the cell per assert site; the rest go "
        "to the kernel's log only (-1: all).",
    ).tag(config=True)
    panel = Bool(True, help="Show the ipywidgets panel when the frontend can render it.").tag(config=True)
    gpu_state = Bool(True, help="Read the GPU state through NVML (nvidia-ml-py) for the report.").tag(config=True)
    bookmark = Bool(
        True,
        help="Record each DataLoader's last 3 batches to name the bad samples after a failure (set before loading).",
    ).tag(config=True)
    bookmark_bytes = Int(
        256 * 1024 * 1024, help="Most bytes of CPU batches the bookmark keeps per loader (set before loading)."
    ).tag(config=True)


class Extension:
    """Everything one loaded extension changed, so that unload can undo exactly that."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self.config = CudaAssert(parent=shell)
        self.state = ContextState()
        # looked up at each failure, so a replaced method (a test, a subclass) is the one that runs
        self.watcher = CellWatcher(
            self.state, lambda *report: self.diagnose_and_show(*report), lambda: self.show_banner()
        )
        self.tap_note: str | None = None
        self.last: Diagnosis | None = None
        self.history = CellHistory()
        self.bookmark: Bookmark | None = None  # while loaded
        self.samples: SampleCheck | None = None  # of the last failure
        self.resumed: Resumed | None = None  # set when a cudaassert restart started this kernel
        self._undo: list[Callable[[], None]] = []

    @property
    def tap(self) -> TapSet | None:
        """The running fd tap (the watcher reads it on every cell), or None."""
        return self.watcher.tap

    @tap.setter
    def tap(self, value: TapSet | None) -> None:
        self.watcher.tap = value

    def add_hook(self, event: str, callback: Callable[..., None]) -> None:
        """Register an IPython event callback that unload removes again (unless it removed itself)."""
        shell = self.shell
        shell.events.register(event, callback)

        def remove() -> None:
            if callback in shell.events.callbacks.get(event, []):
                shell.events.unregister(event, callback)

        self._undo.append(remove)

    # -- install / uninstall ------------------------------------------------------------------
    def install(self) -> None:
        shell = self.shell
        shell.configurables.append(self.config)
        self._undo.append(lambda: shell.configurables.remove(self.config))
        for event in ("pre_run_cell", "post_run_cell"):
            self.add_hook(event, getattr(self.watcher, event))
        if self.config.tap:
            self._start_tap()
        if self.config.bookmark:
            from cudaassert_ipy.data.bookmark import start

            self.bookmark, stop_bookmark = start(self.config.bookmark_bytes)
            self._undo.append(stop_bookmark)
            from cudaassert_ipy.data.sample_lookup import install as name_samples  # validator messages

            self._undo.append(name_samples(self.bookmark, lambda: shell.user_ns))
            from cudaassert_ipy.shell.forks import watch_forks  # a fork's own batches: notebook_launcher's ranks

            self._undo.append(watch_forks(self.bookmark, lambda: shell.user_ns))
        from cudaassert_ipy.shell.magics import CudaAssertMagics, unregister_magics

        magics = CudaAssertMagics(shell, self)
        shell.register_magics(magics)
        self._undo.append(lambda: unregister_magics(shell, magics))
        self._undo.append(self.state.reset)
        self.history.note_loading_cell(shell)
        self.watcher.listeners.append(self.history.record)
        self._undo.append(lambda: self.watcher.listeners.remove(self.history.record))

        def remove_stub() -> None:  # the resume stub stays only while a plan is pending
            from cudaassert_ipy.restart.startup_stub import remove_if_idle  # at unload: %load_ext stays light

            remove_if_idle(shell)

        self._undo.append(remove_stub)
        from cudaassert_ipy.checks import env_requests_validators  # light: torch only when turned on

        if env_requests_validators():  # CUDAASSERT_VALIDATORS=1, set by the restart flow
            self.set_validators(True)

    def _start_tap(self) -> None:
        from cudaassert_ipy.capture.fd_tap import TapError, TapSet

        tap = TapSet(
            fds=tuple(self.config.tap_fds),
            tail_bytes=self.config.tail_bytes,
            shown_lines=self.config.raw_lines_per_site,
        )
        try:
            tap.start()
        except (TapError, OSError) as e:
            self.tap_note = f"assertion lines are not captured ({e}); the diagnosis uses the exception only"
            return
        self.tap = tap

        def shown(change: Mapping[str, Any]) -> None:  # traitlets' change: "new" is the int
            tap.set_shown_lines(change["new"])

        self.config.observe(shown, "raw_lines_per_site")

        def stop() -> None:
            self.config.unobserve(shown, "raw_lines_per_site")
            tap.stop()
            self.tap = None

        self._undo.append(stop)

    def uninstall(self) -> None:
        if self.validators_on():
            self.set_validators(False)
        while self._undo:
            undo = self._undo.pop()
            try:
                undo()
            except Exception as e:  # keep undoing the rest
                print(f"{PREFIX} unload: {e!r}", file=sys.stderr)

    # -- validators (the module imports torch, so only on demand) ----------------------------
    def validators_on(self) -> bool:
        mod = sys.modules.get("cudaassert_ipy.checks")
        return bool(mod is not None and mod.validators_enabled())

    def set_validators(self, on: bool) -> None:
        from cudaassert_ipy.checks import disable_validators, enable_validators

        (enable_validators if on else disable_validators)()

    def verify_fix(self, plan: ResumePlan) -> None:
        """After a replay of a patched setup: preflight, then the failing cell on one batch (shell/fix.py)."""
        from cudaassert_ipy.shell.fix import verify

        verify(self, plan)

    # -- reporting ---------------------------------------------------------------------------
    def diagnose_and_show(
        self, detection: Detection, sites: list[AssertSite], source: str, execution_count: int | None, stderr_text: str
    ) -> None:
        if not self.config.enabled:
            return
        from cudaassert_ipy.data.failure import explain_failure

        diagnosis, samples = explain_failure(
            detection,
            sites,
            stderr_text,
            source=source,
            execution_count=execution_count,
            user_ns=self.shell.user_ns,
            bookmark=self.bookmark,
        )
        if self.bookmark is not None:  # the dataset samples that hold the bad values
            self.samples = samples
        self.last = diagnosis
        if diagnosis.context_dead:
            self.state.mark_dead(diagnosis, self.shell)
        self.show(diagnosis)

    def show(self, diagnosis: Diagnosis) -> None:
        """The panel where the frontend can render widgets; the full text/HTML report always comes along."""
        from cudaassert_ipy.view.display import display

        gpu = self.gpu_summary(diagnosis)
        proposed = self.proposed_fix(diagnosis)
        if self.config.panel and not self.headless():
            panel: Any = None
            try:
                from cudaassert_ipy.view import panel
            except ImportError as e:  # e.g. ipywidgets missing or too old: the report still shows
                print(f"{PREFIX} panel unavailable ({e}); showing the text report.", file=sys.stderr)
            if panel is not None and panel.available():
                try:
                    panel.display_panel(
                        diagnosis, self.actions(diagnosis), gpu_state=gpu, fix=self.fix_actions(proposed)
                    )
                    return
                except Exception as e:  # the diagnosis must still reach the user
                    print(f"{PREFIX} panel failed ({error_line(e)}); showing the text report.", file=sys.stderr)
        from cudaassert_ipy.diagnose.gpu_state import GpuState, describe
        from cudaassert_ipy.view.report import Report

        display(Report(diagnosis, describe(gpu) if isinstance(gpu, GpuState) else gpu, proposed))

    def proposed_fix(self, diagnosis: Diagnosis) -> ProposedFix | None:
        """The patch of the cell that defined the culprit (shell/fix.py); None when there is no culprit, or when
        deriving it failed (the diagnosis must still show)."""
        if diagnosis.culprit is None:
            return None
        from cudaassert_ipy.shell import fix

        try:
            return fix.proposed(self, SURVEY_BUDGET_S)
        except Exception as e:
            print(
                f"{PREFIX} the patch could not be derived ({error_line(e)}); `%cudaassert fix` tries again.",
                file=sys.stderr,
            )
            return None

    def fix_actions(self, proposed: ProposedFix | None) -> FixActions | None:
        """The panel's fix section and its Apply buttons (the `%cudaassert fix apply` path)."""
        if proposed is None:
            return None
        from cudaassert_ipy.restart.frontend import detect
        from cudaassert_ipy.shell import fix

        return fix.panel_actions(self, proposed, detect(self.shell))

    def headless(self) -> bool:
        """Batch runs (papermill, nbconvert --execute, nbclient, Kaggle "Save Version") store outputs nobody
        clicks, and a stored widget exports as its headline only: they get the full static report instead."""
        from cudaassert_ipy.restart.frontend import detect

        try:
            return bool(detect(self.shell).kind == "headless")
        except Exception:  # detection must not cost the report: the panel path has its own fallback
            return False

    def actions(self, diagnosis: Diagnosis) -> list[Action]:
        """The panel's buttons: restart actions from the restart module, plus copying the report."""
        from cudaassert_ipy.restart import request as restart
        from cudaassert_ipy.restart.frontend import detect

        return restart.actions_for(self, diagnosis, detect(self.shell))

    def gpu_summary(self, diagnosis: Diagnosis) -> GpuState | None:
        """NVML's view of the device (a GpuState; never raises), only when the context died."""
        if not self.config.gpu_state or not diagnosis.context_dead:
            return None
        from cudaassert_ipy.diagnose import gpu_state

        return gpu_state.snapshot(diagnosis.cuda_device)

    def show_banner(self) -> None:
        if not self.config.enabled or self.state.dead_since is None:
            return
        from cudaassert_ipy.view.display import display
        from cudaassert_ipy.view.report import Banner

        display(Banner(self.state.dead_since))


def load(shell: Any) -> Extension:
    """One Extension per shell (kept in shell/registry.py); loading again returns the loaded one."""
    ext = registry.active(shell)
    if ext is None:
        ext = Extension(shell)
        registry.add(shell, ext)
        try:
            ext.install()
        except BaseException:
            registry.remove(shell)
            ext.uninstall()
            raise
    return ext


def unload(shell: Any) -> None:
    ext = registry.remove(shell)
    if ext is not None:
        ext.uninstall()


def current(shell: Any = None) -> Extension | None:
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    return registry.active(shell)


def last_diagnosis() -> Diagnosis | None:
    """The most recent diagnosis in this kernel (None before any failure or when not loaded)."""
    ext = current()
    return ext.last if ext is not None else None
