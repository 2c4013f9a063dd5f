#!/usr/bin/env bash
# Focused GPU run for the ks family: build strux's Python extension with CUDA for the chip it
# runs on (the same deps/config as scripts/gpu_check.sh, no C++ tests), run the ks GPU tests,
# then time the ks bench cases (python -m strux.bench.gpu_ks_perf). Logs under $OUT.
#   scripts/gpu_perf_ks.sh
# Options (environment): KS_TESTS="-k expr" narrows the tests (default: all of
# test_cuda_ks.py); KS_BENCH=quick times only the batch-last paths back to back
# (gpu_ks_perf --quick: forced paths and streaming tiles, forward and dx, a few seconds),
# KS_BENCH=both runs quick then the full bench, KS_BENCH=none skips timing.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
ROOT=$PWD
exec > >(tee -a "$OUT/gpu_perf_ks.log") 2>&1
echo "== $(date -u) $(hostname)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv || true
GPU_CMAKE_ARGS=(-DSTRUX_BUILD_TESTS=OFF)
source scripts/gpu_build.sh
gpu_build || exit 1
t0=$(date +%s)
# shellcheck disable=SC2086
timeout 150 python3 -m pytest -q -rs -p no:cacheprovider tests/python/test_cuda_ks.py ${KS_TESTS:-} > "$OUT/pytest.log" 2>&1
rc=$?
tail -15 "$OUT/pytest.log"
echo "== pytest rc=$rc in $(( $(date +%s) - t0 )) s"
case "${KS_BENCH:-full}" in
  quick|both) timeout 120 python3 -m strux.bench.gpu_ks_perf --quick --out "$OUT" || { echo "== quick bench failed"; rc=1; } ;;
esac
case "${KS_BENCH:-full}" in
  full|both) timeout 170 python3 -m strux.bench.gpu_ks_perf --out "$OUT" || { echo "== bench failed"; rc=1; } ;;
esac
exit $rc
