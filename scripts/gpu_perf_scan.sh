#!/usr/bin/env bash
# Focused GPU run for the scan family (< 5 min): build the extension for this chip, run the GPU
# scan tests, time the scan cases (strux.bench.gpu_ks_scan.scan_cases, every diag_scan kernel
# forced in turn through STRUX_DIAG_SCAN). FFTW/BLAS .debs from $DEPS (default ../.deps, the
# lead checkout's .deps carried next to this tree). Writes build.log, pytest.log, scan_bench.json
# under $OUT (default ./out).
set -uo pipefail
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
ROOT=$PWD
DEPS=${DEPS:-$ROOT/../.deps}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader || true
mkdir -p /tmp/deps && for f in "$DEPS"/*.deb; do dpkg -x "$f" /tmp/deps; done
D=/tmp/deps/usr; LIB=$D/lib/x86_64-linux-gnu
cp -f "$D/include/x86_64-linux-gnu/cblas-netlib.h" "$D/include/x86_64-linux-gnu/cblas.h"
export LD_LIBRARY_PATH=$LIB:$LIB/blas:${LD_LIBRARY_PATH:-}
export PYTHONPATH=$ROOT/python:$ROOT/tests/python PYTHONUNBUFFERED=1
t0=$(date +%s)
rm -f python/strux/_ext*.so
cmake -S . -B build/gpu -G Ninja -DSTRUX_CUDA=ON -DSTRUX_BUILD_PYTHON=ON -DSTRUX_BUILD_TESTS=OFF \
  -DPython_EXECUTABLE="$(which python3)" -DFFTW_INCLUDE_DIR="$D/include" -DFFTW_LIB="$LIB/libfftw3.so" \
  -DFFTWF_LIB="$LIB/libfftw3f.so" -DCBLAS_INCLUDE_DIR="$D/include/x86_64-linux-gnu" -DBLAS_LIB="$LIB/blas/libblas.so.3" \
  -DSTRUX_CUDA_GENCODE="-gencode=arch=compute_90a,code=sm_90a" > "$OUT/build.log" 2>&1 \
  && cmake --build build/gpu --target _ext >> "$OUT/build.log" 2>&1 \
  || { echo "== build failed"; grep -E "error|FAILED" -A5 "$OUT/build.log" | tail -30; exit 1; }
echo "== build ok in $(( $(date +%s) - t0 )) s"
t0=$(date +%s)
timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/python/test_cuda_scan.py > "$OUT/pytest.log" 2>&1
rc=$?
tail -5 "$OUT/pytest.log"; echo "== pytest rc=$rc in $(( $(date +%s) - t0 )) s"
timeout 150 python3 - "$OUT" <<'PY'
import json, os, sys, statistics, torch
from strux.bench import gpu_ks_scan as G
from strux import _cuda_ks_scan as K
torch.manual_seed(0)
n = 1 << 29
x = torch.empty(n, device="cuda").uniform_(); y = torch.empty_like(x)
bw = 2 * 4 * n / (G.timeit(lambda: y.copy_(x), reps=10) * 1e-3); del x, y
print(f"copy {bw / 1e12:.2f} TB/s", flush=True)
res = dict(copy_bw=bw, device=torch.cuda.get_device_name(), rows={})
for algo in ("", "lookback", "seq1", "seqv"):
    os.environ["STRUX_DIAG_SCAN"] = algo
    print(f"== STRUX_DIAG_SCAN={algo or 'auto'}", flush=True)
    rows = (G.scan_cases(bw, False) if algo == "" else []) + G.diag_cases(bw)
    res["rows"][algo or "auto"] = rows
os.environ["STRUX_DIAG_SCAN"] = ""
# circulant (16, 2048, 256): spatial and Fourier forward, native backward, vs a float32 diag_scan
# of the same shape (same bytes: read a, u, write h) and its backward.
B, T, n = 16, 2048, 256
a = torch.randn(B, T, n, device="cuda") * (0.9 / n); u = torch.randn(B, T, n, device="cuda")
dh = torch.randn_like(u); ah = torch.fft.rfft(a, dim=-1)
t = dict(circ_fwd=G.timeit(lambda: K.circulant_scan(a, u)),
         circ_fourier_fwd=G.timeit(lambda: K.circulant_scan(ah, u, fourier=True)),
         circ_bwd=G.timeit(lambda: K.circulant_scan_vjp(dh, a, u)),
         circ_fourier_bwd=G.timeit(lambda: K.circulant_scan_vjp(dh, ah, u, fourier=True)),
         diag_fwd=G.timeit(lambda: K.diag_scan(a, u)),
         diag_bwd=G.timeit(lambda: K.diag_scan_vjp(dh, a, u)))
print("circulant (16, 2048, 256) ms: " + ", ".join(f"{k} {v:.3f}" for k, v in t.items()) +
      f"; fwd/diag {t['circ_fwd'] / t['diag_fwd']:.2f}, bwd/diag bwd {t['circ_bwd'] / t['diag_bwd']:.2f}", flush=True)
res["circulant"] = t
json.dump(res, open(os.path.join(sys.argv[1], "scan_bench.json"), "w"), indent=1, default=str)
PY
exit $rc
