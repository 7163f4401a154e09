"""Keep across restart between two real kernels: one saves what its cells bound, a fresh process restores it."""

from __future__ import annotations

import json
import os

import pytest
from helpers.kernels import execute, running_kernel, text_of

pytestmark = pytest.mark.kernel

CELLS = [
    "# cudaassert: keep\nimport pandas as pd, numpy as np, torch\n"
    "df = pd.DataFrame({'x': np.arange(50_000), 'y': np.arange(50_000) % 7})\nfeatures = torch.randn(100, 4)",
    "# cudaassert: keep\nclass Vocab:\n    def __init__(self, words):\n        self.index = {w: i for i, w in "
    "enumerate(words)}\n    def encode(self, s):\n        return [self.index.get(w, unk) for w in s.split()]\n"
    "vocab = Vocab(['a', 'b', 'c'])",
    "# cudaassert: keep\nimport helper_mod\nhelper = helper_mod.Helper()",
    "unk = -1",
    "# cudaassert: keep\nmodel = torch.nn.Linear(4, 2, device='meta')",
]


def ok_value(kc, code: str) -> object:
    reply, messages = execute(kc, code, timeout=120)
    assert reply["status"] == "ok", (reply, text_of(messages))
    return json.loads(text_of(messages).strip().splitlines()[-1])


def test_a_fresh_kernel_restores_kept_values_skips_their_cells_and_replays_the_rest(tmp_path):
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "helper_mod.py").write_text("class Helper:\n    pass\n")
    plans = tmp_path / "plans"
    base = os.environ.get("PYTHONPATH", "")
    from helpers import ROOT, TESTS

    with running_kernel(PYTHONPATH=os.pathsep.join([str(TESTS), str(ROOT), str(mods), base])) as old:
        for cell in CELLS:
            assert execute(old, cell)[0]["status"] == "ok"
        saved = ok_value(
            old,
            f"""
import json
from pathlib import Path
from cudaassert_ipy.restart import keep
cells = [keep.KeepCell(n, f'c{{n}}', s, s.startswith('# cudaassert: keep')) for n, s in enumerate({CELLS!r}, 1)]
r = keep.save('kernel-1', 5.0, cells, get_ipython().user_ns, directory=Path({str(plans)!r}))
print(json.dumps(r.lines()))
""",
        )
    assert saved[0].startswith("[1] kept: `df` ")
    assert saved[1].startswith("[2] kept: `Vocab` ")
    assert saved[2].startswith("[3] kept: `helper` ")
    assert saved[3] == "[5] replayed: `model` holds parameters on meta"

    with running_kernel() as other:  # another notebook's kernel: its own key sees nothing, and takes nothing
        assert (
            ok_value(
                other,
                f"""
import json
from pathlib import Path
from cudaassert_ipy.restart import keep
with keep.opened('kernel-2', 5.0, get_ipython().user_ns, Path({str(plans)!r})) as r:
    print(json.dumps([r.restore(n, f'c{{n}}', s) is None for n, s in enumerate({CELLS!r}, 1)]))
""",
            )
            == [True] * 5
        )
    assert (plans / "keep-kernel-1").is_dir()

    with running_kernel() as new:  # the restarted kernel: helper_mod is not importable here
        lines = ok_value(
            new,
            f"""
import json
from pathlib import Path
from cudaassert_ipy.restart import keep
out = []
with keep.opened('kernel-1', 5.0, get_ipython().user_ns, Path({str(plans)!r})) as r:
    for n, s in enumerate({CELLS!r}, 1):
        o = r.restore(n, f'c{{n}}', s)
        if o is None or not o.kept:
            get_ipython().run_cell(s, store_history=False)  # replayed
        out.append(o.line() if o else f'[{{n}}] not kept')
print(json.dumps(out))
""",
        )
        assert lines[0].startswith("[1] kept: ") and lines[1].startswith("[2] kept: ")
        assert lines[2] == (
            "[3] replayed: `helper` could not be loaded in this kernel (ModuleNotFoundError: "
            "No module named 'helper_mod')"
        )
        assert lines[3] == "[4] not kept"
        assert lines[4] == "[5] replayed: `model` holds parameters on meta"
        state = ok_value(
            new,
            "print(json.dumps([len(df), int(df.y.sum()), list(features.shape), "
            "vocab.encode('a c zz'), isinstance(vocab, Vocab), 'helper' in dir()]))",
        )
        assert state == [50_000, sum(i % 7 for i in range(50_000)), [100, 4], [0, 2, -1], True, False]
    assert not (plans / "keep-kernel-1").exists()
