#!/usr/bin/env bash
# Focused GPU run for the ks family: build strux's Python extension with CUDA for this chip (the
# deps and config of scripts/gpu_check.sh, no C++ tests), run the ks GPU tests, then one bench
# mode. Logs under $OUT (gpu_perf_ks.log, pytest.log, JSON of the bench).
#   scripts/gpu_perf_ks.sh [MODE ...]     MODE (default: full):
#     full   every path forced and the default vs bmm, per call and back to back (gpu_ks_perf)
#     quick  batch-last paths back to back only              (gpu_ks_perf --quick)
#     bsf    the batch-first d > 1 table                      (gpu_ks_perf --bsf)
#     v5c    half-type forward vs bmm, backward vs autograd   (gpu_ks_perf --v5c)
#     v5d    batch-first d > 1 halves, backward, dx per path  (gpu_ks_perf --v5d)
#     host   host time per call of every entry; also runs the host and torch-op tests (gpu_ks_host)
#     none   tests only
# KS_TESTS (environment) adds pytest arguments.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
ROOT=$PWD
MODES=("$@")
[ ${#MODES[@]} = 0 ] && MODES=(full)
exec > >(tee -a "$OUT/gpu_perf_ks.log") 2>&1
echo "== $(date -u) $(hostname) $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null) modes: ${MODES[*]}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv || true
GPU_CMAKE_ARGS=(-DSTRUX_BUILD_TESTS=OFF)
source scripts/gpu_build.sh
gpu_build || exit 1
TESTS=(tests/python/test_cuda_ks.py)
[[ " ${MODES[*]} " == *" host "* ]] && TESTS+=(tests/python/test_cuda_ks_host.py tests/python/test_cuda_torch.py)
t0=$(date +%s)
# shellcheck disable=SC2086
timeout 200 python3 -m pytest -q -rs --maxfail=8 -p no:cacheprovider "${TESTS[@]}" ${KS_TESTS:-} > "$OUT/pytest.log" 2>&1
rc=$?
tail -15 "$OUT/pytest.log"
echo "== pytest rc=$rc in $(( $(date +%s) - t0 )) s"
for m in "${MODES[@]}"; do
  t0=$(date +%s)
  case $m in
    full) cmd=(python3 -m strux.bench.gpu_ks_perf --out "$OUT") ;;
    quick|bsf|v5c|v5d) cmd=(python3 -m strux.bench.gpu_ks_perf "--$m" --out "$OUT") ;;
    host) cmd=(python3 -m strux.bench.gpu_ks_host --out "$OUT") ;;
    none) continue ;;
    *) echo "== unknown mode $m"; rc=1; continue ;;
  esac
  timeout 200 "${cmd[@]}" || { echo "== bench $m failed"; rc=1; }
  echo "== bench $m in $(( $(date +%s) - t0 )) s"
done
exit $rc
