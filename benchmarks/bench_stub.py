"""The resume stub's cost in a kernel that has no plan (not a test): prints medians side by side.

    .venv/bin/python benchmarks/bench_stub.py [--runs 15]

While a plan is pending the stub sits in the profile's startup directory, and every kernel started from that
profile runs it first. Without a plan for that kernel it should cost about a directory listing: it imports
jupyter_core (which a kernel has imported before its startup files run) and nothing of ours. Each run is a fresh
interpreter: the stub alone, after importing jupyter_core as a kernel has, and an empty file (the floor).
Goal: <= 200 ms alone.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cudaassert_ipy.restart.startup_stub import STUB_NAME, STUB_SOURCE  # noqa: E402

PROBE = r"""
import sys, time
if sys.argv[2] == "warm":
    import jupyter_core.paths
t0 = time.perf_counter()
exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), {"get_ipython": lambda: None})
print((time.perf_counter() - t0) * 1000, "cudaassert_ipy" in sys.modules, "torch" in sys.modules)
"""


def run(path: Path, mode: str, env: dict[str, str]) -> float:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(path), mode], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[1:] == ["False", "False"], f"the stub imported our package or torch: {out}"
    return float(out[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as tmp:
        stub, empty = Path(tmp) / STUB_NAME, Path(tmp) / "empty.py"
        stub.write_text(STUB_SOURCE)
        empty.write_text("")
        env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(Path(tmp) / "runtime"), "PYTHONPATH": str(ROOT)}
        rows: dict[str, list[float]] = {"stub alone": [], "stub after jupyter_core": [], "empty file": []}
        for _ in range(runs):  # interleaved, so a load spike hits every row alike
            rows["stub alone"].append(run(stub, "cold", env))
            rows["stub after jupyter_core"].append(run(stub, "warm", env))
            rows["empty file"].append(run(empty, "cold", env))
    for name, times in rows.items():
        print(f"{name:<26} median {statistics.median(times):7.2f} ms   min {min(times):7.2f}   max {max(times):7.2f}")


if __name__ == "__main__":
    main()
