"""The rescue helper's cost (capture/rescue.py), measured side by side with another checkout; prints one table.

    .venv/bin/python benchmarks/bench_rescue.py --baseline /path/to/checkout/without/it [--runs 20]

Interleaved, medians, each run a fresh process (bytecode cached outside the tree):
1. start-up: a trivial script under ``python -m cudaassert_ipy`` (the helper is spawned, not waited for; the time
   includes waiting for stderr's EOF, which the helper holds until the runner is gone), next to plain ``python``;
2. per line: 100,000 lines of 80 bytes, one ``os.write(2, ...)`` each, through the runner's tap to a pipe that is
   read, in ns per line, after 0.3 s (the tap's hot path gained one attribute test per chunk; the mirror to disk
   runs only in a runner that is itself rank 0 of Lightning's launcher);
3. a death: 512 KiB written to fd 2 and ``abort()``: how many bytes reached the runner's stderr (baseline: what the
   reader thread forwarded before the process died; with the helper: all).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CACHE = tempfile.mkdtemp(prefix="bench-rescue-pycache-")
LINES = """
import os, time
line = b"x" * 79 + b"\\n"
time.sleep(0.3)  # steady state: the helper's own start-up (~15 ms of CPU, in parallel) is over
t = time.perf_counter()
for _ in range(100_000):
    os.write(2, line)
os.write(1, repr(time.perf_counter() - t).encode())
"""
DIE = "import os\nos.write(2, bytes(range(256)) * 2048)\nos.abort()\n"


def env(root: Path, tmp: Path) -> dict[str, str]:
    """Bytecode cached outside the tree; temporary folders in ours (a baseline's aborted runner leaves its own)."""
    e = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    e["TMPDIR"] = str(tmp)
    e["PYTHONPYCACHEPREFIX"] = CACHE
    e["PYTHONPATH"] = str(root)
    return e


def runner(root: Path, work: Path, script: str, **kw: Any) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "cudaassert_ipy", script], cwd=work, env=env(root, work), **kw)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", required=True, help="a checkout without the rescue helper (e.g. main before it)")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    forms = {"baseline": Path(args.baseline).resolve(), "this tree": ROOT}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "nop.py").write_text("pass\n")
        (work / "lines.py").write_text(LINES)
        (work / "die.py").write_text(DIE)
        start: dict[str, list[float]] = {"plain": [], **{k: [] for k in forms}}
        per_line: dict[str, list[float]] = {k: [] for k in forms}
        rescued: dict[str, list[int]] = {k: [] for k in forms}
        for _ in range(3):  # warm caches
            for root in forms.values():
                runner(root, work, "nop.py", check=True)
        for _ in range(args.runs):
            t = time.perf_counter()
            subprocess.run([sys.executable, "nop.py"], cwd=work, env=env(ROOT, work), capture_output=True, check=True)
            start["plain"].append(time.perf_counter() - t)
            for name, root in forms.items():
                t = time.perf_counter()
                runner(root, work, "nop.py", capture_output=True, check=True)
                start[name].append(time.perf_counter() - t)
        for _ in range(max(3, args.runs // 4)):
            for name, root in forms.items():
                out = runner(root, work, "lines.py", capture_output=True, check=True)
                per_line[name].append(float(out.stdout) / 100_000)
                died = runner(root, work, "die.py", capture_output=True)
                rescued[name].append(len(died.stderr))
    plain = statistics.median(start["plain"])
    print(f"start-up, trivial script, median of {args.runs} interleaved runs (plain python: {plain * 1000:.1f} ms)")
    for name in forms:
        print(
            f"  {name:10} runner {statistics.median(start[name]) * 1000:7.1f} ms "
            f"(overhead {(statistics.median(start[name]) - plain) * 1000:+.1f} ms)"
        )
    print("per line, 100,000 os.write(2) of 80 bytes through the tap, median")
    for name in forms:
        print(f"  {name:10} {statistics.median(per_line[name]) * 1e9:7.0f} ns/line")
    print("abort() right after 524,288 bytes to fd 2: bytes that reached stderr, per run")
    for name in forms:
        print(f"  {name:10} {rescued[name]}")


if __name__ == "__main__":
    main()
