#!/usr/bin/env bash
# Focused GPU run for ks v5b (batch-first d > 1): build the Python extension with CUDA for this
# chip (no C++ tests), run the ks GPU tests, then the batch-first d > 1 table
# (python -m strux.bench.gpu_ks_perf --bsf). Logs under $OUT.
#   scripts/gpu_perf_ks_bsf.sh
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
ROOT=$PWD
exec > >(tee -a "$OUT/gpu_perf_ks_bsf.log") 2>&1
echo "== $(date -u) $(hostname) $(git rev-parse --short HEAD 2>/dev/null)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv || true
GPU_CMAKE_ARGS=(-DSTRUX_BUILD_TESTS=OFF)
source scripts/gpu_build.sh
gpu_build || exit 1
t0=$(date +%s)
timeout 120 python3 -m pytest -q -rs -p no:cacheprovider tests/python/test_cuda_ks.py > "$OUT/pytest.log" 2>&1
rc=$?
tail -25 "$OUT/pytest.log"
echo "== pytest rc=$rc in $(( $(date +%s) - t0 )) s"
timeout 120 python3 -m strux.bench.gpu_ks_perf --bsf --out "$OUT" || { echo "== bench failed"; rc=1; }
exit $rc
