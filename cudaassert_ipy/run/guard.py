"""One process under watch: the fd tap from start to end, and on a CUDA failure the diagnosis after the traceback.

Shared by the runner (``python -m cudaassert_ipy train.py``), ``import cudaassert_ipy.auto`` and child
processes reached through the startup hook. The traceback is printed by whatever ``sys.excepthook`` is
at that moment (Python's own, or the script's), exactly as Python would; the report follows it on stderr.
No IPython, no ipywidgets; torch only when validators are asked for.
"""

from __future__ import annotations

import os
import sys
import types
from typing import TYPE_CHECKING, Any, Callable, Container

from cudaassert_ipy.run.options import RunOptions
from cudaassert_ipy.run.rank import RankInfo
from cudaassert_ipy.wording import PREFIX, error_line

if TYPE_CHECKING:  # the diagnosis stack loads only when something failed: start-up stays light
    from cudaassert_ipy.capture.assert_lines import AssertSite
    from cudaassert_ipy.capture.fd_tap import TapSet
    from cudaassert_ipy.data.bookmark import Bookmark
    from cudaassert_ipy.diagnose.detection import Detection
    from cudaassert_ipy.diagnose.diagnosis import Diagnosis
    from cudaassert_ipy.fix.model import ProposedFix

__all__ = ["DEAD_PROCESS", "DIAGNOSIS_FAILED", "RERUN_HINT", "RERUN_HINT_TORCHRUN", "Guard", "UserFiles"]

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
BOOKMARK_BYTES = 256 * 1024 * 1024  # CPU batches kept per DataLoader, as the notebook extension's default
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


