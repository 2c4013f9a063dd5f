#!/usr/bin/env bash
# The circulant SSM experiment on a GPU machine, from the repository root: builds strux once
# (scripts/gpu_build.sh, no C++ tests), runs the layer tests (CPU and CUDA), then the full
# experiment (run.py: 5 seeds, every run and model, throughput at B = 16, T = 2048) with several
# worker processes sharing the one GPU. Writes $OUT/circulant_ssm/{REPORT.md, results.json,
# accuracy.png} and $OUT/circulant_ssm.log, $OUT/pytest_ssm.log.
#   OUT=... experiments/circulant_ssm/gpu.sh [extra run.py arguments, e.g. --steps 2000]
# SSM_WORKERS (default 8) sets the worker processes; no training job starts after SSM_LIMIT
# seconds (default 300: the report then covers the jobs that finished, seed-major, and says so).
set -uo pipefail
ROOT=$PWD
OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/circulant_ssm.log") 2>&1
echo "== $(date -u) $(hostname) $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null) circulant_ssm $*"
nvidia-smi --query-gpu=name,driver_version --format=csv || true
GPU_CMAKE_ARGS=(-DSTRUX_BUILD_TESTS=OFF)
source scripts/gpu_build.sh
gpu_build || exit 1
rc=0
t0=$(date +%s)
timeout 200 python3 -m pytest -q -rs -p no:cacheprovider tests/python/test_ssm_layer.py > "$OUT/pytest_ssm.log" 2>&1 || rc=1
grep -E "^(FAILED|ERROR)" "$OUT/pytest_ssm.log" | head -20
tail -2 "$OUT/pytest_ssm.log"
echo "== pytest rc=$rc in $(( $(date +%s) - t0 )) s"
t0=$(date +%s)
LIMIT=${SSM_LIMIT:-300}
timeout $(( LIMIT + 300 )) python3 experiments/circulant_ssm/run.py --device cuda --workers "${SSM_WORKERS:-8}" \
  --time-limit "$LIMIT" --out "$OUT/circulant_ssm" "$@" || { echo "== experiment failed"; rc=1; }
echo "== experiment in $(( $(date +%s) - t0 )) s"
exit $rc
