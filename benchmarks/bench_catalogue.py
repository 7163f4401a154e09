"""The catalogue's figures, this checkout beside another (say main), measured side by side in one run.

    python benchmarks/bench_catalogue.py [--against PATH] [--runs 5] [--jobs 2]

(1) Census coverage: the line of each entry of tests/data/assert_census.json (every assertion site the
    torch 2.14.1 release prints, its generated and message-less forms, historical and third-party texts)
    fed to ``python -m cudaassert_ipy explain -`` in a fresh process, as a user pastes it. A line is *named*
    when the report's title is a catalogued cause, *internal* when that cause says PyTorch's (or mmcv's) own
    check failed, *not named* when it says "a kernel assertion failed". The goal: every user-reachable site
    named, the internal ones named as internal.
(2) The 10,000-line report: a real IPython shell with the extension loaded, the GPU double writing 10,000
    assertion lines to fd 2 and raising the 2.9+ error; the time of the post-cell hook that reads the lines and
    builds the report (median of ``--runs``, each tree in its own child process, alternating), wall time and the
    main thread's CPU time (which a loaded machine disturbs less). Goal <= 50 ms.
    Beside it, ``explain_text`` of the same 10,000 lines as a saved log, and ``scan()`` alone.

``--against`` runs the same lines and the same children with another checkout's package (its own tests/ for
the GPU double); the census file is always this checkout's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CENSUS = ROOT / "tests" / "data" / "assert_census.json"
GENERIC = "a kernel assertion failed"
INTERNAL = "own internal check failed in "
HEADLINE = "[cudaassert] GPU context dead · "
ERROR = "torch.AcceleratorError: CUDA error: device-side assert triggered"
REACHES = ("user", "compile", "moe", "distributed", "third_party", "internal")

REPORT_CODE = r"""
import statistics, sys, time
from IPython.core.interactiveshell import InteractiveShell
ip = InteractiveShell.instance()
ip.run_line_magic('load_ext', 'cudaassert')
from cudaassert_ipy.shell import extension
ext = extension.current(ip)
post = ext.watcher.post_run_cell
spent, cpu = [], []
def timed(result=None):
    t0, c0 = time.perf_counter(), time.thread_time()
    post(result)
    spent.append(time.perf_counter() - t0); cpu.append(time.thread_time() - c0)
ip.events.unregister('post_run_cell', post)
ip.events.register('post_run_cell', timed)
ip.run_cell("from gpu_double import fail_like_gpu")
for _ in range(6):
    ext.state.reset()
    ip.run_cell("fail_like_gpu('nll_loss_target_out_of_range', threads=1000, blocks=10)")
sites = ext.last.assert_sites
sys.__stdout__.write(f"{statistics.median(spent[1:]) * 1000:.2f}|{statistics.median(cpu[1:]) * 1000:.2f}|"
                     f"{sites[0]}\n")
"""

PARSE_CODE = r"""
import statistics, sys, time
from cudaassert_ipy.capture.assert_lines import scan
from cudaassert_ipy.logs.explain import explain_text
line = ("/__w/pytorch/pytorch/aten/src/ATen/native/cuda/Loss.cu:200: nll_loss_forward_reduce_cuda_kernel_1d: "
        "block: [{b},0,0], thread: [{t},0,0] Assertion `t >= 0 && t < n_classes` failed.")