class Guard:
    """Start the tap, and turn a failing exception into the report (stderr, JSON, torchelastic's file)."""

    def __init__(self, options: RunOptions, target_label: str = "", user_files: Container[str] = (),
                 notes: tuple[str, ...] = ()) -> None:
        self.options = options
        self.notes = notes  # lines the report ends with (a rerun's first diagnosis)
        self.rank = RankInfo.from_env()
        self.target_label = target_label
        self.user_files = user_files
        self.tap: TapSet | None = None
        self.bookmark: Bookmark | None = None  # once started
        self._stop_bookmark: Callable[[], None] | None = None
        self._close_ring: Callable[[], None] | None = None
        self.ring_folder: str | None = None  # the children's rings (run/ranks.py), owned by this runner
        self._tail: Any = None  # capture.rescue.TailFile: this runner's stderr tail, for its watcher
        self._rescue: tuple[int, int] | None = None  # (the rescue helper's pid, the pid that started it)
        self.diagnosis: Diagnosis | None = None
        self.fix: ProposedFix | None = None  # the patch of the user's file that defined the culprit (run/patch.py)
        self.exception: BaseException | None = None
        self.report_text = ""
        self._user_ns: dict[str, Any] | None = None  # the script's globals, once it failed
        self._loader: str | None = None  # the DataLoader whose batch failed (the bookmark's)

    def start(self) -> None:
        """Environment first (CUDA reads CUDA_LAUNCH_BLOCKING when torch initialises it), then the tap."""
        if self.options.blocking:
            os.environ["CUDA_LAUNCH_BLOCKING"] = "1"
        if self.options.validators:
            from cudaassert_ipy.checks import ENV_VAR, enable_validators

            os.environ[ENV_VAR] = "1"
            enable_validators()
        from cudaassert_ipy.data.after_import import AfterImport

        hook = AfterImport("torch.utils.data.dataloader", self._start_bookmark)  # the bookmark loads with torch
        hook.install()
        self._stop_bookmark = hook.uninstall
        from cudaassert_ipy.capture.fd_tap import TapError, TapSet

        tap = TapSet(fds=(2, 1))
        try:
            tap.start()
        except (TapError, OSError) as e:
            self.note(TAP_UNAVAILABLE.format(prefix=PREFIX, error=e))
            return
        self.tap = tap
        self._start_rescue(tap)

    def _start_rescue(self, tap: TapSet) -> None:
        """The helper that forwards what our pipes still hold if this process dies without Python (rescue.py);
        for a runner that launched a job, also the watcher that summarises it if the runner itself is killed."""
        from cudaassert_ipy.capture import rescue
        from cudaassert_ipy.data import ring

        channels = [c for t in tap.taps for c in t.channel_fds()]
        if self.ring_folder is not None:  # this runner owns the ring folder: its helper summarises if it is killed
            from cudaassert_ipy.run import watcher

            pid = rescue.spawn(channels, self.ring_folder, watcher.__file__, [self.options.report_json or ""])
        else:
            pid = rescue.spawn(channels, os.environ.get(ring.ENV))
        if pid is not None:
            self._rescue = (pid, os.getpid())
            import atexit

            atexit.register(self._dismiss_rescue)  # leaving through Python: the tap forwards its own bytes

    def _start_tail(self) -> None:
        """Keep the tail of our fd 2 (the ranks' stderr passes through it) on disk too, for the watcher that reports
        if this runner is killed (Lightning's observer SIGKILLs rank 0 with the rest). Only then: it costs ~0.2 us
        per chunk on the tap's thread; what was written before is copied from the tap's tail in memory."""
        from cudaassert_ipy.capture import rescue

        if self.tap is None or self.ring_folder is None or self._tail is not None:
            return
        try:
            self._tail = rescue.TailFile(os.path.join(self.ring_folder, rescue.TAIL_NAME))
        except (OSError, ValueError):
            return
        self.tap.taps[0].set_mirror(self._tail.write, self._tail.size)  # taps[0]: fd 2

    def _dismiss_rescue(self) -> None:
        started, self._rescue = self._rescue, None
        if started is not None and started[1] == os.getpid():  # never from a forked child: the helper is its parent's
            from cudaassert_ipy.capture import rescue

            rescue.dismiss(started[0])

    def stop(self) -> None:
        tap, self.tap = self.tap, None
        if tap is not None:
            tap.stop()
        self._dismiss_rescue()
        stop_bookmark, self._stop_bookmark = self._stop_bookmark, None
        if stop_bookmark is not None:
            stop_bookmark()
        if self.bookmark is not None:
            self.bookmark.unpatch()
        close_ring, self._close_ring = self._close_ring, None
        if close_ring is not None:
            close_ring()
        tail, self._tail = self._tail, None
        if tail is not None:
            tail.close()
        if self.ring_folder is not None:
            from cudaassert_ipy.run import ranks

            ranks.cleanup(self.ring_folder, os.environ)
            self.ring_folder = None

    def _start_bookmark(self, module: types.ModuleType) -> None:
        """Record each DataLoader's last batches, to name the dataset samples behind a failure."""
        from cudaassert_ipy.data.bookmark import Bookmark

        self.bookmark = Bookmark(BOOKMARK_BYTES)
        self.bookmark.patch(module)
        self.bookmark.ring = self._ring()

    def _ring(self) -> Any:
        """A rank under a runner writes its last batches to disk too, for a death without Python (data/ring.py)."""
        from cudaassert_ipy.data import ring

        folder = os.environ.get(ring.ENV)
        if not folder or not os.path.isdir(folder):
            return None

        def opened(written: ring.Ring) -> None:
            import atexit

            atexit.register(written.close)  # leaving through Python: not a silent death
            self._close_ring = written.close
            if self.ring_folder is not None:  # this runner is rank 0 itself (Lightning): its children may kill it
                self._start_tail()

        return ring.LazyRing(folder, opened)  # the rank is read at its first batch (Lightning sets it late)

    def note(self, text: str) -> None:
        if not self.options.quiet:
            print(text, file=sys.stderr, flush=True)

    def handle(self, exc: BaseException, tb: types.TracebackType | None) -> Diagnosis | None:
        """After the traceback is printed: diagnose, report, write torchelastic's file. Never raises."""
        try:
            return self._handle(exc, tb)
        except Exception as failure:  # our failure must not cost the user their traceback or exit code
            print(DIAGNOSIS_FAILED.format(prefix=PREFIX, error=error_line(failure)), file=sys.stderr, flush=True)
            return None

    def _handle(self, exc: BaseException, tb: types.TracebackType | None) -> Diagnosis | None:
        from cudaassert_ipy.diagnose.pipeline import read_failure

        text = ""
        if self.tap is not None:
            self.tap.drain()
            text = self.tap.text_since((0,) * len(self.tap.taps))
        detection, sites = read_failure(exc, text)
        if detection is None:
            return None
        diagnosis = self._diagnose(detection, sites, text)
        self.diagnosis = diagnosis
        self.report_text = self.render(diagnosis)
        short = f"{PREFIX} {diagnosis.headline}\nFix: {diagnosis.fix}"
        print(short if self.options.quiet else self.report_text, file=sys.stderr, flush=True)
        self._patch(diagnosis, detection)
        error_file = os.environ.get("TORCHELASTIC_ERROR_FILE")
        if error_file:
            import traceback

            from cudaassert_ipy.run import outputs

            callstack = "".join(traceback.format_exception(type(exc), exc, tb))
            failed = outputs.write_error_file(error_file, outputs.error_file_data(exc, callstack, self.report_text))
            if failed:
                print(failed, file=sys.stderr, flush=True)
        return diagnosis

    def report_dead_ranks(self, exc: BaseException | None) -> None:
        """After a launcher under this runner failed: the ranks that died without Python (run/ranks.py)."""
        if self.ring_folder is None:
            return
        from cudaassert_ipy.run import ranks

        try:
            ranks.wait_for_rescue(self.ring_folder)  # a dead rank's helper forwards its last stderr into our tap
            text = ""
            if self.tap is not None:
                self.tap.drain()
                text = self.tap.text_since((0,) * len(self.tap.taps))
            lines = ranks.summary(self.ring_folder, exc, text)
        except Exception as e:  # the launcher's own error stands without this
            lines = [DIAGNOSIS_FAILED.format(prefix=PREFIX, error=error_line(e))]
        if lines:
            text = "\n".join(lines)
            print(text, file=sys.stderr, flush=True)
            ranks.mark_reported(self.ring_folder)
            self.report_text = f"{self.report_text}\n{text}" if self.report_text else text

    def _diagnose(self, detection: Detection, sites: list[AssertSite], text: str) -> Diagnosis:
        from cudaassert_ipy.diagnose.pipeline import diagnose_failure

        # the script's frame is in the traceback of the error that reached the top (a framework's cleanup may
        # have raised a later one while handling the first: detection.top)
        top = detection.top if detection.top is not None else detection.exception
        user_ns = _script_globals(top.__traceback__, self.user_files)
        self._user_ns = user_ns
        evidence, diagnosis = diagnose_failure(detection, sites, text, "", None, user_ns, self.user_files)
        if self.bookmark is not None:  # the DataLoader's last batches: which dataset samples hold the bad values
            from cudaassert_ipy.data.post_mortem import annotate

            diagnosis, check = annotate(self.bookmark, diagnosis, evidence, user_ns or {})
            failing = check.failing if check is not None else None
            self._loader = failing.loader if failing is not None else None
        if diagnosis.context_dead:
            import dataclasses

            diagnosis = dataclasses.replace(diagnosis, status=DEAD_PROCESS)
        return diagnosis

    def _patch(self, diagnosis: Diagnosis, detection: Detection) -> None:
        """The proposed patch of the user's file, printed as a diff after the report; never costs the report."""
        if diagnosis.culprit is None:
            return
        from cudaassert_ipy.run import patch

        try:
            top = detection.top if detection.top is not None else detection.exception
            sources = patch.user_sources(top.__traceback__, self.user_files)
            if not sources:
                return
            self.fix = fix = patch.propose(diagnosis, sources, self._user_ns, self._loader)
        except Exception as failure:  # the diagnosis above stands without its patch
            print(DIAGNOSIS_FAILED.format(prefix=PREFIX, error=error_line(failure)), file=sys.stderr, flush=True)
            return
        from cudaassert_ipy.view.fix_report import fix_lines

        lines = fix_lines(fix)
        if fix.patch is not None:
            lines.append(patch.apply_fix(fix) if self.options.apply_fix
                         else patch.SHOWN.format(prefix=PREFIX, path=fix.patch.path))
        elif self.options.apply_fix:
            lines.append(patch.apply_fix(fix))
        text = "\n".join(lines)
        if text:
            self.report_text = f"{self.report_text}\n{text}"
            if not self.options.quiet:
                print(text, file=sys.stderr, flush=True)

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

    def finish(self, exit_code: int, exc: BaseException | None = None, rerun: dict[str, Any] | None = None) -> None:
        """The JSON report (when asked for), then the tap stops: every byte reaches the real stderr first."""
        path = self.options.report_json
        if path:
            from cudaassert_ipy.run import outputs

            data = outputs.report_data(self.diagnosis, self.rank, exit_code, self.report_text, exc, rerun)
            if self.fix is not None:
                from cudaassert_ipy.run.patch import fix_data

                data["fix"] = fix_data(self.fix)
            failed = outputs.write_report_json(path, data)
            if failed:
                print(failed, file=sys.stderr, flush=True)
        self.stop()

    def exit_now(self, code: int) -> None:
        """A failed rank leaves at once: its peers would otherwise wait for it in a collective."""
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # a closed stream must not keep the rank alive
                pass
        os._exit(code)


def _script_globals(tb: types.TracebackType | None, user_files: Container[str]) -> dict[str, Any] | None:
    """The script's module globals (its ``<module>`` frame), where the model and data usually live."""
    found = None
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name == "<module>" and code.co_filename in user_files:
            found = tb.tb_frame.f_globals
        tb = tb.tb_next
    return found
