"""restart/keep/restore.py: the saved values are read only by their owner, for this restart, before they expire.

Anything not safely ours (another key or stamp, another owner, a group-writable directory, a link, expired)
is refused with one note and the kept cells replay; a value that fails to load replays only its cell.
"""

from __future__ import annotations

import os
import sys
import time

from keep_cells import STAMP, restore_all, run_cells

from cudaassert_ipy.restart import keep
from cudaassert_ipy.restart.keep.result import VALUES


def test_only_the_same_key_and_restart_stamp_restore_and_a_wrong_stamp_removes_the_values(tmp_path):
    ns, history = run_cells(("x = 1", True))
    keep.save("kernel-a", STAMP, history, ns, directory=tmp_path)
    other, outcomes, note = restore_all(tmp_path, history, key="kernel-b")
    assert outcomes == {} and note is None and "x" in other  # replayed: kernel b never sees a's values
    assert keep.keep_dir("kernel-a", tmp_path).exists()
    _, outcomes, note = restore_all(tmp_path, history, key="kernel-a", stamp=STAMP + 1)
    assert outcomes == {}
    assert note == (
        f"[cudaassert] The kept values in {keep.keep_dir('kernel-a', tmp_path)} were refused: they "
        "were saved for another restart. Nothing was restored from them; the kept cells replay instead."
    )
    assert not keep.keep_dir("kernel-a", tmp_path).exists()


def test_values_in_a_directory_another_user_owns_or_can_write_are_refused_and_left_alone(tmp_path):
    ns, history = run_cells(("x = 1", True))
    keep.save("k1", STAMP, history, ns, directory=tmp_path)
    path = keep.keep_dir("k1", tmp_path)
    os.chmod(path, 0o770)
    _, outcomes, note = restore_all(tmp_path, history)
    assert outcomes == {} and note == (
        f"[cudaassert] The kept values in {path} were refused: it is writable by its "
        "group (mode 770). Nothing was restored from them; the kept cells replay "
        "instead."
    )
    assert path.exists()
    if os.getuid() == 0:  # as root a real other owner can be made
        os.chmod(path, 0o700)
        os.chown(path, 12345, 12345)
        _, outcomes, note = restore_all(tmp_path, history)
        assert outcomes == {} and "it is owned by uid 12345, not by you (uid 0)" in note and path.exists()


def test_a_values_file_replaced_by_a_link_is_refused(tmp_path):
    ns, history = run_cells(("x = 1", True))
    keep.save("k1", STAMP, history, ns, directory=tmp_path)
    values = keep.keep_dir("k1", tmp_path) / VALUES
    target = tmp_path / "elsewhere.pickle"
    values.rename(target)
    values.symlink_to(target)
    _, outcomes, note = restore_all(tmp_path, history)
    assert outcomes == {} and note is not None and "were refused: OSError: [Errno 40]" in note


def test_expired_values_are_swept_and_never_restored(tmp_path):
    ns, history = run_cells(("x = 1", True))
    keep.save("k1", STAMP, history, ns, directory=tmp_path, expires=time.time() - 1)
    _, outcomes, note = restore_all(tmp_path, history)
    assert outcomes == {} and note is not None and "they have expired" in note
    keep.save("k2", STAMP, history, ns, directory=tmp_path, expires=time.time() + 60)
    assert keep.sweep(tmp_path) == []
    assert keep.sweep(tmp_path, now=time.time() + 120) == [keep.keep_dir("k2", tmp_path)]


def test_a_value_that_fails_to_load_replays_its_cell_and_the_others_still_restore(tmp_path):
    mod = tmp_path / "mods"
    mod.mkdir()
    (mod / "gone_mod.py").write_text("class Thing:\n    pass\n")
    sys.path.insert(0, str(mod))
    try:
        ns, history = run_cells(("a = 1", True), ("import gone_mod\nthing = gone_mod.Thing()", True), ("b = 2", True))
        keep.save("k1", STAMP, history, ns, directory=tmp_path)
    finally:
        sys.path.remove(str(mod))
        sys.modules.pop("gone_mod", None)
    (mod / "gone_mod.py").unlink()
    with keep.opened("k1", STAMP, {"__name__": "__main__"}, tmp_path) as r:
        got = [r.restore(c.number, c.cell_id, c.source) for c in history]
    assert [g.kept for g in got] == [True, False, True]
    assert (
        got[1].reason == "`gone_mod` could not be loaded in this kernel (ModuleNotFoundError: No module named "
        "'gone_mod')"
    )
