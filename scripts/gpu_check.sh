#!/usr/bin/env bash
# Build strux with CUDA on the GPU machine, run the GPU tests, the GPU benchmark and a
# compute-sanitizer memcheck. Needs: CUDA toolkit, CMake, ninja, python3 with PyTorch,
# nanobind, pytest; FFTW and netlib BLAS come as Debian packages in .deps/ (unpacked here).
# Writes under $OUT (default ./out): gpu_check.log, build.log, pytest.log, gpu_bench.json,
# gpu_bench.md, memcheck.log.
#   scripts/gpu_check.sh [--quick] [--no-bench] [--no-tests]
# BENCH_ARGS (environment) passes on to the fftconv/toeplitz benchmark, e.g. BENCH_ARGS="--only
# fftconv"; SKIP_KS_SCAN=1 skips the ks/scan benchmark.
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

# ---- FFTW + netlib BLAS from .deps -------------------------------------------------------------
mkdir -p .deps/root
for f in .deps/*.deb; do dpkg -x "$f" .deps/root; done
D=$ROOT/.deps/root/usr
LIB=$D/lib/x86_64-linux-gnu
cp -f "$D/include/x86_64-linux-gnu/cblas-netlib.h" "$D/include/x86_64-linux-gnu/cblas.h"
export LD_LIBRARY_PATH=$LIB:$LIB/blas:${LD_LIBRARY_PATH:-}
export PYTHONPATH=$ROOT/python:$ROOT/tests/python PYTHONUNBUFFERED=1

# ---- build (developer build: _ext lands in python/strux) ---------------------------------------
TESTS_CPP=OFF
[ -d /usr/include/gtest ] && ls tests/cpp/*.cpp >/dev/null 2>&1 && TESTS_CPP=ON
COMMON=(-G Ninja -DSTRUX_CUDA=ON -DSTRUX_BUILD_PYTHON=ON -DSTRUX_BUILD_TESTS=$TESTS_CPP
  -DPython_EXECUTABLE="$(which python3)" -DFFTW_INCLUDE_DIR="$D/include" -DFFTW_LIB="$LIB/libfftw3.so"
  -DFFTWF_LIB="$LIB/libfftw3f.so" -DCBLAS_INCLUDE_DIR="$D/include/x86_64-linux-gnu" -DBLAS_LIB="$LIB/blas/libblas.so.3"
  # This machine's chip only (Hopper), to keep the build short; the default build covers sm_80/90/90a.
  -DSTRUX_CUDA_GENCODE="${STRUX_CUDA_GENCODE:--gencode=arch=compute_90a,code=sm_90a}")
t0=$(date +%s)
rm -f python/strux/_ext*.so
if cmake -S . -B build/gpu "${COMMON[@]}" >> "$OUT/build.log" 2>&1 && cmake --build build/gpu >> "$OUT/build.log" 2>&1; then
  echo "== build ok in $(( $(date +%s) - t0 )) s"
else
  echo "== build failed"; grep -E "error|FAILED" -A5 "$OUT/build.log" | tail -30; exit 1
fi
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

# ---- benchmark ---------------------------------------------------------------------------------
if [ $BENCH = 1 ]; then
  timeout 300 python3 -m strux.bench.gpu --out "$OUT" $QUICK ${BENCH_ARGS:-} || { echo "== bench failed"; rc=1; }
  [ "${SKIP_KS_SCAN:-0}" = 1 ] || timeout 200 python3 -m strux.bench.gpu_ks_scan --out "$OUT" $QUICK || { echo "== ks/scan bench failed"; rc=1; }
fi

# ---- memcheck on small sizes -------------------------------------------------------------------
if [ $TESTS = 1 ]; then
  cat > /tmp/strux_memcheck.py <<'PY'
import torch
from strux import _cuda
for mode in ("causal", "circular"):
    for dt in (torch.float32, torch.float16):
        u = torch.randn(2, 3, 37, device="cuda", dtype=dt)
        k = torch.randn(3, 37 if mode == "circular" else 50, device="cuda", dtype=dt)
        g = torch.randn_like(u)
        _cuda.fftconv(u, k, mode, g, g, k[:, 0].contiguous())
        _cuda.fftconv_vjp(g, u, k, mode, g, g, k[:, 0].contiguous())
for layout in ("time-major", "space-major"):
    op = _cuda.BlockToeplitzCUDA(torch.randn(9, 3, 4, device="cuda"), layout)
    for R in (None, 3):
        shp = lambda n: ((9, n) if layout == "time-major" else (n, 9)) + ((R,) if R else ())
        op.matvec(torch.randn(*shp(4), device="cuda")); op.rmatvec(torch.randn(*shp(3), device="cuda"))
torch.cuda.synchronize(); print("memcheck script done")
PY
  timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 python3 /tmp/strux_memcheck.py > "$OUT/memcheck.log" 2>&1
  echo "== compute-sanitizer memcheck rc=$? ($(grep -c 'Invalid' "$OUT/memcheck.log") invalid accesses)"
  tail -3 "$OUT/memcheck.log"
fi
[ -f "$OUT/gpu_bench.md" ] && cat "$OUT/gpu_bench.md"
[ -f "$OUT/gpu_ks_scan.md" ] && cat "$OUT/gpu_ks_scan.md"
exit $rc
