"""A process that dies without Python keeps its output: the bytes still in its tap's pipe reach the terminal anyway.

Real processes: ``python -m cudaassert_ipy script.py`` where the script writes 512 KiB to fd 2 (half the tap's
pipe) and aborts at once, as the C++ runtime does for the NCCL watchdog's exception. The tap's reader thread cannot
have forwarded it all by then; the rescue helper (capture/rescue.py) forwards the rest after the death.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import textwrap
from pathlib import Path

from helpers import kernel_env

SCRIPT = """
import os
data = bytes(range(256)) * 2048  # 512 KiB
os.write(2, data)
os.write(1, b"out-" * 1000)
os.abort()
"""


def test_bytes_in_the_pipe_when_the_process_aborts_reach_stderr_whole_and_in_order(tmp_path: Path) -> None:
    (tmp_path / "die.py").write_text(textwrap.dedent(SCRIPT))
    result = subprocess.run(
        [sys.executable, "-m", "cudaassert_ipy", "die.py"],
        cwd=tmp_path,
        env=kernel_env(TMPDIR=str(tmp_path)),
        capture_output=True,
        timeout=120,
    )
    assert result.returncode == -6
    expected = bytes(range(256)) * 2048
    assert len(result.stderr) == len(expected), len(result.stderr)
    assert hashlib.sha256(result.stderr).digest() == hashlib.sha256(expected).digest()
    assert result.stdout == b"out-" * 1000


def test_a_clean_exit_leaves_no_helper_and_no_extra_output(tmp_path: Path) -> None:
    (tmp_path / "ok.py").write_text("import os\nos.write(2, b'fine\\n')\nprint('done')\n")
    result = subprocess.run(
        [sys.executable, "-m", "cudaassert_ipy", "ok.py"],
        cwd=tmp_path,
        env=kernel_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )  # returns only once the helper let go
    assert (result.returncode, result.stdout, result.stderr) == (0, "done\n", "fine\n")


def test_a_runner_killed_by_sigkill_leaves_no_ring_folder_and_says_nothing_more(tmp_path: Path) -> None:
    (tmp_path / "kill.py").write_text(
        "import os, signal\nos.write(2, b'before\\n')\nos.kill(os.getpid(), signal.SIGKILL)\n"
    )
    folders = tmp_path / "tmp"
    folders.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "cudaassert_ipy", "kill.py"],
        cwd=tmp_path,
        env=kernel_env(TMPDIR=str(folders)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (result.returncode, result.stderr) == (-9, "before\n")  # no rank died: the watcher has nothing to add
    assert not list(folders.glob("cudaassert-ranks-*")), "its watcher removed the folder the runner could not"


def test_the_tail_file_keeps_the_last_bytes_in_order_across_the_wrap(tmp_path: Path) -> None:
    from cudaassert_ipy.capture.rescue import TailFile, read_tail

    tail = TailFile(str(tmp_path / "tail"), size=1000)
    written = b""
    for n in (1, 80, 999, 1000, 1001, 2500, 7, 640, 333):
        data = bytes((n + i) % 251 for i in range(n))
        tail.write(data)
        written += data
        assert read_tail(str(tmp_path / "tail")) == written[-1000:], n
    tail.close()
    assert read_tail(str(tmp_path / "missing")) == b""


def test_the_bare_helper_writes_the_dead_process_s_wait_status_into_the_job_folder(tmp_path: Path) -> None:
    """The helper runs as ``python -I -S capture/rescue.py``, where the package cannot be imported: it loads the job
    folder's names (capture/job_folder.py) by their path to write ``exit-<pid>``, which the runner's summary reads
    for the signal when no launcher reported one."""
    import time

    from cudaassert_ipy.capture import job_folder

    folder = tmp_path / "job"
    folder.mkdir()
    script = textwrap.dedent(f"""
        import os
        from cudaassert_ipy.capture import rescue
        from cudaassert_ipy.capture.fd_tap import TapSet
        taps = TapSet(fds=(2,))
        taps.start()
        assert rescue.spawn(taps.channels(), {str(folder)!r}) is not None
        os.abort()
        """)
    child = subprocess.Popen([sys.executable, "-c", script], env=kernel_env(), stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while job_folder.read_death(str(folder), child.pid) is None and time.monotonic() < deadline:
            time.sleep(0.05)  # not reaped meanwhile: the helper reads the status of the zombie
        death = job_folder.read_death(str(folder), child.pid)
    finally:
        _, err = child.communicate(timeout=60)
    assert child.returncode == -6, err
    assert death is not None and death[0] == -6, sorted(p.name for p in folder.iterdir())
