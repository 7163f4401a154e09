"""What the DataLoader bookmark costs, measured side by side in one run.

    python benchmarks/bench_bookmark.py            # ~1 minute on 2 CPU cores
    python benchmarks/bench_bookmark.py --quick    # a smoke run

Rows:

* recording cost per batch: a DataLoader over an in-memory TensorDataset (4,096 samples of 3x32x32
  floats and an int64 label), batch 32, with 0 and with 2 workers. Epochs alternate without and
  with the bookmark's class-level patch; each row reports the ratio of the medians of the per-
  epoch time, of the best epochs, and the microseconds added per batch between the best epochs
  (goal: <= 1.02x and <= 2 us per batch)
* micro: the patched ``__next__`` against the original on a loader whose batches cost almost
  nothing (a plain list dataset, batch 1): the bookmark's own work per batch, undiluted
* post-mortem check of 3 recorded batches of 512 samples (labels 0..9, one bad label): goal <= 20 ms

Not a test: it prints a table and never fails.
"""

from __future__ import annotations

import argparse
import os
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


def epoch_time(loader: DataLoader) -> float:
    start = time.perf_counter()
    for _ in loader:
        pass
    return time.perf_counter() - start


def side_by_side(make: Callable[[], DataLoader], rounds: int) -> tuple[list[float], list[float], int]:
    """Per-epoch times without and with the bookmark, alternating (one untimed warm-up epoch each)."""
    off: list[float] = []
    on: list[float] = []
    loader = make()
    batches = len(loader)
    for r in range(rounds):
        for with_bookmark in ((False, True) if r % 2 == 0 else (True, False)):
            bookmark = Bookmark()
            if with_bookmark:
                bookmark.patch(dl)
            try:
                epoch_time(loader) if r == 0 else None
                (on if with_bookmark else off).append(epoch_time(loader))
            finally:
                bookmark.unpatch()
    return off, on, batches


def row(name: str, off: list[float], on: list[float], batches: int) -> None:
    """Medians, and the best epochs (least disturbed by other processes on a shared machine)."""
    med_off, med_on = statistics.median(off), statistics.median(on)
    added_us = (min(on) - min(off)) / batches * 1e6
    print(f"{name:<46} {med_off / batches * 1e6:9.1f} us {med_on / batches * 1e6:9.1f} us "
          f"{med_on / med_off:6.3f}x {min(on) / min(off):6.3f}x {added_us:+7.2f} us")


def micro(rounds: int) -> None:
    """The patched __next__ alone, timed per call: the bookmark's own work per batch, undiluted."""
    import timeit

    cases = {"micro: next(), batch_size=None (an int)": (list(range(10**7)), None),
             "micro: next(), TensorDataset batch 32": (TensorDataset(torch.randn(10**5, 8),
                                                                     torch.randint(0, 10, (10**5,))), 32)}
    for name, (data, batch_size) in cases.items():
        off: list[float] = []
        on: list[float] = []
        for r in range(rounds):
            for with_bookmark in ((False, True) if r % 2 == 0 else (True, False)):
                bookmark = Bookmark()
                if with_bookmark:
                    bookmark.patch(dl)
                try:
                    it = iter(DataLoader(data, batch_size=batch_size))
                    next(it)
                    (on if with_bookmark else off).append(timeit.timeit(it.__next__, number=500) / 500)
                finally:
                    bookmark.unpatch()
        print(f"{name:<46} {min(off) * 1e6:9.2f} us {min(on) * 1e6:9.2f} us {min(on) / min(off):6.3f}x "
              f"{'(best of ' + str(rounds) + ')':>7} {(min(on) - min(off)) * 1e6:+7.2f} us")


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
        print(f"{'post-mortem check, 3 batches x 512 samples':<46} median {statistics.median(times) * 1e3:.2f} ms, "
              f"max {max(times) * 1e3:.2f} ms (goal <= 20 ms)")
    finally:
        bookmark.unpatch()


def main(argv: Any = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few rounds: a smoke run")
    args = parser.parse_args(argv)
    rounds = 4 if args.quick else 24
    torch.set_num_threads(1)
    data = TensorDataset(torch.randn(4096, 3, 32, 32), torch.randint(0, 10, (4096,)))
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, {rounds} rounds per row")
    print(f"{'row (per batch)':<46} {'without':>12} {'with':>12} {'median':>7} {'best':>7} {'added (best)':>12}")
    off, on, batches = side_by_side(lambda: DataLoader(data, batch_size=32, shuffle=True), rounds)
    row("TensorDataset, batch 32, 0 workers, per batch", off, on, batches)
    off, on, batches = side_by_side(lambda: DataLoader(data, batch_size=32, shuffle=True, num_workers=2,
                                                       persistent_workers=True), max(4, rounds // 3))
    row("TensorDataset, batch 32, 2 workers, per batch", off, on, batches)
    micro(rounds)
    post_mortem(5 if args.quick else 30)


if __name__ == "__main__":
    main()
