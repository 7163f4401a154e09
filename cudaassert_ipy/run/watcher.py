"""The runner's own rescue helper (capture/rescue.py), run as ``python -I -S run/watcher.py``: its summary when the
runner itself is killed.

Why: under Lightning's own DDP launcher (``strategy="ddp"`` without torchrun) rank 0 is the runner's process, and
when a child fails Lightning's ``_ChildProcessObserver`` SIGKILLs every process, the runner included, within
seconds: the runner never prints its dead-rank summary. This helper outlives it; after ``rescue.watch`` forwarded
what the runner's pipes still held, if the runner died by a signal with its ring folder still there, it writes the
summary (run/ranks.py) from the ranks' rings, their helpers' death files and the runner's stderr tail on disk, to
the runner's stderr and its JSON report, and removes the folder (a SIGKILLed runner used to leave it in /tmp).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cudaassert_ipy.capture.rescue import Death

__all__ = ["main", "summarize"]


def summarize(death: Death, report: str | None) -> None:
    """The runner died by a signal before its summary: say what its ranks left on disk, then remove the folder."""
    from cudaassert_ipy.capture import job_folder, rescue
    from cudaassert_ipy.run import ranks

    if death.folder is None:
        return
    part = ranks.DeadRanks(death.folder)
    if part.was_reported():  # the runner printed it, then was killed before it removed the folder
        part.cleanup({})
        return
    code = os.waitstatus_to_exitcode(death.status) if death.status is not None else None
    tail = job_folder.tail_path(part.folder)
    lines = part.summary(None, lambda: (rescue.read_tail(tail) + death.rescued).decode("utf-8", "replace"))
    part.cleanup({})
    if not lines:  # no rank died without Python (a plain script that aborted): its own stderr says it all
        return
    text = "\n".join([ranks.runner_killed(death.pid, code), *lines])
    if death.stderr is not None:
        from cudaassert_ipy.capture.fd_io import write_all

        write_all(death.stderr, (text + "\n").encode())
    if report:
        from cudaassert_ipy.run import outputs
        from cudaassert_ipy.run.rank import RankInfo

        outputs.write_report_json(
            report, outputs.report_data(None, RankInfo(None, None, None, False), code if code is not None else 1, text)
        )  # -9: SIGKILL


def main(argv: list[str]) -> None:
    from cudaassert_ipy.capture import rescue

    death, extra = rescue.watch(argv)
    if death.folder is not None and (death.status is None or os.WIFSIGNALED(death.status)):
        summarize(death, extra[0] if extra and extra[0] else None)


if __name__ == "__main__":  # -I: the package is found beside this file, not on PYTHONPATH
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    main(sys.argv[1:])
