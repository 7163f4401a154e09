#!/usr/bin/env bash
# Sets everything up on a fresh machine and runs the whole test suite on every version set CI covers:
#   lint      ruff (check and format --check) and mypy
#   latest    the whole suite on the latest releases (.venv)
#   colab     on the Colab/Kaggle pins (.venv-colab): the tests those pins can change (marker `frontend`, set in
#             tests/conftest.py: kernels, servers, the in-process shell, restart/shell/view), without the browser tests
#   dist      wheel and sdist built with the setuptools floor, `twine check --strict`, LICENSE in both, the wheel
#             installed in a clean venv and smoke-tested (scripts/smoke_dist.py)
#   frameworks  the `frameworks` tests with the real frameworks (.venv-fw: torch 2.14.1, Python 3.11)
#   compat    the version-sensitive tests (COMPAT_TESTS) on Python 3.10 + torch 2.4.1 (the floors) and on
#             Python 3.12 and 3.13 + torch 2.14.1
#   gpu-dry   the lent GPU machine's run (`scripts/gpu-tests.sh --device`) on the CPU, with the CPU twins, in
#             .venv-gpu-dry: only what that machine holds (Python 3.12, torch, pytest, ...) plus the carried wheels
# `bash scripts/test.sh quick`: the check before each commit, in .venv only: lint, the in-process tests and a few
# real kernels (QUICK_KERNEL_TESTS).
# Extra arguments go to pytest (e.g. `bash scripts/test.sh -k tap`); STAGES picks stages (`STAGES="lint latest"`).
# Every step runs under `timeout` (the limits below): a hung step fails its stage and the run goes on; inside a
# stage, pytest-timeout (pyproject.toml) fails a hung test, and the stage goes on.
# The test stages run their files in WORKERS processes (pytest-xdist, default 2: CI's cores; WORKERS=auto takes
# every core, WORKERS=0 runs them in pytest's own process), each file whole in one of them (--dist loadfile: a
# module's fixtures, the Jupyter `server` among them, start once per file, as in one process). The browser tests
# run after the rest, BROWSER_WORKERS (default 2) at a time, test by test (--dist load: each starts its own
# JupyterLab and Chromium; most of a test's time is waiting on the page, so two share 2 cores).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"
STAGES="${STAGES:-lint latest colab dist frameworks compat gpu-dry}"
if [ "${1:-}" = quick ]; then STAGES=quick; shift; fi
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
# `quick`: the real kernels it starts (a device assert reported end to end, ordinary errors byte-identical), and
# the in-process files it leaves to CI: each of their cases starts Python and torch anew (the runner's launchers,
# reruns, ranks and passthrough, torch's compat probes), the slowest third of the in-process tests
QUICK_KERNEL_TESTS=(tests/test_kernel_report.py)
QUICK_LEAVES=(tests/test_run_torchrun.py tests/test_run_rerun.py tests/test_run_children.py tests/test_run_ranks.py
              tests/test_run_auto.py tests/test_passthrough.py tests/test_torch_compat.py tests/test_fd_tap_rescue.py)
# each step's limit in seconds: a backstop well above the step's time on a 2-core machine other jobs also load
# (pytest-timeout fails a hung test long before); a build downloads GBs
SETUP_LIMIT=3600 LINT_LIMIT=1200 LATEST_LIMIT=5400 COLAB_LIMIT=4500 DIST_LIMIT=1800 FRAMEWORKS_LIMIT=3600
COMPAT_LIMIT=2700 QUICK_LIMIT=1800 GPU_DRY_LIMIT=1500
WORKERS="${WORKERS:-2}"
par=(-n "$WORKERS" --dist loadfile)
BROWSER_WORKERS="${BROWSER_WORKERS:-2}"

