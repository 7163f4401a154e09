#!/usr/bin/env bash
# Sets everything up on a fresh machine and runs the whole test suite on every version set CI covers:
#   lint      ruff and mypy
#   latest    the whole suite on the latest releases (.venv)
#   colab     the whole suite on the Colab/Kaggle pins (.venv-colab), without the browser tests
#   dist      wheel and sdist built with the setuptools floor, `twine check --strict`, LICENSE in both, the wheel
#             installed in a clean venv and smoke-tested (scripts/smoke_dist.py)
#   frameworks  the `frameworks` tests with the real frameworks (.venv-fw: torch 2.14.1, Python 3.11)
#   compat    the version-sensitive tests (COMPAT_TESTS) on Python 3.10 + torch 2.4.1 (the floors) and on
#             Python 3.12 and 3.13 + torch 2.14.1
#   gpu-dry   the lent GPU machine's run (`scripts/gpu-tests.sh --device`) on the CPU, with the CPU twins, in
#             .venv-gpu-dry: only what that machine holds (Python 3.12, torch, pytest, ...) plus the carried wheels
# Extra arguments go to pytest (e.g. `bash scripts/test.sh -k tap`); STAGES picks stages (`STAGES="lint latest"`).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"
STAGES="${STAGES:-lint latest colab dist frameworks compat gpu-dry}"
# private torch APIs, exception wordings, the runner and a real kernel: what a torch or Python release can break
COMPAT_TESTS=(tests/test_torch_compat.py tests/test_detection.py tests/test_checks_mode.py
              tests/test_checks_mode_closure.py tests/test_debug_cell.py tests/test_bookmark_inprocess.py
              tests/test_bookmark_loaders.py tests/test_report_inprocess.py tests/test_run_cli.py
              tests/test_kernel_report.py tests/test_init.py tests/test_passthrough.py
              # the validators raise exactly when that torch's CPU kernels do; the advice they and preflight give
              tests/test_checks_indexing.py tests/test_checks_losses.py tests/test_checks_scatter.py
              tests/test_checks_embedding.py tests/test_checks_sampling.py tests/test_checks_misc.py
              tests/test_checks_programs.py tests/test_hints_templates.py tests/test_hints_agree.py
              tests/test_hints_words.py tests/test_preflight.py)
NEWEST_TORCH="torch==2.14.1"
OLDEST_TORCH="torch==2.4.1"

status=0
timings=()
SECONDS=0
stage_start=0
begin() { stage_start=$SECONDS; echo "=== [$1] $2"; }
end() { timings+=("$(printf '%-28s %5ss' "$1" $((SECONDS - stage_start)))"); }
wants() { [[ " $STAGES " == *" $1 "* ]]; }
versions() { "$1" -c 'import sys,IPython,ipykernel,torch;print("Python",sys.version.split()[0],"IPython",IPython.__version__,"ipykernel",ipykernel.__version__,"torch",torch.__version__)'; }

if wants lint || wants latest || wants colab; then
    begin setup "latest + Colab/Kaggle pins"
    ensure_venv .venv "test,browser"
    ensure_venv .venv-colab "test" .ci/constraints-colab.txt
    wants latest && ensure_chromium
    end "setup .venv .venv-colab"
fi

if wants lint; then
    begin lint "ruff, mypy"
    .venv/bin/ruff check . || status=$?
    .venv/bin/python -m mypy || status=$?
    end lint
fi

if wants latest; then
    begin latest "$(versions .venv/bin/python)"
    .venv/bin/python -m pytest -m "not frameworks and not gpu" "$@" || status=$?
    end "tests latest"
fi

if wants colab; then
    begin colab "Colab/Kaggle pins: $(versions .venv-colab/bin/python)"
    .venv-colab/bin/python -m pytest -m "not browser and not frameworks and not gpu" "$@" || status=$?
    end "tests Colab/Kaggle pins"
fi

