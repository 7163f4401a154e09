#!/usr/bin/env bash
# Creates (or refreshes) the project's virtual environments. Sourced by lab.sh and test.sh.
#   .venv        latest releases (IPython 9, ipykernel 7, ipywidgets 8, JupyterLab 4)
#   .venv-colab  the versions Colab and Kaggle pin (IPython 7.34, ipykernel 6.17, ipywidgets 7)
# torch is the CPU build 2.13.0 (a local wheel on our machines); no CUDA wheels are pulled.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-$(command -v python3.11 || command -v python3)}"
TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0}"

ensure_venv() {  # ensure_venv DIR EXTRAS [CONSTRAINTS]
    local dir="$ROOT/$1" extras="$2" cons="${3:-}"
    local stamp="$dir/.cudaassert-stamp"
    local want
    want="$(cat "$ROOT/pyproject.toml" ${cons:+"$ROOT/$cons"} | sha256sum | cut -c1-16) $TORCH_SPEC $extras"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return 0; fi
    echo "[setup] building $1 ($extras${cons:+, constraints $cons})" >&2
    [ -x "$dir/bin/python" ] || "$PY" -m venv "$dir"
    "$dir/bin/python" -m pip install -q --upgrade pip >/dev/null
    "$dir/bin/python" -m pip install -q "$TORCH_SPEC"
    if [ -n "$cons" ]; then
        "$dir/bin/python" -m pip install -q -c "$ROOT/$cons" -e "$ROOT[$extras]" -r "$ROOT/$cons"
    else
        "$dir/bin/python" -m pip install -q -e "$ROOT[$extras]"
    fi
    echo "$want" > "$stamp"
}

ensure_chromium() {  # Debian's chromium, for the browser tests
    if command -v chromium >/dev/null 2>&1; then return 0; fi
    echo "[setup] installing Debian's chromium" >&2
    if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
}
