"""Core figures, measured side by side in one run (not a test): prints a table with goal columns.

    .venv/bin/python benchmarks/bench_core.py [--against OTHER_CHECKOUT] [--rounds N]

1. ``%load_ext cudaassert`` time in a fresh process (torch and ipywidgets must stay unimported), of this checkout
   (not of whatever is installed); with ``--against``, of another checkout too, in turns, and the ratio;
2. idle overhead per trivial cell (hooks + fd tee), with and without the extension, interleaved: in a bare
   in-process InteractiveShell (the harshest baseline, ~80 us a cell) and in real kernels (what a notebook runs);
3. exception -> report with 10,000 assertion lines captured by the tap;
4. exception -> report in a deep framework stack: Lightning's fit fails in training_step on the simulated GPU and
   its real teardown raises a second CUDA error (only where lightning is installed: the frameworks environment).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LOAD_CODE = r"""
import sys, time
from IPython.core.interactiveshell import InteractiveShell
ip = InteractiveShell.instance()
t0, c0 = time.perf_counter(), time.process_time()
ip.run_line_magic('load_ext', 'cudaassert')
dt, cpu = time.perf_counter() - t0, time.process_time() - c0
print(f"{dt*1000:.3f} {cpu*1000:.3f} {'torch' in sys.modules} {'ipywidgets' in sys.modules}")
"""


def bench_load(roots: Sequence[Path] = (ROOT,), n: int = 7) -> list[tuple[float, float, bool]]:
    """Fresh processes, as after `pip install` (which compiles .pyc): bytecode on, one warm-up run first. Wall and
    CPU time: on a loaded machine the wall time waits for other processes, the CPU time does not. Each root's
    package is first on the path (its working directory and PYTHONPATH: an editable install elsewhere is not what is
    measured); several roots run in turns, the order flipped each round, so load on the machine hits each alike."""
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    envs = [dict(base, PYTHONPATH=str(root)) for root in roots]
    for root, env in zip(roots, envs):  # `python -c` puts the working directory first on the path: the root's
        subprocess.run([sys.executable, "-c", LOAD_CODE], capture_output=True, text=True, check=True, env=env, cwd=root)
    times: list[list[float]] = [[] for _ in roots]
    cpus: list[list[float]] = [[] for _ in roots]
    heavy = [False for _ in roots]
    for i in range(n):
        for k in range(len(roots)) if i % 2 == 0 else reversed(range(len(roots))):
            out = subprocess.run(
                [sys.executable, "-c", LOAD_CODE], capture_output=True, text=True, check=True, env=envs[k], cwd=roots[k]
            )
            ms, cpu_ms, torch_loaded, widgets_loaded = out.stdout.split()
            times[k].append(float(ms))
            cpus[k].append(float(cpu_ms))
            heavy[k] |= torch_loaded == "True" or widgets_loaded == "True"
    return [(statistics.median(times[k]), statistics.median(cpus[k]), heavy[k]) for k in range(len(roots))]


IDLE_CODE = r"""
import os, sys, time, statistics
from IPython.core.interactiveshell import InteractiveShell
ip = InteractiveShell.instance()
def batch(n=300):
    t0 = time.perf_counter()
    for _ in range(n):
        ip.run_cell("x = 1", store_history=False)
    return (time.perf_counter() - t0) / n
for _ in range(3): batch()
off, on, ratios, added = [], [], [], []
ip.run_line_magic('load_ext', 'cudaassert')
ip.run_line_magic('unload_ext', 'cudaassert')
for i in range(40):  # interleaved, order alternating, so drift and other load hit both sides alike
    first_on = i % 2
    if first_on:
        ip.run_line_magic('load_ext', 'cudaassert'); b = batch(); ip.run_line_magic('unload_ext', 'cudaassert')
        a = batch()
    else:
        a = batch()
        ip.run_line_magic('load_ext', 'cudaassert'); b = batch(); ip.run_line_magic('unload_ext', 'cudaassert')
    off.append(a); on.append(b); ratios.append(b / a); added.append(b - a)
print(statistics.median(off) * 1e6, statistics.median(on) * 1e6, statistics.median(ratios),
      statistics.median(added) * 1e6)
