#!/usr/bin/env bash
# Focused GPU run for the scan family (< 5 min): build the extension for this chip, run the GPU
# scan tests, time the scan cases (strux.bench.gpu_ks_scan.scan_cases, every diag_scan kernel
# forced in turn through options={"path": ...}). FFTW/BLAS .debs from $DEPS (default .deps, see
# scripts/gpu_build.sh). Writes build.log, pytest.log, scan_bench.json
# under $OUT (default ./out).
set -uo pipefail
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
ROOT=$PWD
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader || true
GPU_CMAKE_ARGS=(-DSTRUX_BUILD_TESTS=OFF)
source scripts/gpu_build.sh
gpu_build || exit 1
t0=$(date +%s)
timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/python/test_cuda_scan.py > "$OUT/pytest.log" 2>&1
rc=$?
tail -5 "$OUT/pytest.log"; echo "== pytest rc=$rc in $(( $(date +%s) - t0 )) s"
timeout 150 python3 - "$OUT" <<'PY'
import json, os, sys, statistics, torch
from strux.bench import gpu_ks_scan as G
from strux import _cuda_scan as K
torch.manual_seed(0)
n = 1 << 29
x = torch.empty(n, device="cuda").uniform_(); y = torch.empty_like(x)
bw = 2 * 4 * n / (G.timeit(lambda: y.copy_(x), reps=10) * 1e-3); del x, y
print(f"copy {bw / 1e12:.2f} TB/s", flush=True)
res = dict(copy_bw=bw, device=torch.cuda.get_device_name(), rows={})
for algo in ("", "lookback", "seq1", "seqv"):
    print(f"== diag_scan path {algo or 'auto'}", flush=True)
    rows = (G.scan_cases(bw, False) if algo == "" else []) + G.diag_cases(bw, options={"path": algo} if algo else None)
    res["rows"][algo or "auto"] = rows
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
