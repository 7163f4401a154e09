"""restart/keep/save.py: the old kernel saves what kept cells bound; the new one gets it back equal, or replays.

These run the real save and restore (cloudpickle, real files under a private directory) in one process.
"A tensor on the GPU" is a meta-device tensor here: the refusal is a test of ``tensor.device.type != "cpu"``
read from host metadata, and CPU-only torch has no other non-CPU device; tests/gpu/test_keep_gpu.py checks a
real CUDA tensor where there is one.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import torch
from keep_cells import STAMP, restore_all, run_cells

from cudaassert_ipy.restart import keep
from cudaassert_ipy.restart.keep.result import VALUES


def test_kept_cells_come_back_equal_and_are_not_run_again(tmp_path):
    ns, history = run_cells(
        ("import pandas as pd, numpy as np, torch\nruns = []", False),
        (
            "runs.append('load')\ndf = pd.DataFrame({'a': range(1000), 'b': ['x'] * 1000})\n"
            "arr = np.arange(10.0)\nt = torch.arange(6).reshape(2, 3)\nvocab = {'<pad>': 0, 'cat': 1}",
            True,
        ),
        ("total = int(df.a.sum())", False),
    )
    result = keep.save("k1", STAMP, history, ns, directory=tmp_path)
    assert [c.kept for c in result.cells] == [True]
    assert {n.name for n in result.cells[0].names} == {"df", "arr", "t", "vocab", "runs"}
    new, outcomes, note = restore_all(tmp_path, history)
    assert note is None and outcomes[2].kept
    pd.testing.assert_frame_equal(new["df"], ns["df"])
    assert np.array_equal(new["arr"], ns["arr"]) and torch.equal(new["t"], ns["t"])
    assert new["vocab"] == ns["vocab"] and new["total"] == 499500
    assert new["runs"] == ["load"]  # restored, not appended to again
    assert not keep.keep_dir("k1", tmp_path).exists()  # deleted after restore


def test_a_kept_cell_that_cannot_be_saved_makes_earlier_kept_cells_it_changes_replay(tmp_path):
    ns, history = run_cells(
        ("import torch\nfeats = torch.zeros(3)", True),
        ("feats += 1\nbad = torch.ones(1, device='meta')", True),
    )
    result = keep.save("k1", STAMP, history, ns, directory=tmp_path)
    assert [c.reason for c in result.cells] == [
        "cell [2] changes `feats` later, so the saved value would already hold that change",
        "`bad` holds a tensor on meta",
    ]
    new, outcomes, _ = restore_all(tmp_path, history)
    assert not any(o.kept for o in outcomes.values()) and torch.equal(new["feats"], torch.ones(3))


def test_a_disk_that_refuses_the_write_replays_the_cell(tmp_path):
    """A real OS refusal: the file size limit (RLIMIT_FSIZE) makes the write fail with EFBIG, as a full disk would."""
    code = textwrap.dedent(f"""
        import resource, signal, numpy as np
        from pathlib import Path
        from cudaassert_ipy.restart import keep
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))
        ns = {{"__name__": "__main__", "big": np.zeros(1_000_000)}}
        r = keep.save("k1", 1.0, [keep.KeepCell(2, None, "big = np.zeros(1_000_000)", True)], ns,
                      directory=Path({str(tmp_path)!r}))
        print(r.cells[0].reason)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "`big` the disk refused it (File too large)", out.stderr
    assert (keep.keep_dir("k1", tmp_path) / VALUES).stat().st_size == 0  # cut back to where `big` began
