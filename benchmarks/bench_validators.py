"""What validators cost: training steps with validators on vs off, measured side by side.

    python benchmarks/bench_validators.py            # ~1 minute on 2 CPU cores
    python benchmarks/bench_validators.py --quick    # a smoke run

Rows:

Each training-step row alternates short blocks with validators off and on (each block starts with
one untimed step; each step is timed alone, CUDA steps synchronised) and reports the ratio of the
medians and of the 10th percentiles (the latter is the least disturbed by other processes on a
shared machine).

* CPU training step, MLP (784-256-128-10, batch 64, Adam): goal <= 1.10x
* CPU training step, tiny transformer LM (Embedding 1000x64, 2 encoder layers, 16x32 tokens, Adam):
  goal <= 1.25x
* the same two steps with every checked call checked before it runs, as on CUDA
  (``ValidatorMode.trust_cpu_kernels = False``; by default an exact CPU kernel checks its own
  inputs and the validator only explains its failures): no goal, it shows what the checks
  themselves cost on CPU
* micro: cost of one intercepted but unchecked call (``torch.add`` on 1-element tensors), of one
  ``F.cross_entropy(64x10)`` both ways, and of each intercepted call inside the real steps
* with a CUDA device: the same steps on the GPU, validators on (goal <= 1.5x) and, in a child
  process, with ``CUDA_LAUNCH_BLOCKING=1`` (what the restart flow would otherwise use)

Not a test: it prints a table and never fails.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.overrides import _push_mode

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run from a checkout

from cudaassert_ipy.checks import disable_validators, enable_validators, mode
from cudaassert_ipy.checks.mode import ValidatorMode


class checks_first:
    """Inside: every checked call is checked before it runs, as on CUDA."""

    def __enter__(self) -> None:
        ValidatorMode.trust_cpu_kernels = False

    def __exit__(self, *exc: object) -> None:
        ValidatorMode.trust_cpu_kernels = True


Step = Callable[[], Any]


# ---------------------------------------------------------------- models
def mlp_step(device: str) -> Step:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(64, 784, device=device)
    y = torch.randint(0, 10, (64,), device=device)

    def step() -> Any:
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 1000, dim: int = 64) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        layer = nn.TransformerEncoderLayer(dim, 4, 128, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(dim, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.embed(ids)))


def lm_step(device: str) -> Step:
    torch.manual_seed(0)
    model = TinyLM().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    ids = torch.randint(0, 1000, (16, 32), device=device)
    labels = ids.roll(-1, 1)

    def step() -> Any:
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(ids).reshape(-1, 1000), labels.reshape(-1))
        loss.backward()
        opt.step()
        return loss

    return step


# ---------------------------------------------------------------- timing
def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def block_ms(step: Step, n: int, device: str, validated: bool) -> list[float]:
    """ms per step for ``n`` steps after one untimed step (each step synchronised on CUDA)."""
    if validated:
        enable_validators()
    try:
        step()
        _sync(device)
        times = []
        for _ in range(n):
            start = time.perf_counter()
            step()
            _sync(device)
            times.append(1000 * (time.perf_counter() - start))
    finally:
        if validated:
            disable_validators()
    return times


def side_by_side(step: Step, device: str, rounds: int, steps: int) -> tuple[list[float], list[float]]:
    """(off, on) step times in ms: short blocks of each condition, alternating (order flipping each
    round), so load from other processes hits both alike."""
    for validated in (False, True):  # warm-up
        block_ms(step, 3, device, validated)
    off: list[float] = []
    on: list[float] = []
    for i in range(rounds):
        for validated in (False, True) if i % 2 == 0 else (True, False):
            (on if validated else off).extend(block_ms(step, steps, device, validated))
    return off, on


class CountingValidators(ValidatorMode):
    """The validators' own mode, counting what it intercepts (optimizer steps excluded, as in use)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.calls += 1
        return super().__torch_function__(func, types, args, kwargs)


def intercepted_per_step(step: Step) -> int:
    counter = CountingValidators()
    _push_mode(counter)
    mode.BYPASS.track(counter)  # as mode.enable() does
    try:
        step()
    finally:
        mode.disable(counter)
    return counter.calls


def micro_us(fn: Callable[[], Any], repeat: int, rounds: int) -> tuple[list[float], list[float]]:
    """(off, on) µs per call, per round, interleaved."""
    off, on = [], []
    for i in range(rounds):
        for validated in (False, True) if i % 2 == 0 else (True, False):
            if validated:
                enable_validators()
            try:
                start = time.perf_counter()
                for _ in range(repeat):
                    fn()
                elapsed = time.perf_counter() - start
            finally:
                if validated:
                    disable_validators()
            (on if validated else off).append(1e6 * elapsed / repeat)
    return off, on


# ---------------------------------------------------------------- GPU with CUDA_LAUNCH_BLOCKING=1
def blocking_child(rounds: int, steps: int) -> None:
    """Runs in a child process started with CUDA_LAUNCH_BLOCKING=1; prints JSON."""
    out = {}
    for name, make in (("mlp", mlp_step), ("lm", lm_step)):
        step = make("cuda")
        block_ms(step, 3, "cuda", False)
        out[name] = statistics.median(t for _ in range(rounds) for t in block_ms(step, steps, "cuda", False))
    print(json.dumps(out))


