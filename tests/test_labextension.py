"""The prebuilt frontend extension the wheel ships (cudaassert_ipy/labextension, from frontend/ by
scripts/build-frontend.sh): built from this checkout's frontend, at the package's version, and rendering the MIME
type the kernel sends. The browser tests (test_browser_fix.py) click it."""

from __future__ import annotations

import json
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10: pytest's own TOML reader
    import tomli as tomllib

import cudaassert_ipy
from cudaassert_ipy.fix import PATCH_MIME

ROOT = Path(__file__).resolve().parent.parent
BUILT = ROOT / "cudaassert_ipy" / "labextension"


def test_the_built_extension_is_this_checkouts_frontend_at_the_packages_version():
    source = json.loads((ROOT / "frontend" / "package.json").read_text())
    built = json.loads((BUILT / "package.json").read_text())
    assert source["version"] == built["version"] == cudaassert_ipy.__version__  # a version bump rebuilds it
    assert {k: v for k, v in built.items() if k != "jupyterlab"} == {
        k: v for k, v in source.items() if k != "jupyterlab"
    }
    load = BUILT / built["jupyterlab"]["_build"]["load"]
    assert load.is_file()
    bundle = "".join(p.read_text() for p in (BUILT / "static").glob("*.js"))
    assert PATCH_MIME in bundle and "--in-notebook" in bundle  # the kernel's MIME type, the magic's option
    assert sum(p.stat().st_size for p in BUILT.rglob("*") if p.is_file()) < 100_000  # stays small


def test_pip_install_puts_every_built_file_where_jupyterlab_looks():
    data_files = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["data-files"]
    listed = {
        ROOT / f
        for pattern in [p for files in data_files.values() for p in files]
        for f in [str(q.relative_to(ROOT)) for q in ROOT.glob(pattern)]
    }
    assert {p for p in BUILT.rglob("*") if p.is_file()} <= listed
    assert set(data_files) == {
        "share/jupyter/labextensions/cudaassert-ipy",
        "share/jupyter/labextensions/cudaassert-ipy/static",
    }
