"""atomic_file.write_atomic: readers see the old file or the new one, with the mode asked for, and nothing is left
behind when the write fails."""

from __future__ import annotations

import os
import stat

import pytest

from cudaassert_ipy.base.atomic_file import write_atomic


def test_the_file_is_replaced_whole_with_the_mode_asked_for(tmp_path):
    path = tmp_path / "plan.json"
    path.write_text("old")
    assert write_atomic(path, '{"new": 1}') == path
    assert path.read_text() == '{"new": 1}'
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    write_atomic(path, b"\x00bytes", mode=0o644)
    assert path.read_bytes() == b"\x00bytes" and stat.S_IMODE(path.stat().st_mode) == 0o644 & ~_umask()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json"]  # no temporary file left


def test_a_link_planted_at_the_temporary_name_is_replaced_not_followed(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("untouched")
    path = tmp_path / "plan.json"
    (tmp_path / f".plan.json.{os.getpid()}.tmp").symlink_to(target)
    write_atomic(path, "new")
    assert path.read_text() == "new" and target.read_text() == "untouched"
    assert not path.is_symlink()


def test_a_failed_replace_leaves_what_was_there_and_no_temporary_file(tmp_path):
    taken = tmp_path / "report.json"
    taken.mkdir()  # os.replace cannot put a file over a directory: the last step fails, for root too
    (taken / "inside").write_text("kept")
    with pytest.raises(IsADirectoryError):
        write_atomic(taken, "new")
    assert (taken / "inside").read_text() == "kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
