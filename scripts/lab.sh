#!/usr/bin/env bash
# Sets everything up on a fresh machine and opens JupyterLab on the example notebooks,
# with the extension installed (each notebook starts with `%load_ext cudaassert`).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"
ensure_venv .venv "test,browser"
exec .venv/bin/jupyter lab --notebook-dir="$ROOT/examples/notebooks" "$@"
