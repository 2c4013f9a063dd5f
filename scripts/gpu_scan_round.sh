#!/usr/bin/env bash
# The diag_scan GPU round in one command, on the GPU machine, from the repository root: builds
# once (scripts/gpu_build.sh, no C++ tests), runs the scan solver tests, the existing scan tests
# and the block-circulant scan tests, then bench/gpu_scan_bw.py (every solver forced on issue 14's rows, fraction of the copy
# bandwidth, torch baselines, host time of the small call). Logs and JSON under $OUT (default
# ./out): gpu_scan_round.log, build.log, pytest.log, ptxas.txt, gpu_scan_bw.json.
#   scripts/gpu_scan_round.sh [--no-tests] [--quick]
# About 6 minutes on an H200 (the build is most of it).
set -uo pipefail
ROOT=$PWD
OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"
TESTS=1 QUICK=()
for arg in "$@"; do
  case $arg in
    --no-tests) TESTS=0 ;;
    --quick) QUICK=(--quick) ;;
    *) echo "usage: scripts/gpu_scan_round.sh [--no-tests] [--quick]"; exit 2 ;;
  esac
done
exec > >(tee -a "$OUT/gpu_scan_round.log") 2>&1
echo "== $(date -u) $(hostname) $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null) scan round"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv || true
GPU_CMAKE_ARGS=(-DSTRUX_BUILD_TESTS=OFF)  # as gpu_focus.sh and the other round scripts: a warm build/gpu is reused
source scripts/gpu_build.sh
gpu_build || exit 1
# registers and spills of the scan kernels (the build log holds every kernel's ptxas report)
grep -E "Compiling entry function '_ZN5strux4cuda(4scan|5bscan)|Used [0-9]+ registers|spill" "$OUT/build.log" \
  | grep -A2 -E "strux4cuda(4scan|5bscan)" | grep -v "^--" > "$OUT/ptxas.txt" || true

rc=0
if [ $TESTS = 1 ]; then
  t0=$(date +%s)
  timeout 240 python3 -m pytest -q -rs --maxfail=40 -p no:cacheprovider tests/python/test_scan_gpu_solvers.py \
    tests/python/test_cuda_scan.py tests/python/test_cuda_scan_layouts.py tests/python/test_cuda_block_scan.py \
    > "$OUT/pytest.log" 2>&1
  r=$?
  grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -30
  tail -3 "$OUT/pytest.log"
  echo "== pytest rc=$r in $(( $(date +%s) - t0 )) s"
  [ $r = 0 ] || rc=1
fi
t0=$(date +%s)
timeout 180 python3 bench/gpu_scan_bw.py "$OUT" "${QUICK[@]}" || { echo "== bench failed"; rc=1; }
echo "== bench in $(( $(date +%s) - t0 )) s"
exit $rc
