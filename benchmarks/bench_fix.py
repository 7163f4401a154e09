"""The fix as a patch, over every failing notebook the project has: proposed, applied, replayed and verified.

    python benchmarks/bench_fix.py [--python .venv/bin/python] [--fw-python .venv-fw/bin/python] [names...]

The failing notebooks: examples/notebooks 01-08 (07 and 08 under --fw-python), and the failing cells the tests
build (the panel's and the restart's stories, the frameworks tests' setups with their failing cell: timm,
transformers, Lightning, Keras, Ultralytics, fastai), read from the test files' own constants so that they
stay the tests' cells. Each runs in a child process (an IPython shell with the extension loaded) up to its
failing cell; then ``%cudaassert fix apply --restart`` (the code path of the Apply, Restart & replay button),
the restart simulated in that process as in tests/helpers/restart_story.py (plan, stub, replay), and the next
cell: the replay runs the patched cells with validators on, then the verification (preflight, one step of the
failing cell on the failing batch, or the whole cell with --full where it reads no DataLoader). Printed:
proposed / abstained (with reasons) / decisions without a default, the share that ran to the end, how many
were wrong (the patch chose another meaning than the notebook's own fix cell or the test's comment says:
EXPECTED), and the time to find and derive a patch over a 200-cell history (the process's CPU time, median of
5 cold runs, caches cleared; and the best wall time: the machine may be shared).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "examples" / "notebooks"
TESTS = ROOT / "tests"
FRAMEWORK_NOTEBOOKS = {"07_hf_trainer", "08_lightning"}
#: what each notebook's own last cell does (the author's meaning): the alternative a right patch picks
EXPECTED = {
    "01_quickstart": "drop_rows",
    "02_kaggle_image_classifier": "widen_head",
    "03_token_ids_vs_vocab": "resize_embeddings",
    "04_bce_without_sigmoid": "bce_logits",
    "05_segmentation_ignore_255": "ignore_index",
    "06_cuda_debug_and_preflight": "drop_rows",
    "07_hf_trainer": "widen_head",
    "08_lightning": "widen_head",
    # the tests' stories: their comments say which meaning (a class the model was not built for, a declared count)
    "test_panel": "widen_head",
    "test_panel_nbclient": "widen_head",
    "restart_story": None,
    "test_fix_undecided": None,
    "test_fix_collate": "shift_labels",
    "fw_timm": "widen_head",
    "fw_transformers": "widen_head",
    "fw_lightning": "widen_head",
    "fw_keras": "widen_head",
    "fw_ultralytics": "widen_head",
    "fw_fastai": "widen_head",
}


def _constant(path: Path, name: str) -> object:
    """A module-level constant of a test file (read, not imported: the test module needs pytest and fixtures)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise LookupError(f"{path.name} has no {name}")


def test_stories() -> dict[str, tuple[list[str], bool]]:
    """name -> (cells, needs the frameworks venv): the failing cells the tests build."""
    t = TESTS
    fw = {
        "fw_timm": ["test_frameworks_timm.py", "train_one_epoch()"],
        "fw_transformers": [
            "test_frameworks_transformers.py",
            "model = make_trainer(OUT).model\nbatch = train_data[:4]",
            "out = model(input_ids=torch.stack([b['input_ids'] for b in batch]),\n"
            "            labels=torch.stack([b['labels'] for b in batch]))",
        ],
        "fw_lightning": ["test_frameworks_lightning.py", "trainer.fit(model, loader)"],
        "fw_keras": ["test_frameworks_keras.py", str(_constant(t / "test_frameworks_keras.py", "FIT"))],
        "fw_ultralytics": ["test_frameworks_ultralytics.py", "train_step(batch)"],
        "fw_fastai": ["test_frameworks_fastai.py", "learn.fit(1)"],
    }
    # the panel tests' training cell is the unconditional GPU double (`fail_like_gpu()`, standing for
    # `F.cross_entropy(model(x), labels)` on a GPU); here it is the input-chosen one (tests/fake_cuda_session.py:
    # the real CPU call, failing as a GPU would only while the labels are out of range), so a fixed cell can run
    step = (
        "from fake_cuda_session import cross_entropy\n"
        "loss = cross_entropy(model(torch.randn(4, 8)), labels)  # F.cross_entropy on a GPU"
    )
    stories: dict[str, tuple[list[str], bool]] = {
        "test_panel": ([str(_constant(t / "test_panel.py", "SETUP")), step], False),
        "test_panel_nbclient": ([str(_constant(t / "test_panel_nbclient.py", "SETUP")), step], False),
        "restart_story": (
            [
                *map(str, _constant(t / "helpers" / "restart_story.py", "SETUP")),  # type: ignore[call-overload]
                str(_constant(t / "helpers" / "restart_story.py", "FAILING")),
            ],
            False,
        ),
        "test_fix_undecided": (
            [
                "import torch, torch.nn as nn, torch.nn.functional as F\n"
                "labels = torch.arange(40) % 4\nx = torch.randn(40, 8)",
                "head = nn.Linear(8, 3)",
                "loss = F.cross_entropy(head(x), labels)",
            ],
            False,
        ),
        # a collate_fn that adds 1 to labels the dataset holds 0-based: the patch takes the `+ 1` out
        "test_fix_collate": (
            [
                *(str(_constant(t / "test_fix.py", k)) for k in ("COLLATE_SETUP", "COLLATE")),
                "model = nn.Linear(8, 4)",
                str(_constant(t / "test_fix.py", "STEP")),
            ],
            False,
        ),
    }
    for name, (file, *cells) in fw.items():
        setup = str(_constant(t / file, "SETUP"))
        if name == "fw_transformers":
            setup += "OUT = 'hf-out'\n"
        stories[name] = ([setup, *cells], True)
    return stories


