"""What the DataLoader bookmark costs, measured side by side in one run.

    python benchmarks/bench_bookmark.py            # ~2 minutes on 2 CPU cores
    python benchmarks/bench_bookmark.py --quick    # a smoke run

Rows:

* recording cost per batch: a DataLoader over an in-memory TensorDataset (4,096 samples of 3x32x32
  floats and an int64 label), batch 32, with 0 and with 2 (persistent) workers. Blocks of 64 (32 with
  workers) batches alternate without and with the bookmark's class-level patch (the order flips each
  round). The first 16 (8) batches after each switch are not timed: in use the patch is installed
  once, while each switch here frees or starts holding 3 batches' labels, and glibc needs a few
  batches to settle after that (timed right after a switch: ~1.6 page faults more a batch, +4 us).
  The loop holds each batch until the next one arrives, as ``for batch in loader:`` does.
  Each row reports the median wall time per batch both ways and their ratio, the main thread's CPU
  time the bookmark adds per batch (the median over rounds of the difference between a round's
  two blocks, from ``time.thread_time``: the bookmark's work all runs in the main thread, and CPU
  time is not inflated by other processes on a shared machine), that added time as a share of the
  wall time per batch, and the page faults per batch both ways (holding a few label tensors can
  make glibc give heap pages back and fault them in again; each fault costs microseconds here).
  Goal: <= 1.02x and <= 2 us per batch.
* controls, side by side the same way: the floor (the least any record of 3 batches does: a dict
  lookup, a tee step and a deque append, nothing else) for the 0-worker row, and an empty patch
  (only calls through: the measurement's noise) for the 2-worker row
* micro: the same on loaders whose batches cost almost nothing (batch_size=None, blocks of 200): the
  bookmark's own work per batch, undiluted; once for prebuilt (images, labels) tuples (the usual
  case: the kept fields are picked by one C call) and once for an int per batch (walked each time)
* K = gradient accumulation + 2 (the Trainer with gradient_accumulation_steps=2 keeps 4 batches): the
  0-worker row with a bookmark that keeps 4, side by side the same way; goal: as the 3-batch row
* accelerate (when installed): ``Accelerator(cpu=True).prepare(DataLoader(...))``, a ``DataLoaderShard``
  (one batch ahead, ``send_to_device`` per batch), with and without the bookmark, side by side; goal: no
  higher than the plain DataLoader's overhead (the shard's own work per batch dilutes it)
* ring: a rank under a runner also writes each batch's indices to its mmap ring (data/ring.py), for a rank
  that dies without Python: the 0-worker row with the ring on, side by side with the bookmark alone
* post-mortem check of 3 recorded batches of 512 samples (labels 0..9, one bad label): goal <= 20 ms

Not a test: it prints a table and never fails.
"""

from __future__ import annotations

import argparse
import itertools
import operator
import os
import resource
import statistics
import sys
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import torch
import torch.utils.data.dataloader as dl
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run from a checkout

from cudaassert_ipy.data.bookmark import Bookmark
from cudaassert_ipy.data.samples import check_batches
from cudaassert_ipy.data.valid_range import CLASS, ValidRange


class Blocks:
    """Endless batches from one loader, timed in short blocks (a new epoch starts untimed)."""

    def __init__(self, loader: DataLoader, size: int, settle: int = 1) -> None:
        self.loader, self.size, self.settle = loader, size, settle
        self.it = iter(loader)
        self.left = len(loader)

    def time_block(self) -> tuple[float, float, float]:
        """Wall time, this thread's CPU time (it ignores other processes' load) and page faults, per batch."""
        if self.left < self.size + self.settle:
            self.it, self.left = iter(self.loader), len(self.loader)
        it = self.it
        for _ in range(self.settle):  # untimed: after (un)patching, CPython's caches, ours and the heap settle
            batch = next(it)
        self.left -= self.settle
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


