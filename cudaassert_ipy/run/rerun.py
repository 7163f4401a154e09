"""``--rerun-on-failure``: the script form of Restart & replay.

After a CUDA failure the same command runs once more with ``CUDA_LAUNCH_BLOCKING=1`` and validators on,
so the bad call raises a Python error that names it before its kernel launches; the final report shows
that finding beside the first run's diagnosis.

- One process: the first run happens here; the second is a fresh ``python -m cudaassert_ipy`` (this
  process's GPU context is dead), its report read back from a JSON file.
- torchrun: a job is rerun as a whole, and torchrun already does that: with ``--max-restarts 1`` the agent
  restarts every worker after a failure (TORCHELASTIC_RESTART_COUNT=1). The failed rank leaves its first
  diagnosis in a private directory keyed by the agent; the restarted workers see it and turn the checks on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from typing import Any

from cudaassert_ipy.base.atomic_file import write_atomic
from cudaassert_ipy.base.wording import PREFIX
from cudaassert_ipy.diagnose.diagnosis import Diagnosis
from cudaassert_ipy.run.guard import GuardOutcome, exit_now, write_report
from cudaassert_ipy.run.options import CHILD_ENV, RERUN_ENV, RunOptions
from cudaassert_ipy.run.rank import RankInfo
from cudaassert_ipy.run.session import execute
from cudaassert_ipy.run.target import Target

__all__ = ["FINDING", "NO_FINDING", "NO_RESTARTS", "RERUN_BANNER", "run_with_rerun"]

RERUN_BANNER = (
    "{prefix} --rerun-on-failure: running `{target}` again with CUDA_LAUNCH_BLOCKING=1 and validators on, "
    "to stop the bad call before its kernel launches. This run is slower: each kernel launch waits for the "
    "previous one, and each checked call adds one small reduction and one device-to-host read."
)
FINDING = "{prefix} Rerun with CUDA_LAUNCH_BLOCKING=1 and validators: {headline}"
NO_FINDING = (
    "{prefix} Rerun with CUDA_LAUNCH_BLOCKING=1 and validators: {outcome}; the first run's diagnosis above stands."
)
FIRST_RUN = "{prefix} First run: {headline}"
NO_RESTARTS = (
    "{prefix} --rerun-on-failure under torchrun reruns the job through torchrun's own restart: add "
    "--max-restarts 1 to the torchrun command."
)


def run_with_rerun(options: RunOptions, target: Target) -> int:
    rank = RankInfo.from_env()
    if rank.torchrun:
        return _torchrun(options, target, rank)
    first = options._replace(report_json=None)  # the JSON report comes once, after the rerun
    code, outcome = execute(first, target)
    if outcome.diagnosis is None or outcome.diagnosis.kind == "validator":
        _final_json(options, outcome, code, None)
        return code
    print(RERUN_BANNER.format(prefix=PREFIX, target=target.label), file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="cudaassert-rerun-") as tmp:
        report = os.path.join(tmp, "rerun.json")
        flags = ["--blocking", "--validators", "--report-json", report] + (["--quiet"] if options.quiet else [])
        flags += [] if options.children else ["--no-children"]
        where = ["-m", target.module] if target.module else [str(target.path)]
        env = {k: v for k, v in os.environ.items() if k != CHILD_ENV}
        env[RERUN_ENV] = "1"
        second = subprocess.run([sys.executable, "-m", "cudaassert_ipy", *flags, *where, *target.args], env=env)
        data = _read(report)
    summary = combined(outcome.diagnosis, data, second.returncode)
    print(summary, file=sys.stderr, flush=True)
    _final_json(options, outcome, second.returncode, {"exit_code": second.returncode, "report": data})
    return second.returncode


def combined(first: Diagnosis, rerun: dict[str, Any] | None, code: int) -> str:
    """The first diagnosis's headline, then the validator's finding: the call, the bad value, the sample."""
    lines = [FIRST_RUN.format(prefix=PREFIX, headline=first.headline)]
    found = (rerun or {}).get("diagnosis")
    if found and found.get("kind") == "validator":
        lines.append(FINDING.format(prefix=PREFIX, headline=found.get("headline", "")))
        if found.get("specific"):
            lines.append(f"  {found['specific']}")
        lines += [f"  {k}: {v}" for k, v in found.get("facts", [])]
        if found.get("user_line"):
            lines.append(f"  Your code: line {found['user_line'][1]}: {found['user_line'][2]}")
    elif found:
        lines.append(FINDING.format(prefix=PREFIX, headline=found.get("headline", "")))
    else:
        outcome = "it succeeded" if code == 0 else f"no CUDA failure and no validator finding (exit code {code})"
        lines.append(NO_FINDING.format(prefix=PREFIX, outcome=outcome))
    return "\n".join(lines)


def _read(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _final_json(options: RunOptions, outcome: GuardOutcome, code: int, rerun: dict[str, Any] | None) -> None:
    if options.report_json:
        write_report(options.report_json, outcome, code, rerun)


def _state_dir(rank: RankInfo) -> str:
    """Private to this user, one per torchrun agent (the workers' parent, the same for the restarted ones)."""
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", "none").replace(os.sep, "_")
    base = os.path.join(tempfile.gettempdir(), f"cudaassert-run-{os.getuid()}")
    os.makedirs(base, mode=0o700, exist_ok=True)
    return os.path.join(base, f"{run_id}-{os.getppid()}")


def _torchrun(options: RunOptions, target: Target, rank: RankInfo) -> int:
    state = _state_dir(rank)
    restarted = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") or 0) > 0
    firsts = sorted(n for n in os.listdir(state) if n.endswith(".json")) if restarted and os.path.isdir(state) else []
    opts = options
    notes: tuple[str, ...] = ()
    if firsts:
        opts = opts._replace(blocking=True, validators=True)
        if rank.is_zero:
            print(RERUN_BANNER.format(prefix=PREFIX, target=target.label), file=sys.stderr, flush=True)
        first = _read(os.path.join(state, f"rank{rank.rank}.json" if f"rank{rank.rank}.json" in firsts else firsts[0]))
        notes = (FIRST_RUN.format(prefix=PREFIX, headline=first.get("headline", "")),) if first else ()
    code, outcome = execute(opts, target, notes)  # the rerun's report ends with the first run's headline
    if firsts:  # the rerun is the last use of this rank's note; the directory goes with the last note
        for path in (os.path.join(state, f"rank{rank.rank}.json"), state):
            with contextlib.suppress(OSError):
                (os.rmdir if path == state else os.unlink)(path)
    elif outcome.diagnosis is not None and outcome.diagnosis.kind != "validator":
        restarts = int(os.environ.get("TORCHELASTIC_MAX_RESTARTS", "0") or 0)
        if restarts < 1:
            print(NO_RESTARTS.format(prefix=PREFIX), file=sys.stderr, flush=True)
        elif not restarted:  # a note only where a restart will read it
            os.makedirs(state, mode=0o700, exist_ok=True)
            write_atomic(
                os.path.join(state, f"rank{rank.rank}.json"),  # whole or absent for the restarted rank
                json.dumps(dataclasses.asdict(outcome.diagnosis), default=str),
            )
    if outcome.diagnosis is not None:
        exit_now(code)
    return code
