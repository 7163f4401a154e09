"""One process under watch: the fd tap from start to end, and on a CUDA failure the diagnosis after the traceback.

Shared by the runner (``python -m cudaassert_ipy train.py``), ``import cudaassert_ipy.auto`` and child
processes reached through the startup hook. The traceback is printed by whatever ``sys.excepthook`` is
at that moment (Python's own, or the script's), exactly as Python would; the report follows it on stderr.
No IPython, no ipywidgets; torch only when validators are asked for.
"""

from __future__ import annotations

import contextlib
import os
import sys
import types
from collections.abc import Callable, Container
from typing import TYPE_CHECKING, Any, NamedTuple

from cudaassert_ipy.base.wording import PREFIX, error_line
from cudaassert_ipy.run.options import RunOptions
from cudaassert_ipy.run.rank import RankInfo

if TYPE_CHECKING:  # the diagnosis stack loads only when something failed: start-up stays light
    from cudaassert_ipy.capture.assert_lines import AssertSite
    from cudaassert_ipy.capture.fd_tap import TapSet
    from cudaassert_ipy.data.bookmark import Bookmark
    from cudaassert_ipy.diagnose.detection import Detection
    from cudaassert_ipy.diagnose.diagnosis import Diagnosis
    from cudaassert_ipy.fix.model import ProposedFix
    from cudaassert_ipy.run.ranks import DeadRanks

__all__ = [
    "DEAD_PROCESS",
    "DIAGNOSIS_FAILED",
    "RERUN_HINT",
    "RERUN_HINT_TORCHRUN",
    "Guard",
    "GuardOutcome",
    "MainFiles",
    "UserFiles",
    "exit_now",
    "write_report",
]

DEAD_PROCESS = (
    "The GPU context of this process is dead: nothing on the GPU can be used again in it, so the run stops here."
)
RERUN_HINT = (
    "{prefix} To stop the bad call before it launches, run it again with --rerun-on-failure "
    "(or --blocking --validators): python -m cudaassert_ipy --rerun-on-failure {target}"
)
RERUN_HINT_TORCHRUN = (
    "{prefix} To stop the bad call before it launches, rerun the job with --rerun-on-failure and torchrun's "
    "--max-restarts 1: torchrun --max-restarts 1 ... -m cudaassert_ipy --rerun-on-failure {target}"
)
DIAGNOSIS_FAILED = "{prefix} the diagnosis itself failed ({error}); the traceback above is unchanged."
TAP_UNAVAILABLE = "{prefix} assertion lines are not captured ({error}); the diagnosis uses the exception only."


class UserFiles:
    """``name in UserFiles(...)``: the script's own files count as user code (not site-packages, not stdlib)."""

    def __init__(self, *paths: str) -> None:
        self.roots = tuple(os.path.dirname(os.path.realpath(p)) + os.sep for p in paths if p)
        self.files = frozenset(os.path.realpath(p) for p in paths if p)
        self.libs = tuple({os.path.dirname(os.__file__) + os.sep, os.path.dirname(os.path.dirname(__file__)) + os.sep})

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str) or name.startswith("<"):
            return False
        real = os.path.realpath(name)
        if real in self.files:
            return True
        if "site-packages" in real or "dist-packages" in real or real.startswith(self.libs):
            return False
        return real.startswith(self.roots)


class MainFiles:
    """``UserFiles`` of the ``__main__`` module, read when asked: a watched child's script runs only after the hook
    that watches it is installed (its start-up hook), so its file is known only when something failed."""

    def __init__(self) -> None:
        self._known: tuple[str, UserFiles] | None = None  # a cache: the same script for the whole process

    def __contains__(self, name: object) -> bool:
        main_file = getattr(sys.modules.get("__main__"), "__file__", None)
        path = main_file or (sys.argv[0] if sys.argv else "")
        if self._known is None or self._known[0] != path:
            self._known = (path, UserFiles(path))
        return name in self._known[1]


class GuardOutcome(NamedTuple):
    """What ``Guard.report`` found: the JSON report and the caller's exit decisions read it."""

    rank: RankInfo
    diagnosis: Diagnosis | None = None
    report_text: str = ""
    exception: BaseException | None = None
    fix: ProposedFix | None = None  # the patch of the user's file (run/patch.py), for --report-json