status=0
timings=()
SECONDS=0
stage_start=0 cpu_start=0
TICKS="$(getconf CLK_TCK)"
cpu_s() {  # CPU seconds (user + system) the finished children of this script used so far: with the wall time, how
    # much of the 2 cores a stage kept busy (another machine's load changes the wall time, hardly the CPU time)
    local f
    read -ra f < /proc/$$/stat
    echo $(((f[15] + f[16]) / TICKS))
}
begin() { stage_start=$SECONDS cpu_start="$(cpu_s)"; echo "=== [$1] $2"; }
end() { timings+=("$(printf '%-34s %5ss %5ss' "$1" $((SECONDS - stage_start)) $(($(cpu_s) - cpu_start)))"); }
wants() { [[ " $STAGES " == *" $1 "* ]]; }
limit() {  # limit SECONDS COMMAND...: COMMAND, stopped after SECONDS (killed 30 s later if it does not stop)
    local seconds="$1" rc=0
    shift
    timeout --kill-after=30 "$seconds" "$@" || rc=$?
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then echo "=== TIMED OUT after ${seconds}s: $*" >&2; fi
    return "$rc"
}
setup() {  # setup FUNCTION ARGS...: a scripts/bootstrap.sh function, under SETUP_LIMIT
    limit "$SETUP_LIMIT" bash "$ROOT/scripts/bootstrap.sh" "$@"
}
versions() { "$1" -c 'import sys,IPython,ipykernel,torch;print("Python",sys.version.split()[0],"IPython",IPython.__version__,"ipykernel",ipykernel.__version__,"torch",torch.__version__)'; }

if wants lint || wants latest || wants quick; then
    begin setup "latest"
    # everything below but the other environments' stages needs .venv: without it the run stops here
    setup ensure_venv .venv "test,browser" || { echo "=== [setup] .venv FAILED"; exit 1; }
    if wants latest; then setup ensure_chromium || status=$?; fi
    end "setup .venv"
fi

if wants lint || wants quick; then
    begin lint "ruff, mypy"
    limit "$LINT_LIMIT" .venv/bin/ruff check . || status=$?
    limit "$LINT_LIMIT" .venv/bin/ruff format --check . || status=$?
    limit "$LINT_LIMIT" .venv/bin/python -m mypy || status=$?
    end lint
fi

if wants quick; then
    begin quick "the in-process tests but QUICK_LEAVES, and QUICK_KERNEL_TESTS: $(versions .venv/bin/python)"
    limit "$QUICK_LIMIT" .venv/bin/python -m pytest -q "${par[@]}" \
        -m "not kernel and not browser and not frameworks and not gpu" "${QUICK_LEAVES[@]/#/--ignore=}" "$@" \
        || status=$?
    limit "$QUICK_LIMIT" .venv/bin/python -m pytest -q -m "not frameworks and not gpu" "${QUICK_KERNEL_TESTS[@]}" \
        "$@" || status=$?
    end "tests quick"
fi

if wants latest; then
    begin latest "$(versions .venv/bin/python)"
    limit "$LATEST_LIMIT" .venv/bin/python -m pytest "${par[@]}" -m "not browser and not frameworks and not gpu" \
        --durations=10 "$@" || status=$?
    end "tests latest"
    begin latest "the browser tests"
    # pytest's 5: no test selected (extra arguments such as `-k tap` can leave no browser test)
    limit "$LATEST_LIMIT" .venv/bin/python -m pytest -n "$BROWSER_WORKERS" --dist load \
        -m "browser and not frameworks and not gpu" --durations=5 "$@" || { rc=$?; [ "$rc" = 5 ] || status=$rc; }
    end "tests latest: browser"
fi

if wants colab; then
    begin setup "Colab/Kaggle pins"
    colab_ok=1
    setup ensure_venv .venv-colab "test" .ci/constraints-colab.txt || { colab_ok=0; status=1; }
    end "setup .venv-colab"
    if [ "$colab_ok" = 1 ]; then
        begin colab "Colab/Kaggle pins: $(versions .venv-colab/bin/python)"
        limit "$COLAB_LIMIT" .venv-colab/bin/python -m pytest "${par[@]}" \
            -m "frontend and not browser and not frameworks and not gpu" --durations=10 "$@" || status=$?
        end "tests Colab/Kaggle pins"
    fi
fi

