#!/usr/bin/env bash
# The one GPU call that builds, tests and benchmarks: build strux with CUDA on the GPU machine
# (scripts/gpu_build.sh), run the whole pytest suite (GPU tests included), the GPU benchmarks and
# a compute-sanitizer memcheck (scripts/gpu_memcheck.py). One family at a time, with more
# benchmark modes: scripts/gpu_focus.sh. Needs: CUDA toolkit, CMake, ninja, python3 with PyTorch,
# nanobind, pytest; FFTW and netlib BLAS come as Debian packages in .deps/ (unpacked here).
# Writes under $OUT (default ./out): gpu_check.log, build.log, pytest.log, gpu_bench.json,
# gpu_bench.md, memcheck.log.
#   scripts/gpu_check.sh [--quick] [--no-bench] [--no-tests]
# BENCH_ARGS (environment) passes on to the fftconv/toeplitz benchmark, e.g. BENCH_ARGS="--only
# fftconv"; SKIP_KS_SCAN=1 skips the ks/scan benchmark; KS_PERF=1 adds bench/gpu_ks_perf.py
# (every ks path forced, the default against bmm per call and back to back) after the tests.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
ROOT=$PWD
QUICK=""; BENCH=1; TESTS=1
for a in "$@"; do
  case $a in --quick) QUICK=--quick ;; --no-bench) BENCH=0 ;; --no-tests) TESTS=0 ;; esac
done
exec > >(tee -a "$OUT/gpu_check.log") 2>&1
echo "== $(date -u) $(hostname)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv || true
nvcc --version | tail -1

# ---- deps and build (scripts/gpu_build.sh) ------------------------------------------------------
TESTS_CPP=OFF
[ -d /usr/include/gtest ] && TESTS_CPP=ON
GPU_CMAKE_ARGS=(-DSTRUX_BUILD_TESTS=$TESTS_CPP)
source scripts/gpu_build.sh
gpu_build || exit 1
timeout 120 python3 scripts/gpu_smoke.py || { echo "== smoke test failed"; exit 1; }

python3 -c "import strux, json; print(json.dumps(strux.info()))"

rc=0
# ---- tests -------------------------------------------------------------------------------------
if [ $TESTS = 1 ]; then
  t0=$(date +%s)
  timeout 300 python3 -m pytest -q -rs -p no:cacheprovider --durations=5 tests/python > "$OUT/pytest.log" 2>&1
  rc=$?
  tail -45 "$OUT/pytest.log"
  echo "== pytest rc=$rc in $(( $(date +%s) - t0 )) s"
fi

# ---- the focused ks benchmark (every ks path forced and the default vs bmm): KS_PERF=1 ---------
if [ "${KS_PERF:-0}" = 1 ]; then
  timeout 240 python3 bench/gpu_ks_perf.py --out "$OUT" || { echo "== ks perf bench failed"; rc=1; }
fi

# ---- benchmark ---------------------------------------------------------------------------------
if [ $BENCH = 1 ]; then
  timeout 300 python3 -m strux.bench.gpu --out "$OUT" $QUICK ${BENCH_ARGS:-} || { echo "== bench failed"; rc=1; }
  [ "${SKIP_KS_SCAN:-0}" = 1 ] || timeout 200 python3 -m strux.bench.gpu_ks_scan --out "$OUT" $QUICK || { echo "== ks/scan bench failed"; rc=1; }
fi

# ---- memcheck on small sizes -------------------------------------------------------------------
if [ $TESTS = 1 ]; then
  for set in small families; do
    timeout 180 compute-sanitizer --tool memcheck --error-exitcode 9 python3 scripts/gpu_memcheck.py $set >> "$OUT/memcheck.log" 2>&1
    echo "== compute-sanitizer memcheck ($set) rc=$?"
  done
  timeout 240 compute-sanitizer --tool racecheck --error-exitcode 9 python3 scripts/gpu_memcheck.py families > "$OUT/racecheck.log" 2>&1
  echo "== compute-sanitizer racecheck (families) rc=$?"
  grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" "$OUT/memcheck.log" "$OUT/racecheck.log"
fi
[ -f "$OUT/gpu_bench.md" ] && cat "$OUT/gpu_bench.md"
[ -f "$OUT/gpu_ks_scan.md" ] && cat "$OUT/gpu_ks_scan.md"
exit $rc
