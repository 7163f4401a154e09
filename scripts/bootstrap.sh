#!/usr/bin/env bash
# Creates (or refreshes) the project's virtual environments. Sourced by lab.sh and test.sh; run as
# `bash scripts/bootstrap.sh FUNCTION ARGS...` it runs one of its functions (test.sh does, under `timeout`).
#   .venv            latest releases (IPython 9, ipykernel 7, ipywidgets 8, JupyterLab 4), torch 2.13 CPU build
#   .venv-colab      the versions Colab and Kaggle pin (IPython 7.34, ipykernel 6.17, ipywidgets 7)
#   .venv-fw         the real frameworks (`frameworks` extra) on torch 2.14.1, Python 3.11; lab.sh runs JupyterLab here
#   .venv-py310-t24  the oldest supported: Python 3.10, torch 2.4.1 (PyPI's CUDA build; it imports without a GPU)
#   .venv-py312, .venv-py313  the newest Pythons with torch 2.14.1
#   .venv-dist       build tools with the setuptools floor (setuptools==77.0.3, build, twine)
# An environment is rebuilt only when pyproject.toml, its constraints, its Python or its torch changed. After a
# build, files identical across the environments (torch 2.13 in three of them, torch 2.14.1's NVIDIA libraries in
# three) become hard links to one copy (share_files).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

find_python() {  # find_python 3.10 -> a python3.10 on PATH or under pyenv; empty when there is none
    local v="$1" p
    for p in "$(command -v "python$v" 2>/dev/null)" "$HOME"/.pyenv/versions/"$v".*/bin/python; do
        if [ -n "$p" ] && [ -x "$p" ] && "$p" -c 'pass' 2>/dev/null; then echo "$p"; return 0; fi
    done
    return 0
}

PY="${PYTHON:-$(find_python 3.11)}"
PY="${PY:-$(command -v python3)}"
TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0}"

ensure_venv() {  # [PY=python] [TORCH_SPEC=spec] ensure_venv DIR EXTRAS [CONSTRAINTS]
    local dir="$ROOT/$1" extras="$2" cons="${3:-}"
    local stamp="$dir/.cudaassert-stamp"
    local want
    want="$(cat "$ROOT/pyproject.toml" ${cons:+"$ROOT/$cons"} | sha256sum | cut -c1-16) $("$PY" -V 2>&1) $TORCH_SPEC $extras"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then link_labextension "$dir"; return 0; fi
    echo "[setup] building $1 ($("$PY" -V 2>&1), $TORCH_SPEC, [$extras]${cons:+, constraints $cons})" >&2
    [ -x "$dir/bin/python" ] || "$PY" -m venv "$dir"
    "$dir/bin/python" -m pip install -q --upgrade pip >/dev/null 2> >(grep -v "^WARNING: Location" >&2)
    # shellcheck disable=SC2086  # TORCH_SPEC may name torch and torchvision
    "$dir/bin/python" -m pip install -q $TORCH_SPEC 2> >(grep -v "^WARNING: Location" >&2)
    if [ -n "$cons" ]; then
        "$dir/bin/python" -m pip install -q -c "$ROOT/$cons" -e "$ROOT[$extras]" -r "$ROOT/$cons" \
            2> >(grep -v "^WARNING: Location" >&2)
    else
        # shellcheck disable=SC2086
        "$dir/bin/python" -m pip install -q -e "$ROOT[$extras]" $TORCH_SPEC 2> >(grep -v "^WARNING: Location" >&2)
    fi
    link_labextension "$dir"
    echo "$want" > "$stamp"
    share_files
}

share_files() {  # one copy on disk of each file that several of the checkout's environments hold byte for byte
    # (util-linux's hardlink; same name, mode and owner). pip replaces files rather than writing into them, so a
    # later install in one environment leaves the others as they are
    if ! command -v hardlink >/dev/null 2>&1; then echo "[setup] no hardlink (util-linux): files not shared" >&2; return 0; fi
    local dirs=("$ROOT"/.venv*/)
    hardlink --quiet --ignore-time --respect-name --minimum-size 64K "${dirs[@]}"
}

link_labextension() {  # link_labextension DIR: JupyterLab and Notebook 7 in DIR load this checkout's prebuilt
    # frontend (cudaassert_ipy/labextension, rebuilt by scripts/build-frontend.sh) rather than the copy an editable
    # install made of it (what `jupyter labextension develop` does); a wheel install copies it, which is right there
    local share="$1/share/jupyter/labextensions"
    [ -L "$share/cudaassert-ipy" ] && return 0
    mkdir -p "$share"
    rm -rf "$share/cudaassert-ipy"
    ln -s "$ROOT/cudaassert_ipy/labextension" "$share/cudaassert-ipy"
}

