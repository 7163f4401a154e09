"""Benchmark the fd tap and the assertion-line parser; prints one table.

    python benchmarks/bench_tap_and_parse.py

(a) a 100 MB burst to fd 2 through the tap, in a child process: arrives whole and in order at the
    original fd (SHA-256 compared), MB/s next to the same burst without the tap;
(b) ``scan()`` of 10,000 assertion lines, median of several runs;
(c) reader-thread latency: from ``os.write(2, ...)`` returning to the bytes being in the tail.
Runs in well under a minute on 2 cores; needs the package installed (``pip install -e .``).
"""

from __future__ import annotations

import ast
import hashlib
import os
import statistics
import subprocess
import sys
import time
from typing import List, Tuple

from cudaassert_ipy.capture.assert_lines import scan

BURST_MB = 100
CHUNK = 1 << 20

BURST_CHILD = """
import hashlib, os, sys, time
from cudaassert_ipy.capture.fd_tap import FdTap
tap = FdTap() if {tapped} else None
if tap: tap.start()
block = bytes(range(256)) * ({chunk} // 256)
t0 = time.perf_counter()
for i in range({n}):
    os.write(2, i.to_bytes(8, "little") + block[8:])
if tap: tap.stop()
os.write(1, repr((time.perf_counter() - t0, tap.dropped_bytes if tap else 0)).encode())
"""

LATENCY_CHILD = """
import os, sys, threading, time
from cudaassert_ipy.capture.fd_tap import FdTap
seen = threading.Event()
class Probe(FdTap):
    def _record(self, data):
        super()._record(data)
        seen.set()
tap = Probe(fds=(2,))
tap.start()
samples = []
for i in range({n}):
    seen.clear()
    t0 = time.perf_counter()
    os.write(2, b"probe\\n")
    seen.wait(1.0)
    samples.append(time.perf_counter() - t0)
    time.sleep(0.001)
tap.stop()
os.write(1, repr(samples).encode())
"""


def expected_digest(n: int) -> str:
    block = bytes(range(256)) * (CHUNK // 256)
    digest = hashlib.sha256()
    for i in range(n):
        digest.update(i.to_bytes(8, "little") + block[8:])
    return digest.hexdigest()


def burst(tapped: bool) -> Tuple[float, str, int, int]:
    """(seconds, sha256 of what reached fd 2, bytes received, bytes the tail dropped)."""
    code = BURST_CHILD.format(tapped=tapped, chunk=CHUNK, n=BURST_MB)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stderr is not None and proc.stdout is not None
    digest, received = hashlib.sha256(), 0
    while True:
        data = proc.stderr.read(CHUNK)
        if not data:
            break
        digest.update(data)
        received += len(data)
    seconds, dropped = ast.literal_eval(proc.stdout.read().decode())
    proc.wait(60)
    return seconds, digest.hexdigest(), received, dropped


def scan_ms(runs: int = 9) -> float:
    line = (
        "../aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: "
        "block: [{b},0,0], thread: [{t},0,0] Assertion `t >= 0 && t < n_classes` failed."
    )
    text = "\n".join(line.format(b=i // 64, t=i % 64) for i in range(10_000)) + "\n"
    times: List[float] = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sites = scan(text)
        times.append(time.perf_counter() - t0)
    assert len(sites) == 1 and sites[0].count == 10_000
    return statistics.median(times) * 1e3


def latency_us(n: int = 2000) -> Tuple[float, float]:
    code = LATENCY_CHILD.format(n=n)
    with open(os.devnull, "wb") as devnull:
        out = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=devnull, timeout=60)
    samples = sorted(ast.literal_eval(out.stdout.decode()))
    return samples[len(samples) // 2] * 1e6, samples[int(len(samples) * 0.99)] * 1e6


def main() -> None:
    rows: List[Tuple[str, str, str, bool]] = []
    want = expected_digest(BURST_MB)
    base_s, base_digest, _, _ = burst(tapped=False)
    tap_s, tap_digest, received, dropped = burst(tapped=True)
    intact = tap_digest == want and received == BURST_MB * CHUNK and base_digest == want
    rows.append(
        (
            f"(a) {BURST_MB} MiB burst to fd 2 via tap: bytes at original fd",
            f"{received:,} B, sha256 {'equal' if intact else 'DIFFERENT'}",
            "whole, in order",
            intact,
        )
    )
    tap_rate, base_rate = BURST_MB / tap_s, BURST_MB / base_s
    rows.append(
        (
            "(a) burst throughput with tap (without)",
            f"{tap_rate:,.0f} MiB/s ({base_rate:,.0f}); ratio {tap_rate / base_rate:.2f}",
            ">= 100 MiB/s",
            tap_rate >= 100,
        )
    )
    kept = 4 << 20
    rows.append(
        ("(a) tail kept the newest 4 MiB; dropped", f"{dropped:,} B", "the rest, counted", dropped == received - kept)
    )
    ms = scan_ms()
    rows.append(("(b) scan() 10,000 assertion lines (median of 9)", f"{ms:.1f} ms", "<= 50 ms", ms <= 50))
    p50, p99 = latency_us()
    rows.append(("(c) reader latency p50", f"{p50:.0f} us", "<= 100 us", p50 <= 100))
    rows.append(("(c) reader latency p99", f"{p99:.0f} us", "<= 1000 us", p99 <= 1000))

    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    header = ("measure", "figure", "goal")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)) + "  result")
    for name, figure, goal, met in rows:
        cells = (name, figure, goal)
        print("  ".join(c.ljust(w) for c, w in zip(cells, widths)) + ("  goal met" if met else "  goal missed"))


if __name__ == "__main__":
    main()
