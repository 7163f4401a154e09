#!/usr/bin/env bash
# Sets everything up on a fresh machine and opens JupyterLab on the example notebooks,
# with the extension installed (each notebook starts with `%load_ext cudaassert`). The environment is the frameworks
# one (.venv-fw): notebooks 07 and 08 train with transformers and Lightning, and torch's default build there uses
# a GPU where the machine has one.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"
ensure_fw_venv
export KERAS_BACKEND="${KERAS_BACKEND:-torch}"
exec .venv-fw/bin/jupyter lab --notebook-dir="$ROOT/examples/notebooks" "$@"
