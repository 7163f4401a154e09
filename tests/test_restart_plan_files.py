"""restart/plan_files.py: the resume plan on disk, written, claimed, refused, expired, logged.

Modes, ownership, expiry, bad files, unwritable places. The tests run as root, and root writes into
a chmod-0500 directory anyway, so "read-only" is simulated with a path whose parent is a regular
file (``ENOTDIR`` for everyone, root included).
"""

from __future__ import annotations

import json
import os
import time

import pytest
from helpers.plans import edit, mode_of, plan_for, written

from cudaassert_ipy.restart import plan_files
from cudaassert_ipy.restart.plan import PLAN_VERSION, Mode
from cudaassert_ipy.restart.plan_files import PlanError, claim, pending_keys, write_plan


# -- writing ----------------------------------------------------------------------------------------
def test_a_plan_is_written_0600_in_a_0700_directory_with_its_writer_and_version(plan_dir):
    path = write_plan(plan_for("k1"), plan_dir)
    assert path == plan_dir / "plan-k1.json"
    assert mode_of(plan_dir) == 0o700 and mode_of(path) == 0o600
    plan = json.loads(path.read_text())
    assert plan["writer_pid"] == os.getpid() and plan["version"] == PLAN_VERSION == 2
    assert plan["writer_start"] == plan_files.process_start(os.getpid()) is not None
    assert not [p for p in plan_dir.iterdir() if p.name.endswith(".tmp")]


def test_writing_again_replaces_the_plan_atomically(plan_dir):
    write_plan(plan_for("k1", mode=Mode.DEBUG), plan_dir)
    write_plan(plan_for("k1", mode=Mode.CPU), plan_dir)
    assert json.loads((plan_dir / "plan-k1.json").read_text())["mode"] == "cpu"
    assert sorted(p.name for p in plan_dir.iterdir() if not p.name.startswith(".lock")) == ["plan-k1.json"]


def test_an_unwritable_plan_directory_is_a_clear_error(tmp_path):
    blocker = tmp_path / "runtime"
    blocker.write_text("a file where the runtime directory should be")
    with pytest.raises(PlanError) as e:
        write_plan(plan_for("k1"), blocker / "cudaassert")
    assert str(e.value).startswith(f"[cudaassert] Cannot write the resume plan into {blocker / 'cudaassert'} (")
    assert str(e.value).endswith("). Nothing was restarted.")


def test_a_group_writable_plan_directory_is_not_written_into(plan_dir):
    plan_dir.mkdir(parents=True)
    os.chmod(plan_dir, 0o777)
    with pytest.raises(PlanError, match=r"it is writable by others \(mode 777\)"):
        write_plan(plan_for("k1"), plan_dir)


def test_a_key_that_could_escape_the_directory_is_refused(plan_dir):
    with pytest.raises(PlanError, match=r"bad key '\.\./x'"):
        write_plan(plan_for("../x"), plan_dir)


# -- claiming ---------------------------------------------------------------------------------------
def test_a_plan_is_claimed_once_and_is_gone_afterwards(plan_dir):
    written(plan_dir)
    first = claim("k1", plan_dir)
    assert first.plan is not None and first.plan.cells[0].source == "x = 1" and first.notes == []
    assert claim("k1", plan_dir).plan is None
    assert not list(plan_dir.glob("plan-*.json"))


def test_another_kernels_plan_is_never_taken(plan_dir):
    written(plan_dir, "kernel-a")
    assert claim("kernel-b", plan_dir).plan is None
    assert (plan_dir / "plan-kernel-a.json").exists()
    assert claim("kernel-a", plan_dir).plan is not None


def test_a_plan_whose_writer_still_runs_is_left_for_its_restart(plan_dir):
    write_plan(plan_for("k1"), plan_dir)  # written by this very (live) process
    c = claim("k1", plan_dir)
    assert c.plan is None
    assert c.notes == [
        f"[cudaassert] A resume plan for this kernel was written by process {os.getpid()}, which is "
        "still running; it was left for that restart."
    ]
    assert (plan_dir / "plan-k1.json").exists()


def test_a_reused_pid_with_another_start_time_counts_as_gone(plan_dir):
    path = write_plan(plan_for("k1"), plan_dir)
    edit(path, writer_start="1")  # our pid, but a process that started at another time
    assert claim("k1", plan_dir).plan is not None


def test_an_expired_plan_is_removed_and_replays_nothing(plan_dir):
    path = written(plan_dir, created=time.time() - 7200, expires=time.time() - 3600)
    c = claim("k1", plan_dir)
    assert c.plan is None and not path.exists()
    assert len(c.notes) == 1
    assert c.notes[0].startswith("[cudaassert] A resume plan from ")
    assert " expired at " in c.notes[0]
    assert c.notes[0].endswith(
        "and was removed; nothing was replayed. Run `%cudaassert restart` again if you still want the replay."
    )


