"""``python -m cudaassert_ipy explain LOG`` in real subprocesses: output, exit status, one-line usage errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers import ROOT, kernel_env
from log_samples import S5

from cudaassert_ipy.base.wording import PREFIX
from cudaassert_ipy.logs.cli import IS_DIR, NO_FILE, USAGE
from cudaassert_ipy.logs.render import NOTHING_FOUND


def explain(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cudaassert_ipy", "explain", *args],
        input=stdin,
        capture_output=True,
        cwd=ROOT,
        env=kernel_env(),
        timeout=120,
    )


def test_a_saved_torchrun_log_is_explained_with_status_0(tmp_path: Path):
    log = tmp_path / "train.log"
    log.write_text(S5)
    done = explain(str(log))
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert out.startswith(f"{PREFIX} {log}: 1 assertion site, 1 CUDA error; grouped by rank (rank 0).")
    assert "GPU context dead · class label out of range" in out
    assert done.stderr == b""


def test_a_dash_reads_the_log_from_stdin():
    done = explain("-", stdin=S5.encode())
    assert done.returncode == 0
    assert done.stdout.decode().startswith(f"{PREFIX} stdin: 1 assertion site")


def test_a_log_with_nothing_to_explain_exits_1_and_says_so(tmp_path: Path):
    log = tmp_path / "ok.log"
    log.write_bytes(b"epoch 1 loss 0.3\n\xff\xfe not utf-8 \x00\n")
    done = explain(str(log))
    assert done.returncode == 1
    assert done.stdout.decode().strip() == NOTHING_FOUND.format(prefix=PREFIX, source=log)


def test_a_missing_file_is_one_line_on_stderr_and_status_2(tmp_path: Path):
    missing = tmp_path / "nope.log"
    done = explain(str(missing))
    assert done.returncode == 2 and done.stdout == b""
    expected = NO_FILE.format(prefix=PREFIX, path=missing, reason="No such file or directory")
    assert done.stderr.decode() == expected + "\n"


def test_a_directory_is_one_line_on_stderr_and_status_2(tmp_path: Path):
    done = explain(str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.decode() == IS_DIR.format(prefix=PREFIX, path=tmp_path) + "\n"


def test_no_log_argument_is_a_usage_error_with_the_usage_line():
    done = explain()
    assert done.returncode == 2
    assert done.stderr.decode() == (f"{PREFIX} explain: the following arguments are required: log. Usage: {USAGE}\n")
