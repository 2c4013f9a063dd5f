"""Where the per-call filter spectrum's time goes at short FFT sizes (issue 12's table, float16,
B = 64, H = 768): fftconv(u, k) (spectrum per call) against FFTConvCUDA (spectrum cached), GPU ms
per call back to back (CUDA events, median of 20), and the CUDA kernels of 10 calls of each
(torch.profiler: name, calls, device time per call), so that a gap between the two is either a
kernel (the spectrum's) or idle GPU time between launches (host-bound). Writes
OUTDIR/fftconv_percall.json. Also the odd lengths of the issue (causal L = 3000, 5000): the same two
times and the fraction of the HBM floor (read u + write y once at the measured copy bandwidth).
    python bench/gpu_fftconv_percall.py OUTDIR
"""
import json
import sys

import torch

from strux import _cuda_fftconv as _fc
from strux.bench.gpu import copy_bandwidth
from strux.bench.timing import kernel_us, time_ms

out = sys.argv[1] if len(sys.argv) > 1 else "."
# (FFT size, mode): L = N circular, N/2 causal; (None, L): causal at that odd L
CASES = [(256, "circular"), (256, "causal"), (1024, "causal"), (None, 3000), (None, 5000)]
B, H = 64, 768
bw = copy_bandwidth()
res = dict(device=torch.cuda.get_device_name(), copy_TBps=bw / 1e12, cases={})


for N, mode in CASES:
    if N is None:
        N, L, mode = "L", mode, "causal"
    else:
        L = N if mode == "circular" else N // 2
    u = torch.randn(B, H, L, device="cuda", dtype=torch.float16)
    k = (torch.randn(H, L, device="cuda") / L ** 0.5).half()
    op = _fc.FFTConvCUDA(k, B, L, mode)
    percall = lambda: _fc.fftconv(u, k, mode)  # noqa: E731
    cached = lambda: op(u)  # noqa: E731
    c = res["cases"][f"{N}_{L}_{mode}"] = dict(
        percall_ms=time_ms(percall, warm=5, reps=20)[0], cached_ms=time_ms(cached, warm=5, reps=20)[0],
        percall_kernels=kernel_us(percall), cached_kernels=kernel_us(cached), describe=op.describe())
    floor_ms = 2 * u.numel() * u.element_size() / bw * 1e3
    c["floor_pct"], c["floor_pct_cached"] = 100 * floor_ms / c["percall_ms"], 100 * floor_ms / c["cached_ms"]
    print(f"N={N} L={L} {mode}: per call {c['percall_ms']:.4f} ms ({c['floor_pct']:.0f}% of the HBM floor), "
          f"cached {c['cached_ms']:.4f} ms ({c['floor_pct_cached']:.0f}%) ({op.describe()})", flush=True)
    for what in ("percall", "cached"):
        ks = c[f"{what}_kernels"]
        print(f"  {what}: kernels {sum(r[2] for r in ks) / 1e3:.4f} ms per call: " +
              "; ".join(f"{n} x{cnt:g} {t:.1f} us" for n, cnt, t in ks[:4]), flush=True)
    del u, k, op
with open(f"{out}/fftconv_percall.json", "w") as fh:
    json.dump(res, fh, indent=1)
