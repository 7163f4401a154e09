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
    result = subprocess.run([sys.executable, "-m", "cudaassert_ipy", "die.py"], cwd=tmp_path, env=kernel_env(),
                            capture_output=True, timeout=120)
    assert result.returncode == -6
    expected = bytes(range(256)) * 2048
    assert len(result.stderr) == len(expected), len(result.stderr)
    assert hashlib.sha256(result.stderr).digest() == hashlib.sha256(expected).digest()
    assert result.stdout == b"out-" * 1000


def test_a_clean_exit_leaves_no_helper_and_no_extra_output(tmp_path: Path) -> None:
    (tmp_path / "ok.py").write_text("import os\nos.write(2, b'fine\\n')\nprint('done')\n")
    result = subprocess.run([sys.executable, "-m", "cudaassert_ipy", "ok.py"], cwd=tmp_path, env=kernel_env(),
                            capture_output=True, text=True, timeout=120)  # returns only once the helper let go
    assert (result.returncode, result.stdout, result.stderr) == (0, "done\n", "fine\n")