"""

KERNEL_CODE = r"""
import statistics, time
from helpers.kernels import execute, running_kernel
with running_kernel() as plain, running_kernel() as loaded:
    execute(loaded, "%load_ext cudaassert")
    def batch(kc, n=40):
        t0 = time.perf_counter()
        for _ in range(n):  # execute_request -> idle + execute_reply, as a frontend sees it
            kc.execute_interactive("x = 1", output_hook=lambda msg: None, timeout=30)
        return (time.perf_counter() - t0) / n
    for kc in (plain, loaded):
        batch(kc, 20)
    off, on, ratios, added = [], [], [], []
    for i in range(32):  # interleaved, order alternating
        a, b = (batch(plain), batch(loaded)) if i % 2 else (None, batch(loaded))
        if a is None:
            a = batch(plain)
        off.append(a); on.append(b); ratios.append(b / a); added.append(b - a)
print(statistics.median(off) * 1e6, statistics.median(on) * 1e6, statistics.median(ratios),
      statistics.median(added) * 1e6)
"""

REPORT_CODE = r"""
import os, sys, time
from IPython.core.interactiveshell import InteractiveShell
ip = InteractiveShell.instance()
ip.run_line_magic('load_ext', 'cudaassert')
from cudaassert_ipy.shell import extension
ext = extension.current(ip)
post = ext.watcher.post_run_cell
spent = []
def timed(result=None):
    t0 = time.perf_counter(); post(result); spent.append(time.perf_counter() - t0)
ip.events.unregister('post_run_cell', post)
ip.events.register('post_run_cell', timed)
ip.run_cell("from gpu_double import fail_like_gpu")
for _ in range(5):
    ext.state.reset()
    ip.run_cell("fail_like_gpu('nll_loss_target_out_of_range', threads=1000, blocks=10)")
sites = ext.last.assert_sites
sys.__stdout__.write(f"{sorted(spent[1:])[len(spent[1:]) // 2] * 1000:.2f}|{sites[0]}\n")
"""

# The same, in a deep framework stack: Lightning's real fit loop fails in training_step on the (simulated) GPU,
# its real teardown raises a second CUDA error, and the report walks the chain back to the first (frameworks env).
FRAMEWORK_SETUP = """
import logging, torch, torch.nn as nn, torch.nn.functional as F
import lightning as L
from torch.utils.data import DataLoader, TensorDataset
from gpu_double_async import DeadGpu
logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
class Lit(L.LightningModule):
    def __init__(self, num_classes=3):
        super().__init__()
        self.save_hyperparameters()
        self.body = nn.Sequential(*[nn.Linear(64, 64) for _ in range(12)])
        self.head = nn.Linear(64, num_classes)
    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self.head(self.body(x)), y)
        loss.item()
        return loss
    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters())
loader = DataLoader(TensorDataset(torch.randn(64, 64), torch.arange(64) % 4), batch_size=16)
"""
FRAMEWORK_FIT = """
model = Lit()
trainer = L.Trainer(max_epochs=1, accelerator="cpu", logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False)
with DeadGpu(surfaces={torch.Tensor.item}):
    trainer.fit(model, loader)
"""
FRAMEWORK_CODE = f"""
import sys, time, warnings
from IPython.core.interactiveshell import InteractiveShell
warnings.filterwarnings("ignore")
ip = InteractiveShell.instance()
ip.run_line_magic('load_ext', 'cudaassert')
from cudaassert_ipy.shell import extension
from cudaassert_ipy.diagnose.chain import first_error_frames
from cudaassert_ipy.diagnose.detection import classify
ext = extension.current(ip)
post = ext.watcher.post_run_cell
spent = []
def timed(result=None):
    t0 = time.perf_counter(); post(result); spent.append(time.perf_counter() - t0)
ip.events.unregister('post_run_cell', post)
ip.events.register('post_run_cell', timed)
ip.run_cell({FRAMEWORK_SETUP!r})
for _ in range(6):
    ext.state.reset()
    ip.run_cell({FRAMEWORK_FIT!r})