def notebook_cells(path: Path) -> list[str]:
    nb = json.loads(path.read_text())
    return [
        "".join(c["source"])
        for c in nb["cells"]
        if c["cell_type"] == "code" and not "".join(c["source"]).startswith("%load_ext")
    ]


CHILD = r"""
import json, os, sys, time
sys.path.insert(0, {tests!r})
from IPython.testing.globalipapp import start_ipython
shell = start_ipython()
shell.config.CudaAssert.tap = True  # the assertion lines (the GPU double writes them to fd 2) reach the diagnosis
shell.run_line_magic("load_ext", "cudaassert")
from helpers.restart_story import restart_in_process
from pathlib import Path
import cudaassert_ipy
from cudaassert_ipy.shell import extension
cells = json.load(open({path!r}))
out = {{}}
for i, src in enumerate(cells):
    if not shell.run_cell(src, store_history=True, cell_id=f"c{{i}}").success:
        break
else:
    print(json.dumps({{"error": "did not fail"}})); sys.exit()
fix = cudaassert_ipy.proposed_fix()
out["safety"], out["why"], out["default"] = fix.safety, fix.why, fix.chosen.key if fix.chosen else None
out["alternatives"] = [a.key for a in fix.alternatives]
ext = extension.current(shell)
cells = [r for r in ext.history.records]
from cudaassert_ipy.fix import CellSource, derive
history = [CellSource(r.number, r.cell_id, r.source) for r in cells]
filler = [CellSource(1000 + i, None, f"x{{i}} = {{i}}\nprint(x{{i}})") for i in range(200 - len(history))]
derive.propose(ext.last, filler + history)  # LibCST loaded, parse caches warm for nothing of the filler
from cudaassert_ipy.fix import source
cpu, wall = [], []
for _ in range(5):
    source._tree.cache_clear(); source.pruned.cache_clear()
    t, c = time.perf_counter(), time.process_time()
    derive.propose(ext.last, filler + history, None, frozenset({{"model"}}))
    cpu.append((time.process_time() - c) * 1000); wall.append((time.perf_counter() - t) * 1000)
out["derive_ms"] = sorted(cpu)[2]
out["derive_wall_ms"] = min(wall)
keys = [a.key if a.patch is not None else None for a in fix.alternatives]
choose = ""
if fix.chosen is None and {expected!r} in keys:  # no default: apply what the author chose (the user's choice)
    choose = f" --choose {{keys.index({expected!r}) + 1}}"
    out["user_choice"] = {expected!r}
if fix.chosen is not None or choose:
    import io, contextlib
    shell.run_line_magic("cudaassert", "fix apply --restart" + (" --full" if {full!r} else "") + choose)
    restart_in_process(shell, Path({tmp!r}))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        shell.run_cell("pass", store_history=True)
    text = buf.getvalue()
    out["outcome"] = next((ln for ln in text.splitlines() if "fixed:" in ln or "not enough" in ln
                           or "more bad samples" in ln or "was not run again" in ln), "no outcome: " + text[-600:])
print("RESULT " + json.dumps(out))
"""


