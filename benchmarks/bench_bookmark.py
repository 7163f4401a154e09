"""What the DataLoader bookmark costs, measured side by side in one run.

    python benchmarks/bench_bookmark.py            # ~2 minutes on 2 CPU cores
    python benchmarks/bench_bookmark.py --quick    # a smoke run

Rows:

* recording cost per batch: a DataLoader over an in-memory TensorDataset (4,096 samples of 3x32x32
  floats and an int64 label), batch 32, with 0 and with 2 (persistent) workers. Short blocks of 16
  batches alternate without and with the bookmark's class-level patch (the order flips each round;
  the first batch after each switch is not timed: in use the patch is installed once, not per block).
  The loop holds each batch until the next one arrives, as ``for batch in loader:`` does.
  Each row reports the median wall time per batch both ways and their ratio, the main thread's CPU
  time the bookmark adds per batch (the median over rounds of the difference between a round's
  two blocks, from ``time.thread_time``: the bookmark's work all runs in the main thread, and CPU
  time is not inflated by other processes on a shared machine), that added time as a share of the
  wall time per batch, and the page faults per batch both ways (holding a few label tensors can
  make glibc give heap pages back and fault them in again; each fault costs microseconds here).
  Goal: <= 1.02x and <= 2 us per batch.
* micro: the same on a loader whose batches cost almost nothing (a list dataset, batch_size=None,
  blocks of 200): the bookmark's own work per batch, undiluted
* post-mortem check of 3 recorded batches of 512 samples (labels 0..9, one bad label): goal <= 20 ms

Not a test: it prints a table and never fails.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from typing import Any, Callable

import torch
import torch.utils.data.dataloader as dl
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run from a checkout

from cudaassert_ipy.data.bookmark import Bookmark
from cudaassert_ipy.data.samples import check_batches
from cudaassert_ipy.data.valid_range import CLASS, ValidRange


class Blocks:
    """Endless batches from one loader, timed in short blocks (a new epoch starts untimed)."""

    def __init__(self, loader: DataLoader, size: int) -> None:
        self.loader, self.size = loader, size
        self.it = iter(loader)
        self.left = len(loader)

    def time_block(self) -> tuple[float, float, float]:
        """Wall time, this thread's CPU time (it ignores other processes' load) and page faults, per batch."""
        if self.left < self.size + 1:
            self.it, self.left = iter(self.loader), len(self.loader)
        it = self.it
        batch = next(it)  # untimed: the first call after (un)patching the class re-warms CPython's caches and ours
        self.left -= 1
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        start, cpu = time.perf_counter(), time.thread_time()
        for _ in range(self.size):
            batch = next(it)  # held until the next one arrives, as a for loop holds it
        wall, cpu = time.perf_counter() - start, time.thread_time() - cpu
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
        self.left -= self.size
        del batch
        return wall / self.size, cpu / self.size, faults / self.size


Times = list[tuple[float, float, float]]


def side_by_side(make: Callable[[], DataLoader], rounds: int, size: int = 16) -> tuple[Times, Times]:
    """Per-batch times of short blocks without and with the bookmark, alternating (order flips each round)."""
    off: Times = []
    on: Times = []
    blocks = Blocks(make(), size)
    blocks.time_block()  # warm-up: workers started, first batches cached
    for r in range(rounds):
        for with_bookmark in ((False, True) if r % 2 == 0 else (True, False)):
            bookmark = Bookmark()
            if with_bookmark:
                bookmark.patch(dl)
            try:
                (on if with_bookmark else off).append(blocks.time_block())
            finally:
                bookmark.unpatch()
    return off, on


def row(name: str, off: Times, on: Times) -> None:
    """Wall medians and their ratio; the main thread's CPU time added per batch (median of each round's
    difference), and that as a share of the wall time per batch (the figure a loaded shared machine disturbs
    least); page faults per batch without and with."""
    wall_off, wall_on = (statistics.median(t[0] for t in xs) for xs in (off, on))
    added = statistics.median(b[1] - a[1] for a, b in zip(off, on))
    faults_off, faults_on = (statistics.fmean(t[2] for t in xs) for xs in (off, on))
    print(f"{name:<40} {wall_off * 1e6:9.1f} us {wall_on * 1e6:9.1f} us {wall_on / wall_off:6.3f}x "
          f"{added * 1e6:+8.2f} us {1 + added / wall_off:8.4f}x {faults_off:6.2f} {faults_on:6.2f}")


def micro(rounds: int) -> None:
    """The patched __next__ on a loader whose batches cost little: the bookmark's own work per batch."""
    loader = DataLoader(list(range(10**6)), batch_size=None)
    off, on = side_by_side(lambda: loader, rounds, size=200)
    row("micro: batch_size=None (an int per batch)", off, on)


def post_mortem(repeats: int) -> None:
    bookmark = Bookmark()
    bookmark.patch(dl)
    try:
        labels = torch.randint(0, 10, (4096,))
        labels[3 * 512 + 17] = 10
        loader = DataLoader(TensorDataset(torch.randn(4096, 3, 32, 32), labels), batch_size=512)
        for i, _ in enumerate(loader):
            if i == 3:
                break
        records = bookmark.records({id(loader.batch_sampler): "train_loader"})
        rng = ValidRange(CLASS, 0, 10, -100, "bench")
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            check = check_batches(records, rng)
            times.append(time.perf_counter() - start)
        assert [s.dataset_index for s in check.samples] == [3 * 512 + 17], check.lines
        print(f"{'post-mortem check, 3 batches x 512 samples':<40} median {statistics.median(times) * 1e3:.2f} ms, "
              f"max {max(times) * 1e3:.2f} ms (goal <= 20 ms)")
    finally:
        bookmark.unpatch()


def main(argv: Any = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few rounds: a smoke run")
    args = parser.parse_args(argv)
    rounds = 10 if args.quick else 200
    torch.set_num_threads(1)
    data = TensorDataset(torch.randn(4096, 3, 32, 32), torch.randint(0, 10, (4096,)))
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, {rounds} blocks each way per row; times per batch")
    print(f"{'row (per batch)':<40} {'wall without':>12} {'wall with':>12} {'ratio':>7} {'added CPU':>11} "
          f"{'1+CPU/wall':>9} {'faults without/with':>13}")
    off, on = side_by_side(lambda: DataLoader(data, batch_size=32, shuffle=True), rounds)
    row("TensorDataset, batch 32, 0 workers", off, on)
    off, on = side_by_side(lambda: DataLoader(data, batch_size=32, shuffle=True, num_workers=2,
                                              persistent_workers=True), rounds)
    row("TensorDataset, batch 32, 2 workers", off, on)
    micro(rounds)
    post_mortem(5 if args.quick else 30)


if __name__ == "__main__":
    main()
