#!/usr/bin/env bash
# ks v5d GPU run (halves and dw for batch-first d > 1): build the Python extension with CUDA (no C++
# tests), run the ks GPU tests, then the v5d bench rows (python -m strux.bench.gpu_ks_perf --v5d:
# batch-first d > 1 half forward vs bmm in the same dtype, backward of every dtype vs torch
# autograd of bmm, batch-last dx per forced path, small batches), and with KS_V5C=1 the v5c rows
# (all 20 cases, half forward and backward). Logs under $OUT.
#   scripts/gpu_perf_ks_v5d.sh
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
ROOT=$PWD
exec > >(tee -a "$OUT/gpu_perf_ks_v5d.log") 2>&1
echo "== $(date -u) $(hostname) $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv || true
GPU_CMAKE_ARGS=(-DSTRUX_BUILD_TESTS=OFF)
source scripts/gpu_build.sh
gpu_build || exit 1
t0=$(date +%s)
timeout ${KS_TEST_TIMEOUT:-100} python3 -m pytest -q -rs --maxfail=8 -p no:cacheprovider tests/python/test_cuda_ks.py > "$OUT/pytest.log" 2>&1
rc=$?
tail -25 "$OUT/pytest.log"
echo "== pytest rc=$rc in $(( $(date +%s) - t0 )) s"
t0=$(date +%s)
timeout ${KS_BENCH_TIMEOUT:-120} python3 -m strux.bench.gpu_ks_perf --v5d --out "$OUT" || { echo "== bench failed"; rc=1; }
echo "== v5d bench in $(( $(date +%s) - t0 )) s"
if [ "${KS_V5C:-0}" = 1 ]; then
  t0=$(date +%s)
  timeout ${KS_BENCH_TIMEOUT:-120} python3 -m strux.bench.gpu_ks_perf --v5c --out "$OUT" || { echo "== v5c bench failed"; rc=1; }
  echo "== v5c bench in $(( $(date +%s) - t0 )) s"
fi
exit $rc
