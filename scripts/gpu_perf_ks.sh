#!/usr/bin/env bash
# Focused GPU run for the ks family: build strux's Python extension with CUDA for the chip it
# runs on (the same deps/config as scripts/gpu_check.sh, no C++ tests), run the ks GPU tests,
# then time the ks bench cases (python -m strux.bench.gpu_ks_perf). Logs under $OUT.
#   scripts/gpu_perf_ks.sh
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
ROOT=$PWD
exec > >(tee -a "$OUT/gpu_perf_ks.log") 2>&1
echo "== $(date -u) $(hostname)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv || true
mkdir -p .deps/root
for f in .deps/*.deb; do dpkg -x "$f" .deps/root; done
D=$ROOT/.deps/root/usr
LIB=$D/lib/x86_64-linux-gnu
cp -f "$D/include/x86_64-linux-gnu/cblas-netlib.h" "$D/include/x86_64-linux-gnu/cblas.h"
export LD_LIBRARY_PATH=$LIB:$LIB/blas:${LD_LIBRARY_PATH:-}
export PYTHONPATH=$ROOT/python:$ROOT/tests/python PYTHONUNBUFFERED=1
t0=$(date +%s)
rm -f python/strux/_ext*.so
if cmake -S . -B build/gpu -G Ninja -DSTRUX_CUDA=ON -DSTRUX_BUILD_PYTHON=ON -DSTRUX_BUILD_TESTS=OFF \
  -DPython_EXECUTABLE="$(which python3)" -DFFTW_INCLUDE_DIR="$D/include" -DFFTW_LIB="$LIB/libfftw3.so" \
  -DFFTWF_LIB="$LIB/libfftw3f.so" -DCBLAS_INCLUDE_DIR="$D/include/x86_64-linux-gnu" -DBLAS_LIB="$LIB/blas/libblas.so.3" \
  -DSTRUX_CUDA_GENCODE="-gencode=arch=compute_90a,code=sm_90a" > "$OUT/build.log" 2>&1 \
  && cmake --build build/gpu >> "$OUT/build.log" 2>&1; then
  echo "== build ok in $(( $(date +%s) - t0 )) s"
else
  echo "== build failed"; grep -E "error|FAILED" -A5 "$OUT/build.log" | tail -30; exit 1
fi
t0=$(date +%s)
timeout 150 python3 -m pytest -q -rs -p no:cacheprovider tests/python/test_cuda_ks.py > "$OUT/pytest.log" 2>&1
rc=$?
tail -15 "$OUT/pytest.log"
echo "== pytest rc=$rc in $(( $(date +%s) - t0 )) s"
timeout 170 python3 -m strux.bench.gpu_ks_perf --out "$OUT" || { echo "== bench failed"; rc=1; }
exit $rc