def run(cells: list[str], python: str, full: bool, expected: str | None = None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "JUPYTER_RUNTIME_DIR": f"{tmp}/rt",
            "IPYTHONDIR": f"{tmp}/ipy",
            "PYTHONPATH": f"{ROOT}{os.pathsep}{TESTS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
            "KERAS_BACKEND": "torch",
            "YOLO_CONFIG_DIR": f"{tmp}/yolo",
            "YOLO_OFFLINE": "1",
            "HF_HUB_OFFLINE": "1",
            "CUDAASSERT_TEST_PRETEND_GPU": "1",
        }  # fake_cuda_session's double: a GPU's failure for bad input only
        Path(f"{tmp}/ipy/profile_default/startup").mkdir(parents=True)
        os.symlink(f"{tmp}/ipy/profile_default/startup", f"{tmp}/startup")
        path = Path(tmp) / "cells.json"
        path.write_text(json.dumps(cells))
        code = CHILD.format(tests=str(TESTS), path=str(path), tmp=tmp, full=full, expected=expected)
        proc = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True, timeout=900, cwd=tmp)
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if line is None:
            return {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1]}
        return json.loads(line[len("RESULT ") :])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--python", default=sys.executable, help="the interpreter for the core notebooks")
    p.add_argument(
        "--fw-python",
        default=os.environ.get("CUDAASSERT_FW_PYTHON", str(ROOT / ".venv-fw" / "bin" / "python")),
        help="the interpreter with the real frameworks (07, 08 and the frameworks tests' cells)",
    )
    p.add_argument(
        "--one-batch",
        dest="full",
        action="store_false",
        help="verify on the failing batch only (default: run the whole failing cell again, to its end)",
    )
    p.add_argument("names", nargs="*", help="names like 01_quickstart or fw_timm (default: all)")
    args = p.parse_args()
    stories = {q.stem: (notebook_cells(q), q.stem in FRAMEWORK_NOTEBOOKS) for q in sorted(NOTEBOOKS.glob("*.ipynb"))}
    stories.update(test_stories())
    if args.names:
        stories = {k: v for k, v in stories.items() if k in args.names}
    rows = {}
    for name, (cells, fw) in stories.items():
        python = args.fw_python if fw else args.python
        rows[name] = (
            run(cells, python, args.full, EXPECTED.get(name)) if Path(python).exists() else {"error": f"no {python}"}
        )
        r = rows[name]
        print(
            f"{name:28} {r.get('safety', '-'):9} default={r.get('default')} alts={r.get('alternatives')} "
            f"cpu={r.get('derive_ms', 0):.1f} ms\n    {r.get('outcome') or r.get('why') or r.get('error')}",
            flush=True,
        )
    proposed = {k: r for k, r in rows.items() if r.get("default")}
    undecided = {k: r for k, r in rows.items() if r.get("safety") == "decision" and not r.get("default")}
    abstained = {k: r for k, r in rows.items() if r.get("safety") == "none" or "error" in r}
    ran = [k for k, r in proposed.items() if str(r.get("outcome", "")).find("fixed:") >= 0]
    wrong = [k for k, r in proposed.items() if r["default"] != EXPECTED.get(k)]
    print(
        f"\nfailing notebooks and test stories: {len(rows)}; patch proposed with a default: {len(proposed)}; "
        "decision left to the user "
        f"(no default): {len(undecided)}; abstained: {len(abstained)}"
    )
    for k, r in {**undecided, **abstained}.items():
        print(f"  {k}: {r.get('why') or r.get('error')}")
    chosen = {k: r for k, r in undecided.items() if r.get("user_choice")}
    if chosen:
        ok = [k for k, r in chosen.items() if "fixed:" in str(r.get("outcome", ""))]
        print(f"no default, the author's alternative chosen (--choose N): {len(ok)}/{len(chosen)} ran to the end")
    if proposed:
        print(
            f"ran to the end with validators on: {len(ran)}/{len(proposed)} ({100 * len(ran) / len(proposed):.0f}%, "
            "goal >= 80%)"
        )
    print(f"wrong (another meaning than the notebook's own fix): {len(wrong)} {wrong} (goal 0)")
    times = {k: r["derive_ms"] for k, r in rows.items() if "derive_ms" in r}
    if times:
        slow = max(times, key=lambda k: times[k])
        print(
            f"find + derive over a 200-cell history (CPU time, median of 5 cold runs): max {times[slow]:.1f} ms "
            f"({slow}), median {sorted(times.values())[len(times) // 2]:.1f} ms (goal <= 50 ms); best wall time "
            f"of the slowest: {rows[slow].get('derive_wall_ms', 0):.1f} ms"
        )


if __name__ == "__main__":
    main()
