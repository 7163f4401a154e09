"""cudaassert_ipy/__init__.py: the public names load lazily, and dir() lists them all without loading any."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import cudaassert_ipy

ROOT = Path(__file__).resolve().parent.parent


def test_dir_lists_every_public_name_including_the_lazy_ones():
    assert set(cudaassert_ipy.__all__) <= set(dir(cudaassert_ipy))
    assert {"preflight", "check_labels", "last_diagnosis", "failing_batch"} <= set(dir(cudaassert_ipy))
    assert dir(cudaassert_ipy) == sorted(dir(cudaassert_ipy))


def test_every_public_name_resolves_to_what_it_names():
    for name in cudaassert_ipy.__all__:
        value = getattr(cudaassert_ipy, name)
        assert value is not None
        if name != "__version__":
            assert callable(value) and value.__name__ == name, name


def test_dir_and_import_load_neither_torch_nor_ipython_nor_ipywidgets():
    code = (
        "import json, sys\nimport cudaassert_ipy\nnames = dir(cudaassert_ipy)\n"
        "print(json.dumps([len(names), {m: m in sys.modules for m in ('torch', 'IPython', 'ipywidgets')}]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    count, loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert count >= len(cudaassert_ipy.__all__)
    assert loaded == {"torch": False, "IPython": False, "ipywidgets": False}