text = "\n".join(line.format(b=i // 1000, t=i % 1000) for i in range(10_000)) + "\n" + sys.argv[1] + "\n"
def median(fn, n=9):
    out = []
    for _ in range(n):
        t0 = time.perf_counter(); fn(); out.append(time.perf_counter() - t0)
    return statistics.median(out) * 1000
explain_text(text)
print(f"{median(lambda: explain_text(text)):.2f} {median(lambda: scan(text)):.2f}")
"""


def _env(tree: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CUDA_LAUNCH_BLOCKING")}
    env["PYTHONPATH"] = os.pathsep.join([str(tree / "tests"), str(tree)])
    return env


def explain_line(tree: Path, line: str) -> str:
    """The title ``python -m cudaassert_ipy explain -`` gives the line (with the error it comes with)."""
    proc = subprocess.run(
        [sys.executable, "-m", "cudaassert_ipy", "explain", "-"],
        input=f"{line}\n{ERROR}\n",
        capture_output=True,
        text=True,
        env=_env(tree),
        cwd=str(tree),
        timeout=120,
    )
    for out in proc.stdout.splitlines():
        if out.startswith(HEADLINE):
            return out[len(HEADLINE) :]
    return "(no report)"


def kind(title: str) -> str:
    if title.startswith(GENERIC) or title == "(no report)":
        return "not named"
    return "internal" if INTERNAL in title else "named"


def census(tree: Path, entries: list[dict[str, Any]], jobs: int) -> list[tuple[dict[str, Any], str]]:
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        titles = list(pool.map(lambda e: explain_line(tree, e["line"]), entries))
    return list(zip(entries, titles))


def _share(results: list[tuple[dict[str, Any], str]], reach: str | None = None) -> tuple[int, int, int]:
    chosen = [(e, t) for e, t in results if reach is None or e["reach"] == reach]
    named = sum(1 for _, t in chosen if kind(t) == "named")
    internal = sum(1 for _, t in chosen if kind(t) == "internal")
    return named, internal, len(chosen)


def report_ms(tree: Path) -> tuple[float, float, str]:
    """Wall and main-thread CPU milliseconds of the post-cell hook (medians of one child), and the folded site."""
    out = (
        subprocess.run(
            [sys.executable, "-c", REPORT_CODE],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            check=True,
            env=_env(tree),
            cwd=str(tree),
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    ms, cpu_ms, site = out.split("|", 2)
    return float(ms), float(cpu_ms), site


def parse_ms(tree: Path) -> tuple[float, float]:
    out = subprocess.run(
        [sys.executable, "-c", PARSE_CODE, ERROR],
        capture_output=True,
        text=True,
        check=True,
        env=_env(tree),
        cwd=str(tree),
    ).stdout.split()
    return float(out[0]), float(out[1])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--against", type=Path, default=None, help="another checkout to measure beside this one")
    p.add_argument("--runs", type=int, default=5, help="child processes per tree for the 10,000-line report")
    p.add_argument("--jobs", type=int, default=2, help="explain processes at a time for the census")
    args = p.parse_args(argv)
    entries = json.loads(CENSUS.read_text(encoding="utf-8"))
    trees = [("this", ROOT)] + ([("against", args.against.resolve())] if args.against else [])
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")

    print(f"\n(1) census: {len(entries)} lines fed to `python -m cudaassert_ipy explain -`")
    results = {name: census(tree, entries, args.jobs) for name, tree in trees}
    print(
        f"{'reach':12s} {'entries':>7s}" + "".join(f"  {name + ': named / internal / not':>34s}" for name, _ in trees)
    )
    for reach in (*REACHES, None):
        cells = []
        for name, _ in trees:
            named, internal, total = _share(results[name], reach)
            missing = total - named - internal
            cells.append(f"{named:>12d} / {internal:>8d} / {missing:>3d} ({(named + internal) / total:6.1%})")
        total = _share(results[trees[0][0]], reach)[2]
        print(f"{reach or 'all':12s} {total:>7d}" + "".join(f"  {c:>34s}" for c in cells))
    for name, _ in trees:
        unnamed = [e["id"] for e, t in results[name] if kind(t) == "not named"]
        print(f"  {name}: not named: {len(unnamed)}" + (f" (first: {', '.join(unnamed[:6])})" if unnamed else ""))
    wrong = [(e["id"], t) for e, t in results["this"] if e["reach"] == "internal" and kind(t) != "internal"]
    print(f"  this: internal sites not named as internal: {len(wrong)}")

    print(f"\n(2) 10,000 assertion lines (median; {args.runs} child processes per tree, alternating)")
    spent: dict[str, list[float]] = {name: [] for name, _ in trees}
    cpu: dict[str, list[float]] = {name: [] for name, _ in trees}
    site = {}
    for _ in range(args.runs):
        for name, tree in trees:
            ms, cpu_ms, site[name] = report_ms(tree)
            spent[name].append(ms)
            cpu[name].append(cpu_ms)
    parsed = {name: parse_ms(tree) for name, tree in trees}
    print(f"{'measure':44s}" + "".join(f"{name:>12s}" for name, _ in trees) + "   goal")
    print(
        f"{'exception -> report (post-cell hook), ms':44s}"
        + "".join(f"{statistics.median(spent[name]):12.1f}" for name, _ in trees)
        + "   <= 50 ms"
    )
    print(
        f"{'  ... its runs, ms':44s}"
        + "".join(f"{min(spent[name]):6.1f}-{max(spent[name]):<5.1f}" for name, _ in trees)
    )
    print(
        f"{'  ... CPU of the main thread, ms (load-proof)':44s}"
        + "".join(f"{statistics.median(cpu[name]):12.1f}" for name, _ in trees)
    )
    print(
        f"{'explain_text of the same lines as a log, ms':44s}"
        + "".join(f"{parsed[name][0]:12.1f}" for name, _ in trees)
    )
    print(f"{'scan() of the same lines, ms':44s}" + "".join(f"{parsed[name][1]:12.1f}" for name, _ in trees))
    for name, _ in trees:
        print(f"  {name}: folded into {site[name]}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
