"""``%cudaassert explain --log PATH`` and ``%%cudaassert_explain``: in-process, then in a real kernel."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.kernels import execute, running_kernel, text_of
from IPython.core.error import UsageError
from log_samples import S5, pasted_markdown

from cudaassert_ipy.base.wording import PREFIX
from cudaassert_ipy.logs.cli import MAGIC_NO_FILE, MAGIC_STDIN, PASTED
from cudaassert_ipy.logs.render import NOTHING_FOUND


def test_explain_log_prints_the_logs_explanation(loaded, tmp_path: Path, capsys):
    log = tmp_path / "train.log"
    log.write_text(S5)
    loaded.shell.run_line_magic("cudaassert", f"explain --log {log}")
    out = capsys.readouterr().out
    assert out.startswith(f"{PREFIX} {log}: 1 assertion site, 1 CUDA error; grouped by rank (rank 0).")
    assert "GPU context dead · class label out of range" in out


def test_explain_log_of_a_missing_file_is_a_usage_error_with_the_fix(loaded, tmp_path: Path):
    missing = tmp_path / "nope.log"
    with pytest.raises(UsageError) as e:
        loaded.shell.run_line_magic("cudaassert", f"explain --log {missing}")
    assert str(e.value) == MAGIC_NO_FILE.format(path=missing, reason="No such file or directory")


def test_explain_log_dash_would_hang_on_stdin_so_it_is_refused(loaded):
    with pytest.raises(UsageError) as e:
        loaded.shell.run_line_magic("cudaassert", "explain --log -")
    assert str(e.value) == MAGIC_STDIN


def test_log_goes_only_with_explain(loaded):
    with pytest.raises(UsageError) as e:
        loaded.shell.run_line_magic("cudaassert", "status --log x.log")
    assert str(e.value) == "--log only goes with `%cudaassert explain`, e.g. `%cudaassert explain --log train.log`."


def test_pasted_text_in_the_cell_magic_is_explained_through_markdown_damage(loaded, capsys):
    loaded.shell.run_cell_magic("cudaassert_explain", "", pasted_markdown())
    out = capsys.readouterr().out
    assert out.startswith(f"{PREFIX} {PASTED}: 2 assertion sites, 1 CUDA error.")
    assert "Read through paste damage: link markup around paths (1)" in out


def test_the_cell_magic_with_nothing_in_it_says_what_to_paste(loaded, capsys):
    with pytest.raises(UsageError) as e:
        loaded.shell.run_cell_magic("cudaassert_explain", "", "  \n")
    assert str(e.value) == "Paste the log text into the cell, under the %%cudaassert_explain line."
    with pytest.raises(UsageError) as e:
        loaded.shell.run_cell_magic("cudaassert_explain", "--x", "text")
    assert str(e.value) == "%%cudaassert_explain takes no options: paste the log text into the cell below it."
    loaded.shell.run_cell_magic("cudaassert_explain", "", "all good\n")
    assert capsys.readouterr().out.strip() == NOTHING_FOUND.format(prefix=PREFIX, source=PASTED)


def test_both_magics_work_in_a_real_kernel(tmp_path: Path):
    log = tmp_path / "train.log"
    log.write_text(S5)
    with running_kernel() as kc:
        reply, _ = execute(kc, "%load_ext cudaassert")
        assert reply["status"] == "ok"
        reply, messages = execute(kc, f"%cudaassert explain --log {log}")
        assert reply["status"] == "ok"
        assert "GPU context dead · class label out of range" in text_of(messages)
        reply, messages = execute(kc, "%%cudaassert_explain\n" + S5)
        assert reply["status"] == "ok"
        assert text_of(messages).startswith(f"{PREFIX} {PASTED}: 1 assertion site, 1 CUDA error; grouped by rank")
        reply, _ = execute(kc, "%unload_ext cudaassert")
        assert reply["status"] == "ok"
        reply, _ = execute(kc, "%%cudaassert_explain\n" + S5)
        assert reply["status"] == "error" and reply["ename"] == "UsageError"  # unload removed the cell magic
