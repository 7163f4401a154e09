#!/usr/bin/env bash
# Step 1 of 2 for the GPU suite on a lent GPU machine (docs/gpu-verification.md), run HERE, where PyPI is reachable.
# The machine has python3 (3.12) with a CUDA build of torch, and pytest, but no IPython or Jupyter, and it can fetch
# nothing: what the suite needs beyond its image travels as wheels in the ignored folder .gpu-wheels/.
#   bash scripts/gpu-prepare.sh          # the wheels pinned in .ci/gpu-wheels.txt, the size check, the device call
#   bash scripts/gpu-prepare.sh --lock   # first resolve the pins again (.ci/gpu-wheels.txt, .ci/gpu-machine.txt)
# Step 2 is the printed call: `bash scripts/gpu-tests.sh --device` there, .gpu-wheels carried.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"
if [ "${1:-}" = "--lock" ]; then
    "$PY" scripts/gpu_lent.py lock
fi
"$PY" scripts/gpu_lent.py download .gpu-wheels
"$PY" scripts/gpu_lent.py size .gpu-wheels
call="$("$PY" scripts/gpu_lent.py call)"
cat <<EOF

The device call (the device tool's run, once; it ends within 8 minutes and writes gpu-tests.log and
gpu-summary.json under \$OUT):
  $call
EOF
