#!/usr/bin/env bash
# On the GPU machine: build strux with CUDA (FFTW/BLAS from the .debs in .deps/), run the GPU
# ks/scan tests, then the benchmark. Everything lands under $OUT (logs, JSON, table).
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
ROOT=$(pwd)
D=$ROOT/.deps/root
if [ ! -f "$D/usr/include/fftw3.h" ]; then
  for f in .deps/*.deb; do dpkg -x "$f" "$D"; done
fi
cp -f "$D/usr/include/x86_64-linux-gnu/cblas-netlib.h" "$D/usr/include/x86_64-linux-gnu/cblas.h"
L=$D/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$L:$L/blas:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw --format=csv | tee "$OUT/gpu.txt"
cmake -S . -B build/gpu -G Ninja -DSTRUX_CUDA=ON -DSTRUX_BUILD_PYTHON=ON \
  -DPython_EXECUTABLE="$(which python3)" -DCMAKE_MODULE_LINKER_FLAGS="-Wl,--exclude-libs,ALL" \
  -DFFTW_INCLUDE_DIR="$D/usr/include" -DFFTW_LIB="$L/libfftw3.so" -DFFTWF_LIB="$L/libfftw3f.so" \
  -DCBLAS_INCLUDE_DIR="$D/usr/include/x86_64-linux-gnu" -DBLAS_LIB="$L/blas/libblas.so.3" \
  > "$OUT/build.log" 2>&1 && cmake --build build/gpu >> "$OUT/build.log" 2>&1
rc=$?
grep -E "error|spill" "$OUT/build.log" | grep -v " 0 bytes spill" | head -20
[ $rc -ne 0 ] && { tail -40 "$OUT/build.log"; exit $rc; }
export PYTHONPATH=$ROOT/python PYTHONUNBUFFERED=1
# smoke: one call of each entry point before the suites (a crash here is a build problem)
timeout 60 python3 -c "
import torch; from strux import _cuda_ks_scan as K
x=torch.randn(3,8,device='cuda'); w=torch.randn(2,3,4,1,device='cuda'); print('ks', K.ks_matmul(x,w,(2,3,4,1)).shape)
a=torch.rand(2,5,3,device='cuda'); print('scan', K.diag_scan(a,a).shape)
" 2>&1 | tail -5
timeout ${TEST_TIMEOUT:-150} python3 -m pytest -q --maxfail=20 tests/python/test_cuda_ks.py tests/python/test_cuda_scan.py \
  2>&1 | tee "$OUT/pytest.log" | tail -30
timeout ${BENCH_TIMEOUT:-200} python3 -m strux.bench.gpu_ks_scan --out "$OUT" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log"
