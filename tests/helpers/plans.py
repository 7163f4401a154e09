"""Resume plans on disk for the restart tests: one to write, a writer that is gone, an edit by hand."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time

from cudaassert_ipy.restart.plan import Mode, PlanCell, ResumePlan
from cudaassert_ipy.restart.plan_files import write_plan


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def plan_for(key: str, **extra) -> ResumePlan:
    now = time.time()
    fields = {
        "mode": Mode.DEBUG,
        "cells": (PlanCell(2, None, "x = 1", 0.1),),
        "env": (("A", "1"),),
        "created": now,
        "expires": now + 60,
        **extra,
    }
    return ResumePlan(key=key, **fields)


def edit(path, **fields) -> None:
    """Change fields of a written plan in place (its mode stays 0600)."""
    plan = json.loads(path.read_text())
    plan.update(fields)
    path.write_text(json.dumps(plan, indent=1))


def written(plan_dir, key="k1", plan=None, **extra):
    """A plan whose writer is gone (as after a restart)."""
    path = write_plan(plan or plan_for(key, **extra), plan_dir)
    edit(path, writer_pid=dead_pid())
    return path


def mode_of(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)