class Guard:
    """Start the tap, and turn a failing exception into the report (stderr, JSON, torchelastic's file).

    Built with everything it needs; ``start`` pushes the undo of each thing it starts on one cleanup stack, and the
    two verbs after it, ``report`` (at most once) and ``close`` (once), are all a caller does with it.
    """

    def __init__(
        self,
        options: RunOptions,
        target_label: str = "",
        user_files: Container[str] = (),
        notes: tuple[str, ...] = (),
        *,
        launcher: bool = False,
    ) -> None:
        self.options = options
        self.notes = notes  # lines the report ends with (a rerun's first diagnosis)
        self.rank = RankInfo.from_env()
        self.target_label = target_label
        self.user_files = user_files
        self.launcher = launcher  # the runner itself (not a watched child): it watches children, owns their folder
        self._stack = contextlib.ExitStack()
        self._late = contextlib.ExitStack()  # what starts with torch's DataLoader: undone after the tap stopped
        self.tap: TapSet | None = None
        self.bookmark: Bookmark | None = None  # once torch's DataLoader is imported
        self._ranks: DeadRanks | None = None  # the job folder and its helpers (run/ranks.py), owned by this runner
        self._tail_kept = False  # this runner's stderr tail, for its watcher
        self.outcome = GuardOutcome(self.rank)
        self._closed = False
        self._checked: tuple[str, ...] = ()  # the bookmark's check of the last failure (without the reproduce line)
        self._fix: ProposedFix | None = None  # the patch of the user's file that defined the culprit (run/patch.py)
        self._user_ns: dict[str, Any] | None = None  # the script's globals, once it failed
        self._loader: str | None = None  # the DataLoader whose batch failed (the bookmark's)

    def start(self) -> None:
        """Environment first (CUDA reads CUDA_LAUNCH_BLOCKING when torch initialises it), then the tap."""
        stack = self._stack
        if self.launcher and self.options.children:
            self._start_children(stack)
        if self.options.blocking:
            _setenv(stack, "CUDA_LAUNCH_BLOCKING", "1")
        if self.options.validators:
            from cudaassert_ipy.checks import ENV_VAR, disable_validators, enable_validators

            _setenv(stack, ENV_VAR, "1")
            enable_validators()
            stack.callback(disable_validators)
        stack.enter_context(self._late)
        from cudaassert_ipy.data.after_import import AfterImport

        hook = AfterImport("torch.utils.data.dataloader", self._start_bookmark)  # the bookmark loads with torch
        hook.install()
        self._late.callback(hook.uninstall)
        from cudaassert_ipy.capture.fd_tap import TapError, TapSet

        tap = TapSet(fds=(2, 1))
        try:
            tap.start()
        except (TapError, OSError) as e:
            self.note(TAP_UNAVAILABLE.format(prefix=PREFIX, error=e))
            return
        self.tap = tap
        dismiss = self._start_rescue(tap)
        if dismiss is not None:
            stack.callback(dismiss)
        stack.callback(self._stop_tap)  # first undone: every byte reaches the real stderr, then the helper goes

    def _start_children(self, stack: contextlib.ExitStack) -> None:
        """The children's start-up hook on their environment, and their rings' folder (for ranks that die without
        Python); both go at close."""
        from cudaassert_ipy.run import ranks
        from cudaassert_ipy.run.children import child_environ
        from cudaassert_ipy.run.options import CHILD_ENV

        wanted = {k: os.environ[k] for k in (CHILD_ENV, "PYTHONPATH") if k in os.environ}
        child_environ(self.options, wanted)
        for key, value in wanted.items():
            _setenv(stack, key, value)
        part = ranks.DeadRanks.prepare(os.environ)
        if part is not None:
            self._ranks = part
            stack.callback(part.cleanup, os.environ)

    def _start_rescue(self, tap: TapSet) -> Callable[[], None] | None:
        """The helper that forwards what our pipes still hold if this process dies without Python (rescue.py);
        for a runner that launched a job, also the watcher that summarises it if the runner itself is killed.
        Returns its undo (None when it did not start)."""
        from cudaassert_ipy.capture import rescue
        from cudaassert_ipy.data import ring

        channels = tap.channels()
        if self._ranks is not None:  # this runner owns the job folder: its helper summarises if it is killed
            pid = self._ranks.attach(channels, self.options.report_json)
        else:
            pid = rescue.spawn(channels, os.environ.get(ring.ENV))
        if pid is None:
            return None
        parent = os.getpid()

        def dismiss() -> None:
            if os.getpid() == parent:  # never from a forked child: the helper is its parent's
                rescue.dismiss(pid)

        import atexit

        atexit.register(dismiss)  # leaving through Python without close: the tap forwards its own bytes

        def undo() -> None:
            atexit.unregister(dismiss)
            dismiss()

        return undo

    def _start_tail(self) -> None:
        """Keep the tail of our fd 2 (the ranks' stderr passes through it) on disk too, for the watcher that reports
        if this runner is killed (Lightning's observer SIGKILLs rank 0 with the rest). Only then: it costs ~0.2 us
        per chunk on the tap's thread; what was written before is copied from the tap's tail in memory."""
        if self.tap is None or self._ranks is None or self._tail_kept:
            return
        close = self._ranks.keep_tail(self.tap.taps[0])  # taps[0]: fd 2
        if close is not None:
            self._tail_kept = True
            self._late.callback(close)  # after the tap stopped: it writes no more

    def _stop_tap(self) -> None:
        tap, self.tap = self.tap, None
        if tap is not None:
            tap.stop()

    def _start_bookmark(self, module: types.ModuleType) -> None:
        """Record each DataLoader's last batches, to name the dataset samples behind a failure (and behind a
        validator's stop: the lookup the notebook installs too)."""
        from cudaassert_ipy.data.bookmark import Bookmark
        from cudaassert_ipy.data.sample_lookup import install as name_samples

        bookmark = Bookmark(self.options.bookmark_bytes)
        bookmark.patch(module)
        self._late.callback(bookmark.unpatch)
        self.bookmark = bookmark
        bookmark.ring = self._ring()
        self._late.callback(name_samples(bookmark, _main_namespace))

    def _ring(self) -> Any:
        """A rank under a runner writes its last batches to disk too, for a death without Python (data/ring.py)."""
        from cudaassert_ipy.data import ring

        folder = os.environ.get(ring.ENV)
        if not folder or not os.path.isdir(folder):
            return None

        def opened(written: ring.Ring) -> None:
            import atexit

            atexit.register(written.close)  # leaving through Python: not a silent death

            def undo() -> None:
                atexit.unregister(written.close)
                written.close()

            self._late.callback(undo)
            if self._ranks is not None:  # this runner is rank 0 itself (Lightning): its children may kill it
                self._start_tail()

        return ring.LazyRing(folder, opened)  # the rank is read at its first batch (Lightning sets it late)

    def note(self, text: str) -> None:
        if not self.options.quiet:
            print(text, file=sys.stderr, flush=True)

    def report(self, exc: BaseException, tb: types.TracebackType | None = None) -> GuardOutcome:
        """After the traceback is printed: the diagnosis of a CUDA failure, then the summary of the ranks that died
        without Python (a launcher's failure). SystemExit asks only for the summary, KeyboardInterrupt for neither.
        At most once per process; never raises."""
        if isinstance(exc, KeyboardInterrupt):
            self.outcome = GuardOutcome(self.rank, exception=exc)
            return self.outcome
        stopped = isinstance(exc, SystemExit)
        diagnosis, text = (None, "") if stopped else self._handle(exc, tb)
        text = self._dead_ranks(None if stopped else exc, text)
        self.outcome = GuardOutcome(self.rank, diagnosis, text, None if stopped else exc, self._fix)
        return self.outcome

    def _handle(self, exc: BaseException, tb: types.TracebackType | None) -> tuple[Diagnosis | None, str]:
        """Diagnose, report, write torchelastic's file; (the diagnosis, the report's text). Never raises."""
        try:
            return self._diagnose_and_print(exc, tb)
        except Exception as failure:  # our failure must not cost the user their traceback or exit code
            print(DIAGNOSIS_FAILED.format(prefix=PREFIX, error=error_line(failure)), file=sys.stderr, flush=True)
            return None, ""

    def launched_exit(self, exc: BaseException) -> None:
        """A rank whose launcher caught its error (``mp.spawn``: the launching process reports from the wrapper, no
        excepthook runs here): only this rank's Bad samples lines, tagged for that report. Never raises."""
        try:
            from cudaassert_ipy.diagnose.pipeline import read_failure

            text = self._tap_text()
            detection, sites = read_failure(exc, text)
            if detection is not None and detection.launch is None and self.outcome.diagnosis is None:
                self._print_checked(self._diagnose(detection, sites, text, _target_globals(exc.__traceback__)))
        except Exception:  # the launcher's own report stands without these lines
            return

    def _print_checked(self, diagnosis: Diagnosis) -> None:
        from cudaassert_ipy.data.child_samples import tagged
        from cudaassert_ipy.data.valid_range import kind_of

        kind = kind_of(diagnosis.cause_id)
        if kind is not None and self._checked:
            print("\n".join(tagged(kind, self._checked)), file=sys.stderr, flush=True)

    def _diagnose_and_print(self, exc: BaseException, tb: types.TracebackType | None) -> tuple[Diagnosis | None, str]:
        from cudaassert_ipy.diagnose.pipeline import read_failure

        text = self._tap_text()
        detection, sites = read_failure(exc, text)
        if detection is None:
            return None, ""
        diagnosis = self._diagnose(detection, sites, text)
        report_text = self.render(diagnosis)
        short = f"{PREFIX} {diagnosis.headline}\nFix: {diagnosis.fix}"
        print(short if self.options.quiet else report_text, file=sys.stderr, flush=True)
        if self.rank.distributed:  # for the process that launched this rank (a notebook)
            self._print_checked(diagnosis)
        error_file = os.environ.get("TORCHELASTIC_ERROR_FILE")
        if error_file:
            import traceback

            from cudaassert_ipy.run import outputs

            callstack = "".join(traceback.format_exception(type(exc), exc, tb))
            failed = outputs.write_error_file(error_file, outputs.error_file_data(exc, callstack, report_text))
            if failed:
                print(failed, file=sys.stderr, flush=True)
        report_text += self._patch(diagnosis, detection)  # the diagnosis stands in torchelastic's file, the patch after
        return diagnosis, report_text

    def _dead_ranks(self, exc: BaseException | None, report_text: str) -> str:
        """After a launcher under this runner failed: the ranks that died without Python (run/ranks.py)."""
        part = self._ranks
        if part is None:
            return report_text
        try:
            lines = part.summary(exc, self._tap_text)  # a dead rank's helper forwards its last stderr into our tap
        except Exception as e:  # the launcher's own error stands without this
            lines = [DIAGNOSIS_FAILED.format(prefix=PREFIX, error=error_line(e))]
        if not lines:
            return report_text
        text = "\n".join(lines)
        print(text, file=sys.stderr, flush=True)
        part.mark_reported()
        return f"{report_text}\n{text}" if report_text else text

    def _tap_text(self) -> str:
        """Everything the tap has seen so far (its tail), once what waits in its pipes is read."""
        if self.tap is None:
            return ""
        self.tap.drain()
        return self.tap.text_since((0,) * len(self.tap.taps))

    def _diagnose(
        self, detection: Detection, sites: list[AssertSite], text: str, user_ns: dict[str, Any] | None = None
    ) -> Diagnosis:
        from cudaassert_ipy.data.failure import explain_failure

        # the script's frame is in the traceback of the error that reached the top (a framework's cleanup may
        # have raised a later one while handling the first: detection.top)
        top = detection.top if detection.top is not None else detection.exception
        if user_ns is None:
            user_ns = _script_globals(top.__traceback__, self.user_files)
        diagnosis, check = explain_failure(
            detection,
            sites,
            text,
            user_ns=user_ns,
            user_files=self.user_files,
            bookmark=self.bookmark,
            dead_status=DEAD_PROCESS,
        )
        self._checked = check.lines if check is not None else ()
        self._user_ns = user_ns
        failing = check.failing if check is not None else None
        self._loader = failing.loader if failing is not None else None
        return diagnosis

    def _patch(self, diagnosis: Diagnosis, detection: Detection) -> str:
        """The proposed patch of the user's file, printed as a diff after the report (the text added to the report);
        never costs the report."""
        if diagnosis.culprit is None:
            return ""
        from cudaassert_ipy.run import patch

        try:
            top = detection.top if detection.top is not None else detection.exception
            sources = patch.user_sources(top.__traceback__, self.user_files)
            if not sources:
                return ""
            self._fix = fix = patch.propose(diagnosis, sources, self._user_ns, self._loader)
        except Exception as failure:  # the diagnosis above stands without its patch
            print(DIAGNOSIS_FAILED.format(prefix=PREFIX, error=error_line(failure)), file=sys.stderr, flush=True)
            return ""
        from cudaassert_ipy.view.fix_report import fix_lines

        lines = fix_lines(fix)
        if fix.patch is not None:
            lines.append(
                patch.apply_fix(fix)
                if self.options.apply_fix
                else patch.SHOWN.format(prefix=PREFIX, path=fix.patch.path)
            )
        elif self.options.apply_fix:
            lines.append(patch.apply_fix(fix))
        text = "\n".join(lines)
        if text and not self.options.quiet:
            print(text, file=sys.stderr, flush=True)
        return f"\n{text}" if text else ""

    def render(self, diagnosis: Diagnosis) -> str:
        from cudaassert_ipy.view.report import to_text

        gpu = None
        if diagnosis.context_dead:
            from cudaassert_ipy.diagnose import gpu_state

            gpu = gpu_state.describe(gpu_state.snapshot(diagnosis.cuda_device))
        lines = [h for h in (self.rank.header(),) if h] + [to_text(diagnosis, gpu)]
        checked = self.options.validators and self.options.blocking
        if diagnosis.context_dead and not checked and not self.options.rerun_on_failure and self.target_label:
            hint = RERUN_HINT_TORCHRUN if self.rank.torchrun else RERUN_HINT
            lines.append(hint.format(prefix=PREFIX, target=self.target_label))
        return "\n".join(lines + list(self.notes))

    def close(self, exit_code: int | None = None, rerun: dict[str, Any] | None = None) -> None:
        """The JSON report (when asked for; ``exit_code`` None: no outcome to tell), then every start undone in
        reverse, the tap first: every byte reaches the real stderr. Once per process; a second call does nothing."""
        if self._closed:
            return
        self._closed = True
        if self.options.report_json and exit_code is not None:
            write_report(self.options.report_json, self.outcome, exit_code, rerun)
        self._stack.close()


