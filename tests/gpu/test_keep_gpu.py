"""Keep across restart with real CUDA values, after a real device-side assert killed the context.

The refusal reads ``.device`` only, so it must work in a process whose GPU context is dead: CUDA
values are refused with their device named, CPU values are kept, and nothing touches GPU memory
(a ``.cpu()`` here would raise the sticky error). Runs in its own process: the assert is sticky.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers.gpu_device import gpu_only

pytestmark = [pytest.mark.gpu, gpu_only("the refusal reads a CUDA value's device in a dead context")]

CHILD = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    import torch
    from cudaassert_ipy.restart import keep

    ns = {"__name__": "__main__"}
    cells = ["x = torch.ones(4, device='cuda')", "m = torch.nn.Linear(2, 2).cuda()",
             "cpu = {'a': torch.arange(3), 'b': [1, 2]}", "mixed = [torch.ones(1), torch.ones(1, device='cuda')]",
             "g = torch.Generator(device='cuda')"]
    ns["torch"] = torch
    for c in cells:
        exec(c, ns)
    try:
        torch.zeros(3, device="cuda")[torch.tensor([5], device="cuda")].sum().item()
    except Exception as e:
        dead = type(e).__name__
    r = keep.save("gpu", 1.0, [keep.KeepCell(n, None, c, True) for n, c in enumerate(cells, 1)], ns,
                  directory=Path(sys.argv[1]))
    print(json.dumps({"dead": dead, "lines": r.lines()}))
""")


def test_cuda_values_are_refused_by_device_and_cpu_values_kept_in_a_dead_context(tmp_path: Path):
    out = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["dead"] in ("RuntimeError", "AcceleratorError")
    lines = result["lines"]
    assert lines[0] == "[1] replayed: `x` holds a tensor on cuda:0"
    assert lines[1] == "[2] replayed: `m` holds parameters on cuda:0"
    assert lines[2].startswith("[3] kept: `cpu` ")
    assert lines[3] == "[4] replayed: `mixed` holds a tensor on cuda:0"
    assert lines[4] == "[5] replayed: `g` holds a random number generator on cuda:0"
