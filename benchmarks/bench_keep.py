"""Keep across restart vs full replay, side by side on real kernels (not a test): prints the ratio and the goal.

    .venv/bin/python benchmarks/bench_keep.py [--rows 2500000] [--runs 1] [--tokens array|lists]

A CPU setup of three cells (read a CSV into a ~200 MB DataFrame with a few features, build a
vocabulary, tokenize every row: a padded id matrix, or with ``--tokens lists`` a list of ids per
row) runs in one kernel, which then saves the three cells' names with
:func:`cudaassert_ipy.restart.keep.save`, as the old kernel does before a restart. Then, in two
fresh kernels of the same run: one restores the names (:func:`keep.opened`), one replays the three
cells. Kernel start-up is the same for both paths and is not counted.

Goal (issue #13): keep (save in the old kernel + restore in the new one) <= 0.25 x the replay.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the real-kernel driver lives there

from helpers.kernels import execute, running_kernel, text_of  # noqa: E402

GOAL = 0.25
READ = (
    "# cudaassert: keep\nimport numpy as np, pandas as pd\ndf = pd.read_csv(CSV)\ndf['len'] = df.text.str.len()\n"
    "df['a_rank'] = df.groupby('label').a.rank()"
)
VOCAB = (
    "# cudaassert: keep\nfrom collections import Counter\n"
    "counts = Counter(w for t in df.text for w in t.split())\n"
    "vocab = {w: i + 2 for i, (w, _) in enumerate(counts.most_common(50_000))}"
)
TOKENIZE = {  # what a tokenizer hands back: a padded id matrix (return_tensors="np"), or lists of ids
    "array": "# cudaassert: keep\ntokens = np.zeros((len(df), 16), np.int32)\nfor i, t in enumerate(df.text):\n"
    "    ids = [vocab.get(w, 1) for w in t.split()][:16]\n    tokens[i, :len(ids)] = ids",
    "lists": "# cudaassert: keep\ntokens = [[vocab.get(w, 1) for w in t.split()] for t in df.text]\n"
    "lengths = [len(t) for t in tokens]",
}
WORDS = 4000


def make_csv(path: Path, rows: int) -> None:
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    words = np.array([f"w{i}" for i in range(WORDS)])
    text = [" ".join(words[rng.integers(0, WORDS, 12)]) for _ in range(rows)]
    pd.DataFrame(
        {
            "id": np.arange(rows),
            "a": rng.random(rows),
            "b": rng.random(rows),
            "c": rng.random(rows),
            "label": rng.integers(0, 196, rows),
            "text": text,
        }
    ).to_csv(path, index=False)


def value(kc: object, code: str) -> dict:
    reply, messages = execute(kc, code, timeout=600)
    assert reply["status"] == "ok", reply
    return dict(json.loads(text_of(messages).strip().splitlines()[-1]))


def one_run(csv: Path, directory: Path, cells: list[str]) -> dict[str, float]:
    prelude = f"import json, time\nCSV = {str(csv)!r}\n"
    with running_kernel() as old:
        execute(old, prelude)
        setup = 0.0
        for cell in cells:
            t = value(
                old, f"_t = time.perf_counter()\nexec({cell!r})\nprint(json.dumps({{'s': time.perf_counter() - _t}}))"
            )
            setup += t["s"]
        saved = value(
            old,
            f"""
from cudaassert_ipy.restart import keep
from pathlib import Path
_cells = [keep.KeepCell(n, None, s, True) for n, s in enumerate({cells!r}, 1)]
_t = time.perf_counter()
_r = keep.save('bench', 1.0, _cells, globals(), keep.KeepBudget(seconds=300), Path({str(directory)!r}))
print(json.dumps({{'s': time.perf_counter() - _t, 'kept': len(_r.kept),
                  'bytes': sum(n.size for c in _r.cells for n in c.names), 'lines': _r.lines()}}))
""",
        )
        assert saved["kept"] == len(cells), saved["lines"]
    with running_kernel() as new:
        restored = value(
            new,
            f"""
import json, time
from cudaassert_ipy.restart import keep
from pathlib import Path
_t = time.perf_counter()
with keep.opened('bench', 1.0, globals(), Path({str(directory)!r})) as _r:
    _out = [_r.restore(n, None, s) for n, s in enumerate({cells!r}, 1)]
print(json.dumps({{'s': time.perf_counter() - _t, 'ok': all(o is not None and o.kept for o in _out),
                  'rows': len(df), 'tokens': len(tokens), 'lines': [o.line() for o in _out if o]}}))
""",
        )
        assert restored["ok"], restored
    with running_kernel() as again:
        execute(again, prelude)
        replay = value(
            again,
            f"_t = time.perf_counter()\nfor _c in {cells!r}:\n    exec(_c)\n"
            "print(json.dumps({'s': time.perf_counter() - _t, 'rows': len(df)}))",
        )
    assert replay["rows"] == restored["rows"]
    return {
        "setup": setup,
        "replay": replay["s"],
        "save": saved["s"],
        "load": restored["s"],
        "bytes": saved["bytes"],
        "lines": restored["lines"],
    }  # type: ignore[dict-item]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_500_000, help="rows of the CSV (2.5M: a ~200 MB DataFrame)")
    parser.add_argument("--runs", type=int, default=1, help="runs, each with its own three kernels")
    parser.add_argument(
        "--tokens",
        choices=sorted(TOKENIZE),
        default="array",
        help="the tokenized dataset as a padded id matrix (array) or as lists of ids (lists)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "train.csv"
        make_csv(csv, args.rows)
        print(f"CSV: {args.rows:,} rows, {csv.stat().st_size / 1e6:.0f} MB")
        cells = [READ, VOCAB, TOKENIZE[args.tokens]]
        runs = [one_run(csv, Path(tmp) / "plans", cells) for _ in range(args.runs)]
    for line in runs[-1]["lines"]:  # type: ignore[attr-defined]
        print("  " + line)
    med = {k: statistics.median(float(r[k]) for r in runs) for k in ("setup", "replay", "save", "load", "bytes")}
    keep_s = med["save"] + med["load"]
    ratio = keep_s / med["replay"]
    print(f"setup in the old kernel {med['setup']:.1f} s; kept {med['bytes'] / 1e6:.0f} MB")
    print(
        f"full replay {med['replay']:.1f} s | keep: save {med['save']:.1f} s + restore {med['load']:.1f} s "
        f"= {keep_s:.1f} s | keep / replay = {ratio:.2f}x (goal <= {GOAL}x): {'met' if ratio <= GOAL else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
