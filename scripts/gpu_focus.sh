#!/usr/bin/env bash
# Focused GPU run of one family on the GPU machine: builds once (scripts/gpu_build.sh, no C++
# tests), runs that family's GPU tests, then its benchmark. Logs and JSON under $OUT (default
# ./out): gpu_focus.log, build.log, pytest.log and each benchmark's JSON.
#   scripts/gpu_focus.sh [--no-tests] FAMILY [MODE ...]
#   ks [MODE ...]   MODE (default full; each runs bench/gpu_ks_perf.py unless noted):
#       full        every ks path forced and the default vs bmm, per call and back to back
#       quick       batch-last float32 paths back to back only
#       bsf         the batch-first d > 1 table and profile
#       halves      float16/bfloat16 forward vs bmm, backward vs torch autograd, both layouts
#       bsf-halves  batch-first d > 1: halves, backward, dx per forced path
#       host        host time per call of every entry (bench/gpu_ks_host.py; adds the host tests)
#       ncu         Nsight Compute on the streaming and tensor-core kernels (bench/ks_one.py,
#                   each path forced through the plan options; pattern $KS_PATTERN, default
#                   6,64,64,1), SASS of the streaming kernel
#       none        tests only
#   scan            scan tests; every diag_scan kernel forced, circulant vs diag (bench/gpu_scan_kernels.py)
#   block-scan      block-circulant tests; bench/gpu_block_scan.py
#   toeplitz        bench/gpu_toeplitz_perf.py, memcheck of every product and layout, toeplitz tests
# The whole suite, the main benchmarks and memcheck in one call: scripts/gpu_check.sh.
set -uo pipefail
ROOT=$PWD
OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"
TESTS=1
[ "${1:-}" = --no-tests ] && { TESTS=0; shift; }
FAMILY=${1:-}
[ $# -gt 0 ] && shift
MODES=("$@")
case $FAMILY in
  ks) [ ${#MODES[@]} = 0 ] && MODES=(full) ;;
  scan|block-scan|toeplitz) [ ${#MODES[@]} = 0 ] || { echo "$FAMILY takes no modes"; exit 2; } ;;
  *) echo "usage: scripts/gpu_focus.sh [--no-tests] ks|scan|block-scan|toeplitz [MODE ...]"; exit 2 ;;
esac
exec > >(tee -a "$OUT/gpu_focus.log") 2>&1
echo "== $(date -u) $(hostname) $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null) $FAMILY ${MODES[*]:-}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv || true
GPU_CMAKE_ARGS=(-DSTRUX_BUILD_TESTS=OFF)
source scripts/gpu_build.sh
gpu_build || exit 1

rc=0
# run_tests SECONDS PYTEST_ARGS...: the family's GPU tests (pytest.log), unless --no-tests.
run_tests() {
  [ $TESTS = 1 ] || return 0
  local limit=$1 t0
  shift
  t0=$(date +%s)
  timeout "$limit" python3 -m pytest -q -rs -p no:cacheprovider "$@" > "$OUT/pytest.log" 2>&1
  local r=$?
  grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -30
  tail -3 "$OUT/pytest.log"
  echo "== pytest rc=$r in $(( $(date +%s) - t0 )) s"
  [ $r = 0 ] || rc=1
}
# bench SECONDS CMD...: one benchmark, timed, its failure noted in rc.
bench() {
  local limit=$1 t0
  shift
  t0=$(date +%s)
  timeout "$limit" "$@" || { echo "== bench failed: $*"; rc=1; }
  echo "== bench in $(( $(date +%s) - t0 )) s: $*"
}

case $FAMILY in
  ks)
    KS_TESTS=(tests/python/test_cuda_ks.py tests/python/test_cuda_ks_paths.py tests/python/test_cuda_ks_backward.py)
    [[ " ${MODES[*]} " == *" host "* ]] && KS_TESTS+=(tests/python/test_cuda_ks_host.py tests/python/test_cuda_torch.py)
    run_tests 200 --maxfail=8 "${KS_TESTS[@]}"
    for m in "${MODES[@]}"; do
      case $m in
        full) bench 200 python3 bench/gpu_ks_perf.py --out "$OUT" ;;
        quick|bsf|halves|bsf-halves) bench 200 python3 bench/gpu_ks_perf.py "--$m" --out "$OUT" ;;
        host) bench 200 python3 bench/gpu_ks_host.py --out "$OUT" ;;
        ncu)
          # the path is forced through the plan options (bench/ks_one.py's third argument)
          for path in stream kernels; do
            timeout 120 ncu --clock-control none --set detailed \
              --section WarpStateStats --section SourceCounters -k "regex:${KS_NCU_KERNEL:-stream_kernel|tf32x3}" \
              --launch-skip 2 -c 1 python3 bench/ks_one.py "${KS_PATTERN:-6,64,64,1}" 25088 "$path" \
              > "$OUT/ncu_$path.txt" 2>&1
            echo "== ncu $path rc=$?"
            grep -E "Duration|Memory Throughput|DRAM Throughput|Compute \(SM\)|Registers|Achieved Occupancy|Block Limit|Warp Cycles Per Issued|Issue Slots Busy|Stall|stall" \
              "$OUT/ncu_$path.txt" | head -40
          done
          obj=$(find build/gpu -name 'ks_stream_k1.cu.o' | head -1)
          cuobjdump -sass "$obj" > "$OUT/sass_stream_k1.txt" 2>&1
          echo "== sass lines $(wc -l < "$OUT/sass_stream_k1.txt")" ;;
        none) ;;
        *) echo "== unknown ks mode $m"; rc=1 ;;
      esac
    done ;;
  scan)
    run_tests 150 -x tests/python/test_cuda_scan.py
    bench 150 python3 bench/gpu_scan_kernels.py "$OUT" ;;
  block-scan)
    grep -A2 "bscan" "$OUT/build.log" | grep -E "registers|spill" | sort | uniq -c | head -20 || true
    run_tests 100 tests/python/test_cuda_block_scan.py tests/python/test_cuda_scan.py -k "block or torch_ops"
    bench 60 python3 bench/gpu_block_scan.py --out "$OUT" ;;
  toeplitz)
    bench 110 python3 bench/gpu_toeplitz_perf.py "$OUT"
    timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 python3 scripts/gpu_memcheck.py toeplitz \
      > "$OUT/memcheck.log" 2>&1
    m=$?
    echo "== memcheck rc=$m ($(grep -c 'Invalid' "$OUT/memcheck.log") invalid)"
    tail -2 "$OUT/memcheck.log"
    [ $m = 0 ] || rc=1
    run_tests 150 tests/python/test_cuda_toeplitz.py ;;
esac
exit $rc
