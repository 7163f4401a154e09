"""Benchmark the log explainer on 100 MB logs; prints one table.

    python benchmarks/bench_explain.py [--mb 100] [--runs 3]

Two logs, written to a temporary directory first:
(a) typical: a torchrun training log (4 ranks' tagged metrics, tqdm bars with no newline), then one rank's
    kernel fails: 64 threads x 32 blocks of untagged assertion lines, its traceback and another rank's NCCL
    watchdog error;
(b) assert-heavy: the same with 60% of the bytes assertion lines from 8 ranks (the worst case: every one of
    them is parsed).
For each: what ``python -m cudaassert_ipy explain LOG`` does (read, decode, explain, render), wall and CPU
seconds (median of the runs) and MB/s, next to merely reading and splitting the same file into lines, measured
side by side in this run. The goal is <= 2 s for 100 MB. Also ``scan()`` of 10,000 assertion lines, the live
per-failure parse. The machine's load average is printed: on a shared machine, wall time follows the load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from cudaassert_ipy.capture.assert_lines import scan
from cudaassert_ipy.logs.cli import read_log
from cudaassert_ipy.logs.explain import explain_text
from cudaassert_ipy.logs.render import render

# Texts as real runs printed them: a torchrun log (modelscope/ms-swift#3267) and the NCCL watchdog's line
# (ProcessGroupNCCL.cpp).
LOSS = (
    "../aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [{b},0,0], "
    "thread: [{t},0,0] Assertion `t >= 0 && t < n_classes` failed.\n"
)
ERROR = (
    "[rank{r}]: RuntimeError: CUDA error: device-side assert triggered\n[rank{r}]: CUDA kernel errors might be "
    "asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n"
)
WATCHDOG = (
    "[rank1]:[E509 16:18:30.801728316 ProcessGroupNCCL.cpp:1895] [PG ID 2 PG GUID 3 Rank 1] Process group "
    "watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered\n"
)
GOAL_S = 2.0


def _training(i: int) -> str:
    if i % 7 == 0:
        return f"Epoch 3:  45%|████▌     | {i % 100}/100 [00:03<00:14,  3.81it/s, loss=0.{i % 997}]\r"
    return (
        f"[rank{i % 4}]:2024-05-01 12:00:{i % 60:02d},123 INFO trainer.py:88 step {i} loss=0.{i % 997} "
        f"lr=3e-4 grad_norm=1.{i % 13} tokens/s=12345\n"
    )


def _kernel(rank_tag: str = "") -> str:
    return "".join(rank_tag + LOSS.format(b=j // 64, t=j % 64) for j in range(64 * 32))


def write_log(path: Path, mb: int, heavy: bool) -> None:
    size, i, parts = 0, 0, []
    while size < mb * 1_000_000:
        i += 1
        chunk = _kernel(f"[rank{i % 8}]:") if heavy and i % 25 == 0 else _training(i)
        parts.append(chunk)
        size += len(chunk.encode())
        if not heavy and i == 400_000:
            parts += [_kernel(), ERROR.format(r=3), WATCHDOG]
    parts.append(ERROR.format(r=3))
    path.write_text("".join(parts), encoding="utf-8")


def _timed(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    walls, cpus = [], []
    for _ in range(runs):
        w, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus)


def _explain(path: Path) -> Callable[[], object]:
    return lambda: render(explain_text(read_log(str(path)), str(path)))


def _read_split(path: Path) -> Callable[[], object]:
    return lambda: read_log(str(path)).splitlines()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=int, default=100)
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args(argv)
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(
        f"{'log':14s} {'MB':>6s} {'explain wall s':>15s} {'cpu s':>7s} {'MB/s':>7s} {'read+split s':>13s} "
        f"{'ratio':>6s}  goal <= {GOAL_S} s"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for name, heavy in (("typical", False), ("assert-heavy", True)):
            path = Path(tmp) / f"{name}.log"
            write_log(path, args.mb, heavy)
            mb = path.stat().st_size / 1e6
            found = explain_text(read_log(str(path))).found
            wall, cpu = _timed(_explain(path), args.runs)
            base, _ = _timed(_read_split(path), args.runs)
            verdict = "met" if wall <= GOAL_S else ("met in CPU time" if cpu <= GOAL_S else "MISSED")
            print(
                f"{name:14s} {mb:6.1f} {wall:15.2f} {cpu:7.2f} {mb / wall:7.1f} {base:13.2f} {wall / base:6.1f}  "
                f"{verdict}{'' if found else ' (nothing found!)'}"
            )
    text = "".join(LOSS.format(b=i // 64, t=i % 64) for i in range(10_000))
    wall, cpu = _timed(lambda: scan(text), 7)
    print(f"scan() of 10,000 assertion lines: {wall * 1e3:.1f} ms wall, {cpu * 1e3:.1f} ms CPU (median of 7)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
