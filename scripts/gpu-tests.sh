#!/usr/bin/env bash
# The GPU suite: every reachable device-side assert triggered for real, and the whole path
# (assert -> panel -> restart & replay -> validator -> GPU alive) in a real kernel.
#   bash scripts/gpu-tests.sh              # tests, then the validator benchmark (GPU rows)
#   GPU_BENCH=0 bash scripts/gpu-tests.sh  # tests only; extra arguments go to pytest, e.g. -k embedding
# Needs a CUDA build of torch in .venv and a visible NVIDIA GPU. Record what it prints in
# docs/gpu-verification.md.
#   bash scripts/gpu-tests.sh --device     # step 2 on a lent GPU machine (scripts/gpu-prepare.sh is step 1):
#       its own python3 and torch, the carried wheels (.gpu-wheels) installed into /tmp/site, every case in its own
#       process with a timeout, all of it within 8 minutes; gpu-tests.log and gpu-summary.json under $OUT.
#       CUDAASSERT_GPU_TEST_DEVICE=cpu runs the same path with the CPU twins (the CI stage gpu-dry). Also read:
#       GPU_PYTHON (python3), GPU_SITE (/tmp/site), GPU_BUDGET_S (480), OUT (.gpu-out where the tool sets none).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

device_run() {  # --device: the lent machine's own python3 and torch, plus the carried wheels
    local device="${CUDAASSERT_GPU_TEST_DEVICE:-cuda}" py="${GPU_PYTHON:-python3}" site="${GPU_SITE:-/tmp/site}"
    local out="$1" budget="${GPU_BUDGET_S:-480}" bench_reserve=90 case_timeout=150
    local tests_rc=0 bench_rc=0 workers
    shift
    echo "=== cudaassert-ipy GPU suite --device (device=$device), $(date -u +%Y-%m-%dT%H:%MZ), budget ${budget}s"
    shopt -s nullglob
    local wheels=(.gpu-wheels/*.whl)
    if [ ${#wheels[@]} -eq 0 ]; then
        echo "No wheels in .gpu-wheels/: run 'bash scripts/gpu-prepare.sh' where PyPI is reachable, and carry .gpu-wheels."
        exit 2
    fi
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "${wheels[@]}" \
        2> >(grep -v -e "^WARNING: Target directory" -e "^WARNING: Running pip as the 'root' user" >&2) || exit 2
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" CUDAASSERT_GPU_TEST_DEVICE="$device"
    export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
    echo "=== [${SECONDS}s] ${#wheels[@]} carried wheels in $site; the environment"
    "$py" scripts/gpu_lent.py verify "$out/env.json" || exit 2

    if "$py" -c 'import xdist' 2>/dev/null; then
        workers=$(( $(nproc) < 6 ? $(nproc) : 6 ))
    else
        workers=0; echo "pytest-xdist is missing: the cases run one at a time"
    fi
    local left=$(( budget - SECONDS - bench_reserve ))
    echo "=== [${SECONDS}s] tests/gpu: each real assert in its own process; ${case_timeout}s a case; ${left}s in all"
    CUDAASSERT_GPU_SUMMARY="$out/cases.json" timeout -k 15 "$left" \
        "$py" -m pytest -m gpu tests/gpu -p no:cacheprovider -v -rA --timeout="$case_timeout" \
        $([ "$workers" -gt 0 ] && echo "-n $workers") "$@" || tests_rc=$?
    [ "$tests_rc" = 124 ] && echo "=== the tests ran out of their ${left}s"

    left=$(( budget - SECONDS - 5 ))
    echo "=== [${SECONDS}s] validator overhead, beside CUDA_LAUNCH_BLOCKING=1 (benchmarks/bench_validators.py --gpu-only)"
    if [ "$left" -gt 10 ]; then
        timeout -k 5 "$left" "$py" benchmarks/bench_validators.py --gpu-only | tee "$out/bench.txt" \
            || bench_rc=${PIPESTATUS[0]}
    else
        bench_rc=124; echo "no time left for the benchmark"
    fi
    "$py" scripts/gpu_lent.py summary "$out" "$tests_rc" "$bench_rc" "$SECONDS"
    [ "$tests_rc" = 0 ] && [ "$bench_rc" = 0 ]
}

if [ "${1:-}" = "--device" ]; then
    shift
    OUT="${OUT:-$ROOT/.gpu-out}"  # $OUT: the folder the device call brings back
    mkdir -p "$OUT"
    rm -f "$OUT/gpu-tests.log" "$OUT/gpu-summary.json" "$OUT/cases.json" "$OUT/env.json" "$OUT/bench.txt"
    SECONDS=0
    set +e
    device_run "$OUT" "$@" 2>&1 | tee "$OUT/gpu-tests.log"
    exit "${PIPESTATUS[0]}"
fi
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