class Floor:
    """A control: the least any record of the last 3 batches does (look the iterator up, step a tee of its
    sampler, append indices and the label tensor to a deque), and nothing else. Its cost is the floor for a
    3-batch bookmark; the difference to the bookmark's row is what the bookmark's own design costs."""

    def patch(self, module: Any) -> None:
        base = module._BaseDataLoaderIter
        self.original = original = base.__next__
        states: dict[int, Any] = {}
        label = operator.itemgetter(1)

        def __next__(it: Any) -> Any:
            st = states.get(id(it))
            if st is None:
                it._sampler_iter, copy = itertools.tee(it._sampler_iter)
                st = states[id(it)] = (deque(maxlen=3).append, copy)
            data = original(it)
            st[0]((it._num_yielded, next(st[1]), label(data)))
            return data

        base.__next__ = __next__

    def unpatch(self) -> None:
        if hasattr(self, "original"):
            dl._BaseDataLoaderIter.__next__ = self.original


class Empty:
    """A control: a patch that only calls through. Its row shows the noise of the measurement."""

    def patch(self, module: Any) -> None:
        base = module._BaseDataLoaderIter
        self.original = original = base.__next__
        base.__next__ = lambda it: original(it)

    def unpatch(self) -> None:
        if hasattr(self, "original"):
            dl._BaseDataLoaderIter.__next__ = self.original


def side_by_side(
    make: Callable[[], DataLoader], rounds: int, size: int = 64, settle: int = 16, patch: Callable[[], Any] = Bookmark
) -> tuple[Times, Times]:
    """Per-batch times of short blocks without and with the bookmark (or a control), alternating (order flips
    each round)."""
    off: Times = []
    on: Times = []
    blocks = Blocks(make(), size, settle)
    blocks.time_block()  # warm-up: workers started, first batches cached
    for r in range(rounds):
        for with_bookmark in (False, True) if r % 2 == 0 else (True, False):
            bookmark = patch()
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
    print(
        f"{name:<40} {wall_off * 1e6:9.1f} us {wall_on * 1e6:9.1f} us {wall_on / wall_off:6.3f}x "
        f"{added * 1e6:+8.2f} us {1 + added / wall_off:8.4f}x {faults_off:6.2f} {faults_on:6.2f}"
    )


class Prebuilt(torch.utils.data.Dataset):
    """64 ready (images, labels) batches, served in turn: the loader's own work is almost nothing."""

    def __init__(self) -> None:
        self.batches = [(torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))) for _ in range(64)]

    def __len__(self) -> int:
        return 10**6

    def __getitem__(self, i: int) -> Any:
        return self.batches[i % 64]


def micro(rounds: int) -> None:
    """The patched __next__ on loaders whose batches cost little: the bookmark's own work per batch."""
    prebuilt = DataLoader(Prebuilt(), batch_size=None, collate_fn=lambda batch: batch)
    off, on = side_by_side(lambda: prebuilt, rounds, size=200, settle=1)
    row("micro: prebuilt (images, labels) tuples", off, on)
    ints = DataLoader(list(range(10**6)), batch_size=None)
    off, on = side_by_side(lambda: ints, rounds, size=200, settle=1)
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
        print(
            f"{'post-mortem check, 3 batches x 512 samples':<40} median {statistics.median(times) * 1e3:.2f} ms, "
            f"max {max(times) * 1e3:.2f} ms (goal <= 20 ms)"
        )
    finally:
        bookmark.unpatch()


ROWS = ("plain", "floor", "ga", "ring", "accelerate", "workers", "micro", "check")


