"""The script runner, measured side by side in one run (not a test): prints two tables.

    .venv/bin/python benchmarks/bench_run.py [--starts 30] [--jobs 3] [--against OTHER_TREE]

1. Start-up overhead: a trivial script under plain ``python train.py`` and under
   ``python -m cudaassert_ipy train.py``, interleaved, medians and their difference (goal <= 30 ms).
2. A 2-rank torchrun job on CPU (gloo, 127.0.0.1) where rank 1 hits a bad label: seconds from the
   failing call (the script writes a timestamp just before it) to torchrun's exit, and whether
   torchrun's "Root Cause" summary names the cause and the fix; plain torchrun and with the runner,
   interleaved.

``--against OTHER_TREE`` (a ``git worktree`` of another commit): the start-up table runs that tree's runner too,
interleaved with this one's, and prints the two overheads side by side.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
TORCHRUN = str(Path(PY).with_name("torchrun"))
DDP = """
import os, time
import torch, torch.distributed as dist, torch.nn.functional as F
dist.init_process_group("gloo")
rank = dist.get_rank()
model = torch.nn.Linear(4, 5)
labels = torch.tensor([0, 5 if rank == 1 else 1, 1])
dist.barrier()
if rank == 1:
    with open(os.environ["FAIL_STAMP"], "w") as f:
        f.write(repr(time.time()))
loss = F.cross_entropy(model(torch.randn(3, 4)), labels)
loss.backward()
for p in model.parameters():
    dist.all_reduce(p.grad)
"""


CACHE = tempfile.mkdtemp(prefix="bench-run-pycache-")


def env(root: Path = ROOT) -> dict[str, str]:
    """Bytecode cached (outside the tree), as an installed package has it: we time start-up, not compiling."""
    e = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    e["PYTHONPYCACHEPREFIX"] = CACHE
    e["PYTHONPATH"] = os.pathsep.join([str(root), e.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return e


def startup(runs: int, work: Path, against: Path | None = None) -> None:
    script = work / "train.py"
    script.write_text("pass\n")
    plain_cmd, ours_cmd = [PY, str(script)], [PY, "-m", "cudaassert_ipy", str(script)]
    forms = [("plain", plain_cmd, env()), ("runner", ours_cmd, env())]
    if against is not None:
        forms.append(("other", ours_cmd, env(against)))
    times: dict[str, list[float]] = {name: [] for name, _, _ in forms}
    for _ in range(3):  # warm the page cache for each
        for _, cmd, e in forms:
            subprocess.run(cmd, env=e, check=True)
    for _ in range(runs):
        for name, cmd, e in forms:
            t = time.perf_counter()
            subprocess.run(cmd, env=e, check=True)
            times[name].append(time.perf_counter() - t)
    plain, ours = statistics.median(times["plain"]), statistics.median(times["runner"])
    print(f"start-up, trivial script, median of {runs} interleaved runs each")
    print(f"  {'python train.py':34} {plain * 1000:7.1f} ms")
    print(f"  {'python -m cudaassert_ipy train.py':34} {ours * 1000:7.1f} ms")
    print(f"  overhead {1000 * (ours - plain):+.1f} ms (ratio {ours / plain:.2f}x; goal <= 30 ms)")
    if against is not None:
        other = statistics.median(times["other"])
        print(f"  {'the same, ' + str(against):34} {other * 1000:7.1f} ms")
        ratio = (ours - plain) / (other - plain) if other > plain else float("nan")
        print(
            f"  its overhead {1000 * (other - plain):+.1f} ms; this tree's minus its: "
            f"{1000 * (ours - other):+.1f} ms (overheads' ratio {ratio:.2f}x)"
        )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def job(work: Path, runner: bool) -> tuple[float, bool, int]:
    script, stamp = work / "ddp.py", work / "failed_at"
    script.write_text(DDP)
    stamp.unlink(missing_ok=True)
    cmd = [
        TORCHRUN,
        "--nproc-per-node",
        "2",
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(free_port()),
        *(["-m", "cudaassert_ipy"] if runner else []),
        str(script),
    ]
    result = subprocess.run(cmd, env={**env(), "FAIL_STAMP": str(stamp)}, capture_output=True, text=True, timeout=600)
    ended = time.time()
    summary = result.stderr[result.stderr.find("Root Cause (first observed failure):") :]
    named = "class label out of range in cross_entropy" in summary and "Fix:" in summary
    return ended - float(stamp.read_text()), named, result.returncode


def torchrun_jobs(runs: int, work: Path) -> None:
    rows: dict[str, list[tuple[float, bool, int]]] = {"plain torchrun": [], "torchrun -m cudaassert_ipy": []}
    for _ in range(runs):
        rows["plain torchrun"].append(job(work, False))
        rows["torchrun -m cudaassert_ipy"].append(job(work, True))
    print(f"\n2-rank torchrun on CPU (gloo), bad label on rank 1, {runs} interleaved jobs each")
    print(f"  {'':28} {'failure -> exit (median)':>26} {'summary names cause+fix':>24} {'exit code':>10}")
    for name, results in rows.items():
        seconds = statistics.median(r[0] for r in results)
        named = sum(r[1] for r in results)
        codes = sorted({r[2] for r in results})
        print(f"  {name:28} {seconds:>24.2f} s {f'{named}/{len(results)}':>24} {codes!s:>10}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--starts", type=int, default=30, help="interleaved start-up runs of each form")
    parser.add_argument("--jobs", type=int, default=3, help="interleaved torchrun jobs of each form (0: none)")
    parser.add_argument(
        "--against",
        type=Path,
        help="another tree (a git worktree of another commit) whose runner the start-up table times beside this one's",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        startup(args.starts, Path(tmp), args.against)
        if args.jobs:
            torchrun_jobs(args.jobs, Path(tmp))


if __name__ == "__main__":
    main()