ensure_fw_venv() {  # .venv-fw: torch's default build (imports without a GPU, uses one where there is one) with
    # torchvision (fastai, timm and Ultralytics need it) and the real frameworks: the `frameworks` tests and the
    # example notebooks (07 and 08 train with transformers and Lightning) run here
    TORCH_SPEC="torch==2.14.1 torchvision==0.29.1" ensure_venv .venv-fw "test,browser,frameworks"
}

ensure_tools() {  # .venv-dist: the floor of build-system.requires, so the build is checked with exactly it
    local dir="$ROOT/.venv-dist" want="setuptools==77.0.3 build twine"
    if [ -f "$dir/.cudaassert-stamp" ] && [ "$(cat "$dir/.cudaassert-stamp")" = "$want" ]; then return 0; fi
    echo "[setup] building .venv-dist ($want)" >&2
    [ -x "$dir/bin/python" ] || "$PY" -m venv "$dir"
    # shellcheck disable=SC2086
    "$dir/bin/python" -m pip install -q $want 2> >(grep -v "^WARNING: Location" >&2)
    echo "$want" > "$dir/.cudaassert-stamp"
}

ensure_chromium() {  # Debian's chromium, for the browser tests
    if command -v chromium >/dev/null 2>&1; then return 0; fi
    echo "[setup] installing Debian's chromium" >&2
    if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
}

ensure_gpu_dry_venv() {  # ensure_gpu_dry_venv TORCH_VENV -> .venv-gpu-dry: Python 3.12 holding only what the lent GPU
    # machine holds of what the GPU suite needs (.ci/gpu-machine.txt, and torch), so that the dry run of
    # `scripts/gpu-tests.sh --device` fails here on anything the carried wheels lack. torch and its dependencies are
    # hard links to TORCH_VENV's files (no second copy of PyPI's CUDA build, several GB)
    local src="$ROOT/$1" dir="$ROOT/.venv-gpu-dry" py want
    py="$(find_python 3.12)"
    if [ -z "$py" ]; then echo "[setup] Python 3.12 not found: no .venv-gpu-dry" >&2; return 1; fi
    want="$(cat "$ROOT/.ci/gpu-machine.txt" "$src/.cudaassert-stamp" | sha256sum | cut -c1-16) $("$py" -V 2>&1)"
    if [ -f "$dir/.cudaassert-stamp" ] && [ "$(cat "$dir/.cudaassert-stamp")" = "$want" ]; then return 0; fi
    echo "[setup] building .venv-gpu-dry ($("$py" -V 2>&1), torch linked from $1, .ci/gpu-machine.txt)" >&2
    rm -rf "$dir"
    "$py" -m venv "$dir"
    "$src/bin/python" - "$dir" <<'PY'
import os, sys, sysconfig
from importlib.metadata import distribution
from pathlib import Path
from packaging.requirements import Requirement

dest = Path(sys.argv[1], Path(sysconfig.get_path("purelib")).relative_to(sys.prefix))
todo, expanded, seen = [("torch", ())], set(), set()
while todo:  # torch and what it requires on this platform, through its dependencies and their extras
    wanted, extras = todo.pop()
    dist = distribution(wanted)
    name = dist.metadata["Name"].lower().replace("_", "-")
    if (name, extras) in expanded:
        continue
    expanded.add((name, extras))
    for req in map(Requirement, dist.requires or []):
        if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in ("", *extras)):
            todo.append((req.name, tuple(sorted(req.extras))))
    if name in seen:
        continue
    seen.add(name)
    for f in dist.files or []:
        src = Path(dist.locate_file(f)).resolve()
        if ".." in f.parts or not src.is_file():  # console scripts: they name the other venv's python
            continue
        (dest / f).parent.mkdir(parents=True, exist_ok=True)
        os.link(src, dest / f)
print(f"[setup] {len(seen)} distributions linked: " + " ".join(sorted(seen)), file=sys.stderr)
PY
    "$dir/bin/python" -m pip install -q --upgrade pip >/dev/null 2> >(grep -v "^WARNING: Location" >&2)
    "$dir/bin/python" -m pip install -q --no-deps -r "$ROOT/.ci/gpu-machine.txt" 2> >(grep -v "^WARNING: Location" >&2)
    echo "$want" > "$dir/.cudaassert-stamp"
}

if [ "${BASH_SOURCE[0]}" = "$0" ] && [ $# -gt 0 ]; then "$@"; fi