def main(argv: Any = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few rounds: a smoke run")
    parser.add_argument("--rounds", type=int, default=0, help="blocks each way per row (default 300; --quick 10)")
    parser.add_argument("--only", default=",".join(ROWS), help=f"comma-separated rows of {','.join(ROWS)}")
    args = parser.parse_args(argv)
    rounds = args.rounds or (10 if args.quick else 300)
    only = set(args.only.split(","))
    torch.set_num_threads(1)
    data = TensorDataset(torch.randn(4096, 3, 32, 32), torch.randint(0, 10, (4096,)))
    print(
        f"torch {torch.__version__}, {os.cpu_count()} CPUs, {rounds} blocks each way per row ({max(rounds // 5, 4)} "
        "with workers); times per batch"
    )
    print(
        f"{'row (per batch)':<40} {'wall without':>12} {'wall with':>12} {'ratio':>7} {'added CPU':>11} "
        f"{'1+CPU/wall':>9} {'faults without/with':>13}"
    )
    plain = lambda: DataLoader(data, batch_size=32, shuffle=True)  # noqa: E731
    if "plain" in only:
        off, on = side_by_side(plain, rounds)
        row("TensorDataset, batch 32, 0 workers", off, on)
    if "floor" in only:
        off, on = side_by_side(plain, rounds, patch=Floor)
        row("  control: floor of a 3-batch record", off, on)
    if "ga" in only:
        off, on = side_by_side(plain, rounds, patch=lambda: Bookmark(keep=2 + 2))
        row("  K = GA + 2 = 4 batches kept", off, on)
    if "ring" in only:
        ring_row(plain, rounds)
    if "accelerate" in only:
        accelerate_rows(data, rounds)
    if "workers" in only:
        with_workers = (
            lambda: DataLoader(data, batch_size=32, shuffle=True, num_workers=2, persistent_workers=True),
            max(rounds // 5, 4),
        )
        off, on = side_by_side(*with_workers, size=32, settle=8)
        row("TensorDataset, batch 32, 2 workers", off, on)
        off, on = side_by_side(*with_workers, size=32, settle=8, patch=Empty)
        row("  control: empty patch (the noise)", off, on)
    if "micro" in only:
        micro(rounds)
    if "check" in only:
        post_mortem(5 if args.quick else 30)


class RingOn:
    """The bookmark with a rank's ring on (the "with" side of the ring row)."""

    def __init__(self, folder: str) -> None:
        from cudaassert_ipy.data.ring import Ring

        self.bookmark = Bookmark()
        self.bookmark.ring = self.ring = Ring(folder, 0, 0)

    def patch(self, module: Any) -> None:
        self.bookmark.patch(module)

    def unpatch(self) -> None:
        self.bookmark.unpatch()
        self.ring.close()


def ring_row(plain: Callable[[], DataLoader], rounds: int) -> None:
    """Bookmark + ring against the bookmark alone: what writing each batch to disk adds."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        both = (Bookmark, lambda: RingOn(folder))
        # side_by_side's "off" side is unpatched: patch the bookmark alone there by hand, the ring on the "on" side
        off: Times = []
        on: Times = []
        blocks = Blocks(plain(), 64, 16)
        blocks.time_block()
        for r in range(rounds):
            for with_ring in (False, True) if r % 2 == 0 else (True, False):
                patch = both[with_ring]()
                patch.patch(dl)
                try:
                    (on if with_ring else off).append(blocks.time_block())
                finally:
                    patch.unpatch()
        row("  ring on (vs the bookmark alone)", off, on)


def accelerate_rows(data: TensorDataset, rounds: int) -> None:
    """A DataLoaderShard (accelerate) beside the plain loader it wraps, each with and without the bookmark."""
    try:
        from accelerate import Accelerator
    except ImportError:
        print(f"{'accelerate DataLoaderShard':<40} not measured: accelerate is not installed here")
        return
    shard = Accelerator(cpu=True).prepare(DataLoader(data, batch_size=32, shuffle=True))
    off, on = side_by_side(lambda: shard, rounds)
    row("accelerate DataLoaderShard, 0 workers", off, on)
    off, on = side_by_side(lambda: DataLoader(data, batch_size=32, shuffle=True), rounds)
    row("  the plain DataLoader, same run", off, on)


if __name__ == "__main__":
    main()