def blocking_times(rounds: int, steps: int) -> dict[str, float]:
    env = {**os.environ, "CUDA_LAUNCH_BLOCKING": "1"}
    cmd = [sys.executable, os.path.abspath(__file__), "--blocking-child", f"--rounds={rounds}", f"--steps={steps}"]
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        print(result.stderr, file=sys.stderr)
        return {}
    return json.loads(result.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- table
def _p10(values: list[float]) -> float:
    return sorted(values)[len(values) // 10]


def row(name: str, off: list[float], on: list[float], unit: str, goal: float = 0.0) -> tuple[str, float, float]:
    """A table row: medians, their ratio, and the ratio of the 10th percentiles (least disturbed by load)."""
    off_med, on_med = statistics.median(off), statistics.median(on)
    ratio, quiet = on_med / off_med, _p10(on) / _p10(off)
    verdict = ("yes" if ratio <= goal else "no") if goal else ""
    goal_text = f"<= {goal:.2f}x" if goal else ""
    line = (
        f"| {name} | {off_med:.3f} {unit} | {on_med:.3f} {unit} | {ratio:.3f}x | {quiet:.3f}x "
        f"| {goal_text} | {verdict} |"
    )
    return line, off_med, on_med


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--rounds", type=int, default=20, help="micro rows: interleaved rounds; step rows: rounds x steps steps each"
    )
    parser.add_argument("--steps", type=int, default=10, help="timed steps per block")
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: leave as is)")
    parser.add_argument("--quick", action="store_true", help="a fast smoke run")
    parser.add_argument("--gpu-only", action="store_true", help="only the GPU rows (scripts/gpu-tests.sh --device)")
    parser.add_argument("--blocking-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.steps = 3, 5
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.blocking_child:
        blocking_child(args.rounds, args.steps)
        return

    if not args.gpu_only:
        print(
            f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads, "
            f"{args.rounds * args.steps} steps per condition in alternating blocks of {args.steps}; "
            f"micro rows: {args.rounds} interleaved rounds\n"
        )
        print("| what | validators off | validators on | ratio (medians) | ratio (10th percentiles) | goal | met |")
        print("|---|---|---|---|---|---|---|")
        intercepted = {}
        for name, make, goal in (("CPU step, MLP", mlp_step, 1.10), ("CPU step, tiny transformer LM", lm_step, 1.25)):
            step = make("cpu")
            line, off, on = row(name, *side_by_side(step, "cpu", args.rounds, args.steps), "ms", goal)
            intercepted[name] = (intercepted_per_step(step), off, on)
            print(line)
        for name, make in (("CPU step, MLP", mlp_step), ("CPU step, tiny transformer LM", lm_step)):
            step = make("cpu")
            with checks_first():
                print(
                    row(
                        name + ", every call checked first (as on CUDA)",
                        *side_by_side(step, "cpu", args.rounds, args.steps),
                        "ms",
                    )[0]
                )

        a, b = torch.ones(1), torch.ones(1)
        line, add_off, add_on = row(
            "micro: torch.add, intercepted, unchecked (per call)",
            *micro_us(lambda: torch.add(a, b), 20000, args.rounds),
            "µs",
        )
        print(line)
        logits, target = torch.randn(64, 10), torch.randint(0, 10, (64,))
        line, ce_off, ce_on = row(
            "micro: F.cross_entropy(64x10), CPU kernel checks (per call)",
            *micro_us(lambda: F.cross_entropy(logits, target), 2000, args.rounds),
            "µs",
        )
        print(line)
        with checks_first():
            line, first_off, first_on = row(
                "micro: F.cross_entropy(64x10), checked first (per call)",
                *micro_us(lambda: F.cross_entropy(logits, target), 2000, args.rounds),
                "µs",
            )
        print(line)
        print()
        print(
            f"cost per intercepted unchecked call (micro): {add_on - add_off:.2f} µs; per cross_entropy: "
            f"{ce_on - ce_off:.2f} µs left to the CPU kernel, {first_on - first_off:.2f} µs checked first"
        )
        for name, (calls, off, on) in intercepted.items():
            print(
                f"{name}: {calls} intercepted calls per step (optimizer.step runs unchecked), "
                f"{1000 * (on - off) / calls:.2f} µs of added step time per intercepted call"
            )

    print()
    if not torch.cuda.is_available():
        print("no CUDA device: GPU rows skipped")
        return
    print(f"GPU: {torch.cuda.get_device_name()}")
    print(
        "| what | validators off | validators on | ratio (medians) | ratio (10th percentiles) | goal | met "
        "| CUDA_LAUNCH_BLOCKING=1 | ratio |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    blocking = blocking_times(args.rounds, args.steps)
    for key, name, make in (("mlp", "GPU step, MLP", mlp_step), ("lm", "GPU step, tiny transformer LM", lm_step)):
        step = make("cuda")
        line, off, _ = row(name, *side_by_side(step, "cuda", args.rounds, args.steps), "ms", 1.5)
        blocked = blocking.get(key, float("nan"))
        print(line + f" {blocked:.3f} ms | {blocked / off:.2f}x |")


if __name__ == "__main__":
    main()
