"""Smoke test of an INSTALLED cudaassert-ipy (the wheel, not the checkout): run from outside the repository.

    python scripts/smoke_dist.py        # from any directory; exits non-zero on the first thing that is wrong

1. the package imports from site-packages, one version everywhere, LICENSE in the installed metadata;
2. ``%load_ext cudaassert`` in a real InteractiveShell, then a CPU twin (cross_entropy with label 7 of 5 classes)
   gets its report;
3. ``python -m cudaassert_ipy explain LOG`` explains a saved log;
4. the runner (``cudaassert-run`` and ``python -m cudaassert_ipy``) reports a failing script;
5. the prebuilt frontend extension is where JupyterLab 4 and Notebook 7 look for it (no other install step).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOG = """\
[rank0]: RuntimeError: CUDA error: device-side assert triggered
[rank0]: CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be \
incorrect.
../aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [0,0,0] \
Assertion `t >= 0 && t < n_classes` failed.
"""
SCRIPT = """\
import torch, torch.nn.functional as F
logits = torch.randn(4, 5)
labels = torch.tensor([0, 7, 1, 2])
F.cross_entropy(logits, labels)
"""


def check(ok: bool, what: str, detail: str = "") -> None:
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        print(detail, file=sys.stderr)
        sys.exit(1)


def installed() -> None:
    import cudaassert_ipy

    where = Path(cudaassert_ipy.__file__).resolve()
    check(
        where.parent != REPO / "cudaassert_ipy" and "site-packages" in where.parts,
        f"cudaassert_ipy imports from the installed wheel ({where.parent})",
    )
    dist = metadata.distribution("cudaassert-ipy")
    check(dist.version == cudaassert_ipy.__version__, f"one version: {dist.version}")
    check(any(str(f).endswith("LICENSE") for f in dist.files or ()), "LICENSE is in the installed metadata")
    check(dist.metadata["License-Expression"] == "BSD-3-Clause", "License-Expression: BSD-3-Clause")
    check((where.parent / "py.typed").is_file(), "py.typed is installed")


def shell() -> None:
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "cudaassert")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = ip.run_cell(SCRIPT)
        ip.run_line_magic("cudaassert", "status")
    text = out.getvalue()
    check(isinstance(result.error_in_exec, IndexError), "the CPU twin raised the user's IndexError")
    check(
        "[cudaassert] CPU error · class label out of range in cross_entropy" in text,
        "%load_ext cudaassert: the CPU twin's report",
        text,
    )
    check("cudaassert: loaded" in text, "%cudaassert status", text)


def cli(tmp: Path) -> None:
    log = tmp / "train.log"
    log.write_text(LOG)
    done = subprocess.run(
        [sys.executable, "-m", "cudaassert_ipy", "explain", str(log)],
        capture_output=True,
        text=True,
        cwd=tmp,
        timeout=300,
    )
    check(
        done.returncode == 0 and "class label out of range" in done.stdout,
        "python -m cudaassert_ipy explain LOG",
        done.stdout + done.stderr,
    )
    script = tmp / "train.py"
    script.write_text(SCRIPT)
    console = shutil.which("cudaassert-run", path=os.path.dirname(sys.executable))
    check(console is not None, "the cudaassert-run console script is installed")
    for argv in ([str(console), script.name], [sys.executable, "-m", "cudaassert_ipy", script.name]):
        done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp, timeout=300)
        check(
            done.returncode == 1
            and "IndexError: Target 7 is out of bounds." in done.stderr
            and "[cudaassert]" in done.stderr
            and "class label out of range" in done.stderr,
            f"the runner ({' '.join(Path(a).name for a in argv[:-1])}) reports the failing script",
            done.stdout + done.stderr,
        )


def labextension() -> None:
    from cudaassert_ipy.fix.model import PATCH_MIME

    ext = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "cudaassert-ipy"
    pkg = json.loads((ext / "package.json").read_text()) if (ext / "package.json").is_file() else {}
    load = pkg.get("jupyterlab", {}).get("_build", {}).get("load", "")
    check(
        pkg.get("name") == "cudaassert-ipy" and bool(load) and (ext / load).is_file(),
        f"the labextension is installed under {ext.parent} (its remoteEntry: {load or 'missing'})",
    )
    check(
        json.loads((ext / "install.json").read_text()).get("packageName") == "cudaassert-ipy"
        if (ext / "install.json").is_file()
        else False,
        "its install.json names the Python package",
    )
    bundle = "".join(p.read_text(errors="replace") for p in (ext / "static").glob("*.js"))
    check(PATCH_MIME in bundle, f"its bundle renders {PATCH_MIME}")


def main() -> None:
    installed()
    labextension()
    shell()
    with tempfile.TemporaryDirectory() as tmp:
        cli(Path(tmp))
    print("smoke_dist: all ok")


if __name__ == "__main__":
    main()
