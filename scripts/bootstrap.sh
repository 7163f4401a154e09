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
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return 0; fi
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

if [ "${BASH_SOURCE[0]}" = "$0" ] && [ $# -gt 0 ]; then "$@"; fi
