#!/usr/bin/env bash
# Sets everything up on a fresh machine and runs the whole test suite on both version sets.
# Extra arguments go to pytest (e.g. `bash scripts/test.sh -k tap`).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"
ensure_venv .venv "test,browser"
ensure_venv .venv-colab "test" .ci/constraints-colab.txt
ensure_chromium
.venv/bin/ruff check .
.venv/bin/python -m mypy
status=0
echo "=== latest releases: $(.venv/bin/python -c 'import IPython,ipykernel,ipywidgets,torch;print("IPython",IPython.__version__,"ipykernel",ipykernel.__version__,"ipywidgets",ipywidgets.__version__,"torch",torch.__version__)')"
.venv/bin/python -m pytest -m "not frameworks" "$@" || status=$?
echo "=== Colab/Kaggle pins: $(.venv-colab/bin/python -c 'import IPython,ipykernel,ipywidgets,torch;print("IPython",IPython.__version__,"ipykernel",ipykernel.__version__,"ipywidgets",ipywidgets.__version__,"torch",torch.__version__)')"
.venv-colab/bin/python -m pytest -m "not browser and not frameworks" "$@" || status=$?
exit $status
