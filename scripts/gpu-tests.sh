#!/usr/bin/env bash
# The GPU suite: every reachable device-side assert triggered for real, and the whole path
# (assert -> panel -> restart & replay -> validator -> GPU alive) in a real kernel.
#   bash scripts/gpu-tests.sh              # tests, then the validator benchmark (GPU rows)
#   GPU_BENCH=0 bash scripts/gpu-tests.sh  # tests only; extra arguments go to pytest, e.g. -k embedding
# Needs a CUDA build of torch in .venv and a visible NVIDIA GPU. Record what it prints in
# docs/gpu-verification.md.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="$ROOT/.venv/bin/python"

if [ ! -x "$PY" ]; then
    echo "No .venv yet: bash -c 'source scripts/bootstrap.sh && ensure_venv .venv test,browser', then this script." >&2
    exit 2
fi

if ! "$PY" - <<'PY'
import sys
import torch
if torch.version.cuda is None:
    sys.exit(f"torch {torch.__version__} in .venv is a CPU-only build (torch.version.cuda is None).")
if not torch.cuda.is_available():
    sys.exit(f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA device: check nvidia-smi, "
             "the driver, and CUDA_VISIBLE_DEVICES.")
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}", flush=True)
PY
then
    cat >&2 <<'MSG'

The GPU suite needs a CUDA build of torch on a machine with an NVIDIA GPU. To install one into .venv
(pick the index that matches your driver; `nvidia-smi` shows the highest CUDA it supports):

    .venv/bin/pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/cu126
    .venv/bin/pip install -e '.[test,browser]'

then run `bash scripts/gpu-tests.sh` again. (scripts/test.sh reinstalls torch only when pyproject.toml
or TORCH_SPEC change; set TORCH_SPEC to the CUDA wheel's file or URL to keep the CUDA build there too.)
MSG
    exit 2
fi

echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
"$PY" -c 'import IPython, ipykernel, ipywidgets, sys; print("Python", sys.version.split()[0], "| IPython",
IPython.__version__, "| ipykernel", ipykernel.__version__, "| ipywidgets", ipywidgets.__version__)'
status=0
"$PY" -m pytest -m gpu tests/gpu -v -rA "$@" || status=$?
if [ "${GPU_BENCH:-1}" != "0" ]; then
    echo "=== validator overhead (benchmarks/bench_validators.py)"
    "$PY" benchmarks/bench_validators.py || status=$?
fi
exit $status
