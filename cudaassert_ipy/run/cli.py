"""``python -m cudaassert_ipy [options] train.py ARGS`` / ``-m module ARGS``, and the ``cudaassert-run`` script.

Options come before the script; everything after the script (or ``-m module``) is the script's own.
The script runs in this process as ``python train.py`` would; see ``session``, ``target`` and ``guard``.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from cudaassert_ipy.run.options import RERUN_ENV, RunOptions
from cudaassert_ipy.run.session import run_here
from cudaassert_ipy.run.target import Target

if TYPE_CHECKING:
    import argparse

__all__ = ["USAGE_NO_TARGET", "build_parser", "console", "main", "parse"]

USAGE_NO_TARGET = "{prog}: error: no script to run; give a script (train.py ARGS...) or -m module ARGS..."
_VALUED = ("--report-json",)

DESCRIPTION = """\
Run a training script as `python train.py ARGS` would (same sys.argv, __main__, exit code, signals,
stdin), and explain a CUDA device-side assert (or another sticky CUDA error, or its CPU twin) when it
happens: the kernel's assertion line, the cause, the fix, printed to stderr after Python's traceback.
Ordinary exceptions are left exactly as Python prints them."""

EPILOG = """\
torchrun:   torchrun --nproc-per-node 8 -m cudaassert_ipy train.py ARGS
            Each failed rank reports with its RANK, LOCAL_RANK and host, writes the diagnosis into
            torchelastic's error file (TORCHELASTIC_ERROR_FILE) so torchrun's "Root Cause" summary shows
            the cause and fix, and exits at once so the job ends instead of waiting in a collective.
dead ranks: python -m cudaassert_ipy -m torch.distributed.run --nproc-per-node 8 train.py ARGS
            The runner launches the job: a rank killed without Python (the NCCL watchdog's SIGABRT, a
            SIGKILL) gets a summary naming the rank, its signal and the sample indices of its last batches.
            Under Lightning's own DDP launcher (python -m cudaassert_ipy train.py) the summary comes even when
            Lightning's observer kills the runner (rank 0): a small watcher process writes it.
children:   processes the script starts (DDP relaunches, torch.multiprocessing.spawn) are watched too,
            through a start-up hook on their PYTHONPATH (CUDAASSERT_RUN=...); nothing is installed.
no runner:  `import cudaassert_ipy.auto` as the first line of a script does the same (python -c, ipython).
exit code:  the script's own; 1 for an uncaught exception; 2 when the script file does not exist."""


def build_parser(prog: str) -> argparse.ArgumentParser:
    import argparse

    p = argparse.ArgumentParser(
        prog=prog,
        description=DESCRIPTION,
        epilog=EPILOG,
        usage=f"{prog} [options] (script.py | -m module) [args ...]",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--validators",
        action="store_true",
        help="check the inputs of risky calls (cross_entropy, embedding, indexing, ...) before they "
        "launch, so a bad value raises a Python error naming it instead of killing the GPU context "
        "(costs one small reduction and one device-to-host read per checked call)",
    )
    p.add_argument(
        "--blocking",
        action="store_true",
        help="set CUDA_LAUNCH_BLOCKING=1 so the traceback points at the call that failed "
        "(every kernel launch waits for the previous one: slower)",
    )
    p.add_argument(
        "--report-json",
        metavar="PATH",
        help="also write the outcome and the diagnosis as JSON to PATH (for CI and batch jobs)",
    )
    p.add_argument(
        "--quiet",
        action="store_true",
        help="on failure print only the headline and the fix (the JSON and torchrun's error file "
        "keep the full report); no notes",
    )
    p.add_argument(
        "--rerun-on-failure",
        action="store_true",
        help="after a CUDA failure, run the same command once more with CUDA_LAUNCH_BLOCKING=1 and "
        "validators on, and show what the validator found beside the first diagnosis",
    )
    p.add_argument(
        "--apply-fix",
        action="store_true",
        help="write the proposed patch (shown as a diff after the report) into the script or module file "
        "it changes, when the data decides for one and the file is unchanged since the run",
    )
    p.add_argument(
        "--no-children", dest="children", action="store_false", help="do not watch the processes the script starts"
    )
    return p


def parse(argv: list[str], prog: str) -> tuple[RunOptions, Target | None]:
    """Split at the script (or ``-m module``): options before it are ours, the rest are the script's."""
    i, ours = 0, []
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            i += 1
            break
        if arg == "-m" or (arg.startswith("-m") and not arg.startswith("--")):
            break
        if not arg.startswith("-") or arg == "-":
            break
        ours.append(arg)
        if arg in _VALUED:
            ours += argv[i + 1 : i + 2]
            i += 1
        i += 1
    options = RunOptions()
    if ours:  # argparse costs a few ms: only when there are options to read
        ns = build_parser(prog).parse_args(ours)  # --help and bad options exit here, as argparse does
        options = RunOptions(
            ns.validators, ns.blocking, ns.quiet, ns.report_json, ns.rerun_on_failure, ns.children, ns.apply_fix
        )
    rest = argv[i:]
    if not rest:
        return options, None
    if rest[0] == "-m" or (rest[0].startswith("-m") and len(rest[0]) > 2):
        module = rest[0][2:] or (rest[1] if len(rest) > 1 else "")
        args = rest[1:] if rest[0] != "-m" else rest[2:]
        return options, (Target(None, module, tuple(args)) if module else None)
    return options, Target(rest[0], None, tuple(rest[1:]))


def main(argv: list[str], prog: str | None = None) -> int:
    prog = prog or "python -m cudaassert_ipy"
    options, target = parse(argv, prog)
    if target is None:
        print(build_parser(prog).format_usage().rstrip(), file=sys.stderr)
        print(USAGE_NO_TARGET.format(prog=prog), file=sys.stderr)
        return 2
    problem = target.problem(prog)
    if problem is not None:
        print(problem[0], file=sys.stderr)
        return problem[1]
    if options.rerun_on_failure and not os.environ.get(RERUN_ENV):
        from cudaassert_ipy.run.rerun import run_with_rerun

        return run_with_rerun(options, target)
    return run_here(options, target)


def console() -> int:
    """The ``cudaassert-run`` console script."""
    return main(sys.argv[1:], prog="cudaassert-run")
