"""One run of the script in this process under a Guard: start, run, report, close; the exit code ``python`` gives.

Why apart from cli.py: the command line and ``--rerun-on-failure`` (rerun.py) both run the script through here,
so neither imports the other.
"""

from __future__ import annotations

import os
import signal
import sys

from cudaassert_ipy.base.passthrough import hide_own_frames
from cudaassert_ipy.run.guard import Guard, GuardOutcome, UserFiles, exit_now
from cudaassert_ipy.run.options import RunOptions
from cudaassert_ipy.run.target import Target, strip_runner_frames

__all__ = ["execute", "run_here"]


def run_here(options: RunOptions, target: Target) -> int:
    """Run the target in this process; a failed rank of a job leaves at once."""
    code, outcome = execute(options, target)
    if outcome.diagnosis is not None and outcome.rank.distributed:
        exit_now(code)
    return code


def execute(options: RunOptions, target: Target, notes: tuple[str, ...] = ()) -> tuple[int, GuardOutcome]:
    """Run the target under a started Guard, report a failure, close the Guard; (exit code, what was reported).

    ``SystemExit`` propagates (Python prints its message and exits with its code); a KeyboardInterrupt
    ends the process by SIGINT as Python does, after its traceback.
    """
    from cudaassert_ipy.run import hook

    hook.uninstall()  # started by our own start-up hook (a child of another runner): this runner takes over
    if options.report_json:
        from cudaassert_ipy.run.outputs import check_report_path

        warning = check_report_path(options.report_json)
        if warning:
            print(warning, file=sys.stderr, flush=True)
    guard = Guard(options, target.label, UserFiles(target.user_origin() or ""), notes, launcher=True)
    guard.start()
    try:
        target.run()
    except SystemExit as e:
        guard.report(e)
        guard.close(_exit_code(e))
        raise
    except BaseException as exc:
        exc.__traceback__ = strip_runner_frames(exc.__traceback__)
        hide_own_frames(exc)  # Python 3.10: a wrapper's frame the bare raise put back
        tb = exc.__traceback__
        sys.excepthook(type(exc), exc, tb)
        outcome = guard.report(exc, tb)
        code = 130 if isinstance(exc, KeyboardInterrupt) else 1
        guard.close(code)
        if code == 130:
            _die_of_sigint()
        return code, outcome
    guard.close(0)
    return 0, guard.outcome


def _exit_code(e: SystemExit) -> int:
    code = e.code
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


def _die_of_sigint() -> None:
    """As Python does after an uncaught KeyboardInterrupt: end by SIGINT, so the shell sees status 130."""
    sys.stdout.flush()
    sys.stderr.flush()
    if hasattr(signal, "SIGINT") and os.name == "posix":
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