if wants dist; then
    begin dist "wheel + sdist with setuptools 77.0.3, twine check, the wheel in a clean venv"
    # not `if ( ... )`: bash ignores `set -e` inside a condition, so only the last command would count
    set +e
    (
        set -e
        setup ensure_tools
        rm -rf dist build
        limit "$DIST_LIMIT" .venv-dist/bin/python -m build --no-isolation --outdir dist . >/dev/null
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
        limit "$DIST_LIMIT" .venv-wheel/bin/python -m pip install -q "$TORCH_SPEC" dist/*.whl \
            2> >(grep -v "^WARNING: Location" >&2)
        (cd "$(mktemp -d)" && limit "$DIST_LIMIT" "$ROOT/.venv-wheel/bin/python" "$ROOT/scripts/smoke_dist.py")
    )
    dist_rc=$?
    set -e
    if [ "$dist_rc" != 0 ]; then status=1; echo "=== [dist] FAILED"; fi
    end "dist (build, check, smoke)"
fi

if wants frameworks; then
    begin setup "frameworks"
    fw_ok=1
    setup ensure_fw_venv || { fw_ok=0; status=1; }  # its browser extra: the suite collects whole
    end "setup .venv-fw"
    if [ "$fw_ok" = 1 ]; then
        begin frameworks "$(versions .venv-fw/bin/python)"
        KERAS_BACKEND=torch limit "$FRAMEWORKS_LIMIT" .venv-fw/bin/python -m pytest "${par[@]}" -m frameworks \
            --durations=10 "$@" || status=$?
        end "tests frameworks"
    fi
fi

if wants compat; then
    for combo in "3.10 $OLDEST_TORCH .venv-py310-t24" "3.12 $NEWEST_TORCH .venv-py312" "3.13 $NEWEST_TORCH .venv-py313"; do
        read -r pyv torch dir <<<"$combo"
        py="$(find_python "$pyv")"
        if [ -z "$py" ]; then echo "=== [compat] Python $pyv not found"; status=1; continue; fi
        begin setup "$dir"
        if ! PYTHON="$py" TORCH_SPEC="$torch" setup ensure_venv "$dir" "test"; then
            status=1; end "setup $dir (FAILED)"; continue
        fi
        end "setup $dir"
        begin compat "$(versions "$dir/bin/python")"
        limit "$COMPAT_LIMIT" "$dir/bin/python" -m pytest "${par[@]}" -m "not frameworks and not browser" \
            "${COMPAT_TESTS[@]}" "$@" || status=$?
        end "tests compat $dir"
    done
fi

if wants gpu-dry; then
    py312="$(find_python 3.12)"
    if [ -z "$py312" ]; then echo "=== [gpu-dry] Python 3.12 not found"; status=1; else
        begin setup ".venv-gpu-dry"
        gpu_ok=1
        PYTHON="$py312" TORCH_SPEC="$NEWEST_TORCH" setup ensure_venv .venv-py312 "test" || gpu_ok=0
        if [ "$gpu_ok" = 1 ]; then setup ensure_gpu_dry_venv .venv-py312 || gpu_ok=0; fi
        end "setup .venv-gpu-dry"
        if [ "$gpu_ok" = 0 ]; then
            status=1; echo "=== [gpu-dry] its environments FAILED"
        elif limit "$SETUP_LIMIT" bash scripts/gpu-prepare.sh; then
            begin gpu-dry "gpu-tests.sh --device on the CPU twins (.venv-gpu-dry + .gpu-wheels)"
            site="$(mktemp -d)"
            # the device's 480 s budget is for 16 cores and a GPU: CI's CPUs get more room
            GPU_PYTHON=.venv-gpu-dry/bin/python GPU_SITE="$site" CUDAASSERT_GPU_TEST_DEVICE=cpu GPU_BUDGET_S=900 \
                limit "$GPU_DRY_LIMIT" bash scripts/gpu-tests.sh --device "$@" || status=$?
            rm -rf "$site"
            end "gpu-dry (--device on the CPU)"
        else
            status=1; echo "=== [gpu-dry] scripts/gpu-prepare.sh FAILED"
        fi
    fi
fi

echo "=== stage times"
printf '%-34s %6s %6s\n' stage wall CPU
printf '%s\n' "${timings[@]}"
printf '%-34s %5ss %5ss\n' total "$SECONDS" "$(cpu_s)"
exit $status