detection = classify(sys.last_value)
depth = len(first_error_frames(detection))
follow = ext.last.follow_ons[0] if ext.last.follow_ons else "none"
sys.__stdout__.write(f"{{sorted(spent[1:])[len(spent[1:]) // 2] * 1000:.2f}}|{{depth}}|{{follow}}\\n")
"""


def bench_framework(env: dict[str, str]) -> tuple[str, str, str] | None:
    """The deep-stack row, where lightning is installed (the frameworks environment); None elsewhere."""
    import importlib.util

    if importlib.util.find_spec("lightning") is None:
        return None
    out = _last_line(FRAMEWORK_CODE, env)
    ms, depth, follow = out.split("|", 2)
    return ms, depth, follow


def _last_line(code: str, env: dict[str, str]) -> str:
    """The last line a child running ``code`` prints; its stderr (the tee's copy of assertion lines) is dropped."""
    done = subprocess.run(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, check=True, env=env
    )
    return done.stdout.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--against", type=Path, help="another checkout: its %%load_ext too, in turns with this one")
    parser.add_argument("--rounds", type=int, default=7, help="fresh processes per checkout for %%load_ext")
    parser.add_argument("--load-only", action="store_true", help="the %%load_ext rows only")
    args = parser.parse_args()
    loads = bench_load((ROOT, args.against.resolve()) if args.against else (ROOT,), args.rounds)
    load_ms, load_cpu_ms, heavy = loads[0]
    rows: list[tuple[str, str, str, bool | None]] = [
        (
            f"%load_ext cudaassert (fresh process, median of {args.rounds})",
            f"{load_ms:.1f} ms",
            "<= 50 ms",
            load_ms <= 50 and not heavy,
        ),
        (
            "  ... its CPU time (what load on the machine does not inflate)",
            f"{load_cpu_ms:.1f} ms",
            "<= 50 ms",
            load_cpu_ms <= 50,
        ),
        ("  ... imports torch or ipywidgets?", "yes" if heavy else "no", "no", not heavy),
    ]
    if args.against:
        other_ms, other_cpu_ms, _ = loads[1]
        rows += [
            (
                f"  ... {args.against}, in turns with this one",
                f"{other_ms:.1f} ms, CPU {other_cpu_ms:.1f} ms",
                "",
                None,
            ),
            (
                "  ... this / that, wall and CPU",
                f"{load_ms / other_ms:.3f}x, {load_cpu_ms / other_cpu_ms:.3f}x",
                "",
                None,
            ),
        ]
    if not args.load_only:
        rows += other_rows()
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  {'result':<28}  {'goal':<24}  verdict")
    for name, value, goal, ok in rows:
        verdict = "" if ok is None else ("goal met" if ok else "goal MISSED")
        print(f"{name:<{width}}  {value:<28}  {goal:<24}  {verdict}")


def other_rows() -> list[tuple[str, str, str, bool | None]]:
    """Per-cell cost (in-process and in real kernels) and exception -> report, for this checkout."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "tests"), str(ROOT)]))
    off_us, on_us, ratio, added_us = map(
        float,
        subprocess.run(
            [sys.executable, "-c", IDLE_CODE], capture_output=True, text=True, check=True, env=env
        ).stdout.split(),
    )
    k_off, k_on, k_ratio, k_added = map(
        float,
        subprocess.run(
            [sys.executable, "-c", KERNEL_CODE], capture_output=True, text=True, check=True, env=env
        ).stdout.split(),
    )
    # the 10,000 lines go to this child's real stderr too (that is the tee): send them to /dev/null
    out = _last_line(REPORT_CODE, env)
    report_ms, site = out.split("|", 1)
    rows: list[tuple[str, str, str, bool | None]] = [
        ("trivial cell, in-process InteractiveShell, without", f"{off_us:.1f} us", "", None),
        ("trivial cell, in-process InteractiveShell, with (hooks + fd tee)", f"{on_us:.1f} us", "", None),
        (
            "  ratio / added (medians over 40 interleaved rounds)",
            f"{ratio:.3f}x / {added_us:+.1f} us",
            "<= 1.05x and <= 100 us",
            ratio <= 1.05 and added_us <= 100,
        ),
        ("trivial cell in a real kernel (round trip), without", f"{k_off:.0f} us", "", None),
        ("trivial cell in a real kernel (round trip), with", f"{k_on:.0f} us", "", None),
        (
            "  ratio / added (medians over 32 interleaved rounds)",
            f"{k_ratio:.3f}x / {k_added:+.0f} us",
            "<= 1.05x and <= 100 us",
            k_ratio <= 1.05 and k_added <= 100,
        ),
        (
            "exception -> report, 10,000 assertion lines",
            f"{float(report_ms):.1f} ms",
            "<= 50 ms",
            float(report_ms) <= 50,
        ),
        ("  folded into", site, "one site", "10000 threads" in site or "10,000" in site),
    ]
    deep = bench_framework(env)
    if deep is None:
        rows.append(
            ("exception -> report, Lightning teardown chain", "needs lightning (frameworks env)", "<= 50 ms", None)
        )
    else:
        ms, depth, follow = deep
        rows += [
            (
                f"exception -> report, Lightning teardown chain ({depth} frames)",
                f"{float(ms):.1f} ms",
                "<= 50 ms",
                float(ms) <= 50,
            ),
            ("  follow-on line", follow[:40] + "...", "names the teardown", "Lightning's teardown" in follow),
        ]
    return rows


if __name__ == "__main__":
    main()