def test_a_plan_edited_into_invalid_json_is_kept_aside_not_lost(plan_dir):
    path = written(plan_dir)
    path.write_text('{"key": "k1", "cells": [')
    c = claim("k1", plan_dir)
    kept = plan_dir / "plan-k1.json.invalid"
    assert c.plan is None and not path.exists() and kept.read_text() == '{"key": "k1", "cells": ['
    assert c.notes == [
        f"[cudaassert] The resume plan {path} is not a valid plan (Expecting value: line 1 column 25 "
        f"(char 24)). Nothing was replayed; the file was kept as {kept}."
    ]
    path.write_text("[]")
    assert f"kept as {kept}-" in claim("k1", plan_dir).notes[0]  # a second bad file does not overwrite the first


def test_a_group_writable_plan_is_refused_and_left_alone(plan_dir):
    path = written(plan_dir)
    os.chmod(path, 0o660)
    c = claim("k1", plan_dir)
    assert c.plan is None and path.exists()
    assert c.notes == [
        f"[cudaassert] The resume plan {path} was refused: it is writable by its group (mode 660). "
        "A plan holds code that would run in this kernel, so only a file owned by you and writable by "
        "nobody else is used. Nothing was replayed; the file was left as it is."
    ]


def test_a_plan_owned_by_someone_else_is_refused(plan_dir):
    path = written(plan_dir)
    os.chown(path, 65534, 65534)
    c = claim("k1", plan_dir)
    assert c.plan is None and path.exists()
    assert f"it is owned by uid 65534, not by you (uid {os.getuid()})" in c.notes[0]


def test_a_world_writable_plan_directory_is_refused(plan_dir):
    written(plan_dir)
    os.chmod(plan_dir, 0o777)
    c = claim("k1", plan_dir)
    assert c.plan is None
    assert f"The resume plan {plan_dir} was refused: it is writable by others (mode 777)" in c.notes[0]


def test_a_symlinked_plan_is_refused(plan_dir, tmp_path):
    target = written(plan_dir, "elsewhere")
    os.symlink(target, plan_dir / "plan-k1.json")
    c = claim("k1", plan_dir)
    assert c.plan is None and "was refused: it is a symbolic link, not a file" in c.notes[0]


def test_pending_keys_keep_broken_plans_for_a_while_and_remove_expired_ones(plan_dir):
    written(plan_dir, "a")
    written(plan_dir, "b", expires=time.time() - 1)
    for key in "cd":
        (plan_dir / f"plan-{key}.json").write_text("nope")  # broken by hand: its kernel has to report it
        os.chmod(plan_dir / f"plan-{key}.json", 0o600)
    old = time.time() - plan_files.PLAN_TTL - 1
    os.utime(plan_dir / "plan-d.json", (old, old))
    written(plan_dir, "e")
    os.chmod(plan_dir / "plan-e.json", 0o666)  # not safely ours: never claimable, so not pending
    assert pending_keys(plan_dir) == ["a", "c"]
    assert not (plan_dir / "plan-b.json").exists()
    assert (plan_dir / "plan-c.json").exists() and (plan_dir / "plan-d.json").exists()


def test_the_log_is_private_and_bounded(plan_dir, monkeypatch):
    plan_dir.mkdir(parents=True)
    monkeypatch.setattr(plan_files, "LOG_MAX", 1000)
    for i in range(100):
        plan_files.log(f"line {i:03d} " + "x" * 40, plan_dir)
    log = plan_dir / "resume.log"
    assert mode_of(log) == 0o600
    assert log.stat().st_size < 1200 and "line 099" in log.read_text() and "line 000" not in log.read_text()


def test_why_unsafe_is_the_one_trust_test_for_plans_and_kept_variables(tmp_path):
    own = tmp_path / "own"
    own.mkdir(mode=0o700)
    assert plan_files.why_unsafe(os.lstat(own), True) is None
    os.chmod(own, 0o770)
    assert plan_files.why_unsafe(os.lstat(own), True) == "it is writable by its group (mode 770)"
    (tmp_path / "file").write_text("x")
    os.chmod(tmp_path / "file", 0o600)
    assert plan_files.why_unsafe(os.lstat(tmp_path / "file"), True) == "it is not a regular directory"
    assert plan_files.why_unsafe(os.lstat(tmp_path / "file"), False) is None
    (tmp_path / "link").symlink_to(tmp_path / "file")
    assert plan_files.why_unsafe(os.lstat(tmp_path / "link"), False) == "it is a symbolic link, not a file"