if wants dist; then
    begin dist "wheel + sdist with setuptools 77.0.3, twine check, the wheel in a clean venv"
    ensure_tools
    # not `if ( ... )`: bash ignores `set -e` inside a condition, so only the last command would count
    set +e
    (
        set -e
        rm -rf dist build
        .venv-dist/bin/python -m build --no-isolation --outdir dist . >/dev/null
        .venv-dist/bin/twine check --strict dist/*
        .venv-dist/bin/python - dist <<'EOF'
import sys, tarfile, zipfile
from pathlib import Path
wheel, = Path(sys.argv[1]).glob("*.whl")
sdist, = Path(sys.argv[1]).glob("*.tar.gz")
in_wheel = [n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".dist-info/licenses/LICENSE")]
in_sdist = [n for n in tarfile.open(sdist).getnames() if n.count("/") == 1 and n.endswith("/LICENSE")]
assert in_wheel and in_sdist, (in_wheel, in_sdist)
print("LICENSE in", wheel.name, "and", sdist.name)
EOF
        rm -rf .venv-wheel
        "$PY" -m venv .venv-wheel
        .venv-wheel/bin/python -m pip install -q "$TORCH_SPEC" dist/*.whl 2> >(grep -v "^WARNING: Location" >&2)
        (cd "$(mktemp -d)" && "$ROOT/.venv-wheel/bin/python" "$ROOT/scripts/smoke_dist.py")
    )
    dist_rc=$?
    set -e
    if [ "$dist_rc" != 0 ]; then status=1; echo "=== [dist] FAILED"; fi
    end "dist (build, check, smoke)"
fi

if wants frameworks; then
    begin setup "frameworks"
    ensure_fw_venv  # its browser extra: the suite collects whole
    end "setup .venv-fw"
    begin frameworks "$(versions .venv-fw/bin/python)"
    KERAS_BACKEND=torch .venv-fw/bin/python -m pytest -m frameworks "$@" || status=$?
    end "tests frameworks"
fi

if wants compat; then
    for combo in "3.10 $OLDEST_TORCH .venv-py310-t24" "3.12 $NEWEST_TORCH .venv-py312" "3.13 $NEWEST_TORCH .venv-py313"; do
        read -r pyv torch dir <<<"$combo"
        py="$(find_python "$pyv")"
        if [ -z "$py" ]; then echo "=== [compat] Python $pyv not found"; status=1; continue; fi
        begin setup "$dir"
        PY="$py" TORCH_SPEC="$torch" ensure_venv "$dir" "test"
        end "setup $dir"
        begin compat "$(versions "$dir/bin/python")"
        "$dir/bin/python" -m pytest -m "not frameworks and not browser" "${COMPAT_TESTS[@]}" "$@" || status=$?
        end "tests compat $dir"
    done
fi

if wants gpu-dry; then
    py312="$(find_python 3.12)"
    if [ -z "$py312" ]; then echo "=== [gpu-dry] Python 3.12 not found"; status=1; else
        begin setup ".venv-gpu-dry"
        PY="$py312" TORCH_SPEC="$NEWEST_TORCH" ensure_venv .venv-py312 "test"
        ensure_gpu_dry_venv .venv-py312
        end "setup .venv-gpu-dry"
        begin gpu-dry "gpu-prepare.sh, then gpu-tests.sh --device on the CPU twins (.venv-gpu-dry + .gpu-wheels)"
        if bash scripts/gpu-prepare.sh; then
            site="$(mktemp -d)"
            # the device's 480 s budget is for 16 cores and a GPU: CI's CPUs get more room
            GPU_PYTHON=.venv-gpu-dry/bin/python GPU_SITE="$site" CUDAASSERT_GPU_TEST_DEVICE=cpu GPU_BUDGET_S=900 \
                bash scripts/gpu-tests.sh --device "$@" || status=$?
            rm -rf "$site"
        else
            status=1; echo "=== [gpu-dry] scripts/gpu-prepare.sh FAILED"
        fi
        end "gpu-dry (--device on the CPU)"
    fi
fi

echo "=== stage times"
printf '%s\n' "${timings[@]}"
printf '%-28s %5ss\n' total "$SECONDS"
exit $status
