#!/usr/bin/env bash
# Builds the JupyterLab 4 / Notebook 7 extension (frontend/) into cudaassert_ipy/labextension/, which is committed:
# the wheel ships it prebuilt (pyproject's data-files put it under share/jupyter/labextensions/cudaassert-ipy), so
# neither CI nor users need node. Run after changing frontend/ and commit the result.
#   needs: node >= 18 and npm (packages from the npm registry only, pinned by frontend/package-lock.json), and a
#   Python with jupyterlab >= 4 for `jupyter labextension build` (PYTHON, default .venv/bin/python)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
cd "$ROOT/frontend"
npm ci --no-audit --no-fund --registry=https://registry.npmjs.org/
npx tsc
rm -rf "$ROOT/cudaassert_ipy/labextension"
PATH="$(dirname "$PYTHON"):$PATH" "$PYTHON" -m jupyter labextension build .
du -sb "$ROOT/cudaassert_ipy/labextension"
