#!/usr/bin/env bash
# The fused KS pair round on the GPU machine, one command (<= 6 minutes): build
# (scripts/gpu_build.sh, ptxas report kept in build.log), the fused-pair and e2e CPU-part tests
# plus the existing GPU ks tests, then bench/gpu_ks_fused.py and bench/e2e_ks_mlp.py. Everything
# lands under $OUT (default ./out): gpu_ks_round.log, build.log, pytest*.log, gpu_ks_fused.json,
# e2e_ks_mlp.json, ptxas_fused.txt.
#   scripts/gpu_ks_round.sh [--quick]     --quick: the Monarch pairs at batch 25088 only, fewer reps
set -uo pipefail
ROOT=$PWD
OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"
QUICK=()
[ "${1:-}" = --quick ] && QUICK=(--quick)
exec > >(tee -a "$OUT/gpu_ks_round.log") 2>&1
echo "== $(date -u) $(hostname) $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null) gpu_ks_round ${QUICK[*]:-}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv || true
GPU_CMAKE_ARGS=(-DSTRUX_BUILD_TESTS=OFF)  # as gpu_focus.sh: one warm build/gpu serves every GPU script
source scripts/gpu_build.sh
gpu_build || exit 1
# registers / spills of the fused kernels (the ptxas lines after each pair_kernel entry)
grep -A3 "Compiling entry.*pair_kernel" "$OUT/build.log" | grep -E "entry|registers|spill" > "$OUT/ptxas_fused.txt" || true

rc=0
source scripts/gpu_step.sh
tests() {  # tests SECONDS NAME LOG PYTEST_ARGS...: pytest, its summary, failure noted in rc
  local limit=$1 name=$2 log=$3 t0 r
  shift 3
  t0=$(date +%s)
  timeout "$limit" python3 -m pytest -q -rs -p no:cacheprovider "$@" > "$OUT/$log" 2>&1
  r=$?
  grep -E "^(FAILED|ERROR)" "$OUT/$log" | head -30
  tail -3 "$OUT/$log"
  echo "== $name rc=$r in $(( $(date +%s) - t0 )) s"
  [ $r = 0 ] || rc=1
}
tests 150 "fused tests" pytest_fused.log tests/python/test_ks_fused_gpu.py tests/python/test_e2e_ks_mlp_cpu.py
tests 60 "ks GPU tests" pytest_ks.log tests/python/test_cuda_ks.py tests/python/test_cuda_ks_paths.py \
  tests/python/test_cuda_ks_backward.py tests/python/test_cuda_ks_host.py
step 150 "bench gpu_ks_fused" python3 bench/gpu_ks_fused.py --out "$OUT" "${QUICK[@]}"
step 200 "bench e2e_ks_mlp" python3 bench/e2e_ks_mlp.py --out "$OUT" "${QUICK[@]}"
echo "== done rc=$rc $(date -u)"
exit $rc