def write_report(path: str, outcome: GuardOutcome, exit_code: int, rerun: dict[str, Any] | None = None) -> None:
    """``--report-json``: the outcome as JSON; a one-line message on stderr when it cannot be written."""
    from cudaassert_ipy.run import outputs

    data = outputs.report_data(
        outcome.diagnosis, outcome.rank, exit_code, outcome.report_text, outcome.exception, rerun
    )
    if outcome.fix is not None:
        from cudaassert_ipy.run.patch import fix_data

        data["fix"] = fix_data(outcome.fix)
    failed = outputs.write_report_json(path, data)
    if failed:
        print(failed, file=sys.stderr, flush=True)


def exit_now(code: int) -> None:
    """A failed rank leaves at once: its peers would otherwise wait for it in a collective."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a closed stream must not keep the rank alive
            pass
    os._exit(code)


def _setenv(stack: contextlib.ExitStack, key: str, value: str) -> None:
    """Set ``key``; at close it gets its old value back, unless someone else changed it since."""
    old = os.environ.get(key)
    os.environ[key] = value

    def restore() -> None:
        if os.environ.get(key) != value:
            return
        if old is None:
            del os.environ[key]
        else:
            os.environ[key] = old

    stack.callback(restore)


def _main_namespace() -> dict[str, Any]:
    """The running script's globals, where its DataLoaders have names (the validators' sample lookup reads them)."""
    return getattr(sys.modules.get("__main__"), "__dict__", {})


def _target_globals(tb: types.TracebackType | None) -> dict[str, Any] | None:
    """A launcher target's module globals (its first frame outside the libraries), where its model and data live."""
    libs = UserFiles().libs
    while tb is not None:
        name = os.path.realpath(tb.tb_frame.f_code.co_filename)
        if "site-packages" not in name and "dist-packages" not in name and not name.startswith(libs):
            return tb.tb_frame.f_globals
        tb = tb.tb_next
    return None


def _script_globals(tb: types.TracebackType | None, user_files: Container[str]) -> dict[str, Any] | None:
    """The script's module globals (its ``<module>`` frame), where the model and data usually live."""
    found = None
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name == "<module>" and code.co_filename in user_files:
            found = tb.tb_frame.f_globals
        tb = tb.tb_next
    return found
