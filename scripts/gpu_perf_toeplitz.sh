#!/usr/bin/env bash
# Focused GPU check of the toeplitz family (< 5 min; BUDGET seconds, default 285): build for the chip (sm_90a), the timings of
# scripts/gpu_perf_toeplitz.py (each with its error vs the PyTorch recipe), the toeplitz GPU tests
# and a compute-sanitizer memcheck of every transform layout at small sizes. Same .deps handling as scripts/gpu_check.sh. Logs under $OUT.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
ROOT=$PWD
T0=$(date +%s)
exec > >(tee -a "$OUT/tz.log") 2>&1
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
    -DFFTWF_LIB="$LIB/libfftw3f.so" -DCBLAS_INCLUDE_DIR="$D/include/x86_64-linux-gnu" \
    -DBLAS_LIB="$LIB/blas/libblas.so.3" -DCMAKE_MODULE_LINKER_FLAGS="-Wl,--exclude-libs,ALL" \
    -DSTRUX_CUDA_GENCODE="-gencode=arch=compute_90a,code=sm_90a" > "$OUT/build.log" 2>&1 \
    && cmake --build build/gpu > "$OUT/build.log" 2>&1; then
  echo "== build ok in $(( $(date +%s) - t0 )) s"
else
  echo "== build failed"; grep -E "error|FAILED" -A5 "$OUT/build.log" | tail -30; exit 1
fi
rc=0
T0=${T0:-$(date +%s)}
left() { echo $(( ${BUDGET:-285} - ($(date +%s) - T0) )); }  # seconds left of the run's budget
timeout 110 python3 scripts/gpu_perf_toeplitz.py "$OUT" || { echo "== perf failed"; rc=1; }
# the version 7 tests first (algo 3), then a short memcheck, then the whole file in what is left
t0=$(date +%s)
timeout 40 python3 -m pytest -q -x -p no:cacheprovider tests/python/test_cuda_toeplitz.py -k "real_gemm" \
  > "$OUT/pytest_new.log" 2>&1
rc2=$?; rc=$(( rc | rc2 )); tail -3 "$OUT/pytest_new.log"; echo "== pytest (algo 3) rc=$rc2 in $(( $(date +%s) - t0 )) s"
cat > /tmp/tz_memcheck.py <<'PY'
import torch
from strux import _cuda
for dt in (torch.float32, torch.float64):
    for (Nt, Nd, Nm) in ((5, 37, 131), (6, 100, 130), (2, 1, 1)):
        for algo in (0, 2, 3):
            for layout in ("time-major", "space-major"):
                op = _cuda.BlockToeplitzCUDA(torch.randn(Nt, Nd, Nm, device="cuda", dtype=dt), layout, algo=algo, fft=2)
                for R in (None, 19):
                    e = () if R is None else (R,)
                    sh = (lambda n: (Nt, n) + e) if layout == "time-major" else (lambda n: (n, Nt) + e)
                    op.matvec(torch.randn(*sh(Nm), device="cuda", dtype=dt))
                    op.rmatvec(torch.randn(*sh(Nd), device="cuda", dtype=dt))
torch.cuda.synchronize(); print("memcheck script done")
PY
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 python3 /tmp/tz_memcheck.py > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$? ($(grep -c 'Invalid' "$OUT/memcheck.log") invalid)"; tail -2 "$OUT/memcheck.log"
t0=$(date +%s); L=$(left); [ "$L" -lt 20 ] && L=20
timeout "$L" python3 -m pytest -q -p no:cacheprovider tests/python/test_cuda_toeplitz.py > "$OUT/pytest.log" 2>&1
rc3=$?; rc=$(( rc | rc3 ))
tail -6 "$OUT/pytest.log"
echo "== pytest (whole file, ${L} s allowed) rc=$rc3 in $(( $(date +%s) - t0 )) s"
exit $rc
