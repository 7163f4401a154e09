"""The fix as a patch, over every failing example notebook: proposed, applied, replayed and verified.

    KERNEL_ENV=... python benchmarks/bench_fix.py [--python .venv-fw/bin/python] [notebooks...]

Each notebook runs in a child process (an IPython shell with the extension loaded) up to its failing
cell; then ``%cudaassert fix apply --restart`` (the code path of the Apply, Restart & replay button),
the restart simulated in that process as in tests/helpers/restart_story.py (plan, stub, replay), and
the next cell: the replay runs the patched cells with validators on, then the verification (preflight,
one step of the failing cell on the failing batch, or the whole cell with --full where it reads no
DataLoader). Printed: proposed / abstained (with reasons) / decisions without a default, the share that
ran to the end, how many were wrong (the patch chose another meaning than the notebook's own fix cell:
EXPECTED), and the time to find and derive a patch over a 200-cell history.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "examples" / "notebooks"
#: what each notebook's own last cell does (the author's meaning): the alternative a right patch picks
EXPECTED = {
    "01_quickstart": "drop_rows", "02_kaggle_image_classifier": "widen_head", "03_token_ids_vs_vocab":
    "resize_embeddings", "04_bce_without_sigmoid": "bce_logits", "05_segmentation_ignore_255": "ignore_index",
    "06_cuda_debug_and_preflight": "drop_rows", "07_hf_trainer": "widen_head", "08_lightning": "widen_head",
}

CHILD = r'''
import json, os, sys, time
sys.path.insert(0, {tests!r})
from IPython.testing.globalipapp import start_ipython
shell = start_ipython()
shell.config.CudaAssert.tap = False
shell.run_line_magic("load_ext", "cudaassert")
from helpers.restart_story import restart_in_process
from pathlib import Path
import cudaassert_ipy
from cudaassert_ipy.shell import extension
nb = json.load(open({path!r}))
out = {{}}
for cell in nb["cells"]:
    if cell["cell_type"] != "code":
        continue
    src = "".join(cell["source"])
    if src.startswith("%load_ext"):
        continue
    if not shell.run_cell(src, store_history=True, cell_id=cell["id"]).success:
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
source._tree.cache_clear()
t = time.perf_counter()
derive.propose(ext.last, filler + history, None, frozenset({{"model"}}))
out["derive_ms"] = (time.perf_counter() - t) * 1000
if fix.chosen is not None:
    import io, contextlib
    shell.run_line_magic("cudaassert", "fix apply --restart" + (" --full" if {full!r} else ""))
    restart_in_process(shell, Path({tmp!r}))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        shell.run_cell("pass", store_history=True)
    text = buf.getvalue()
    out["outcome"] = next((ln for ln in text.splitlines() if "fixed:" in ln or "not enough" in ln
                           or "more bad samples" in ln or "was not run again" in ln), text[-300:])
print("RESULT " + json.dumps(out))
'''


def run(path: Path, python: str, full: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "JUPYTER_RUNTIME_DIR": f"{tmp}/rt", "IPYTHONDIR": f"{tmp}/ipy",
               "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "KERAS_BACKEND": "torch"}
        Path(f"{tmp}/ipy/profile_default/startup").mkdir(parents=True)
        os.symlink(f"{tmp}/ipy/profile_default/startup", f"{tmp}/startup")
        code = CHILD.format(tests=str(ROOT / "tests"), path=str(path), tmp=tmp, full=full)
        proc = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True, timeout=900,
                              cwd=tmp)
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if line is None:
            return {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1]}
        return json.loads(line[len("RESULT "):])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--python", default=sys.executable, help="the interpreter (.venv-fw for 07 and 08)")
    p.add_argument("--full", action="store_true", help="verify by running the whole failing cell")
    p.add_argument("notebooks", nargs="*", help="names like 01_quickstart (default: all)")
    args = p.parse_args()
    paths = sorted(NOTEBOOKS.glob("*.ipynb"))
    if args.notebooks:
        paths = [q for q in paths if q.stem in args.notebooks]
    rows = {q.stem: run(q, args.python, args.full) for q in paths}
    proposed = {k: r for k, r in rows.items() if r.get("default")}
    undecided = {k: r for k, r in rows.items() if r.get("safety") == "decision" and not r.get("default")}
    abstained = {k: r for k, r in rows.items() if r.get("safety") == "none" or "error" in r}
    ran = [k for k, r in proposed.items() if str(r.get("outcome", "")).find("fixed:") >= 0]
    wrong = [k for k, r in proposed.items() if r["default"] != EXPECTED.get(k)]
    for k, r in rows.items():
        print(f"{k:32} {r.get('safety', '-'):9} default={r.get('default')} alts={r.get('alternatives')} "
              f"derive={r.get('derive_ms', 0):.1f} ms\n    {r.get('outcome') or r.get('why') or r.get('error')}")
    print(f"\nnotebooks: {len(rows)}; patch proposed with a default: {len(proposed)}; decision left to the user "
          f"(no default): {len(undecided)}; abstained: {len(abstained)}")
    for k, r in {**undecided, **abstained}.items():
        print(f"  {k}: {r.get('why') or r.get('error')}")
    if proposed:
        print(f"ran to the end with validators on: {len(ran)}/{len(proposed)} ({100 * len(ran) / len(proposed):.0f}%, "
              "goal >= 80%)")
    print(f"wrong (another meaning than the notebook's own fix): {len(wrong)} {wrong} (goal 0)")
    times = [r["derive_ms"] for r in rows.values() if "derive_ms" in r]
    if times:
        print(f"find + derive over a 200-cell history: max {max(times):.1f} ms (goal <= 50 ms)")


if __name__ == "__main__":
    main()
