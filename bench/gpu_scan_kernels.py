"""Focused GPU timing of the scan kernels: copy bandwidth, the scan cases of strux.bench.gpu_ks_scan
with every diag_scan kernel forced in turn (plan options {"path": "lookback" | "seq1" | "seqv"};
"auto" = the plan's choice), and circulant_scan (16, 2048, 256) spatial / Fourier forward and
backward against a float32 diag_scan of the same bytes (read a, u, write h). Times through
strux.bench.timing. Writes OUTDIR/scan_bench.json.
    python bench/gpu_scan_kernels.py OUTDIR     (scripts/gpu_focus.sh scan)
"""
import json
import os
import sys

import torch

from strux import _cuda_scan as K
from strux.bench import gpu_ks_scan as G
from strux.bench.timing import copy_bandwidth, median_ms


def main(out):
    torch.manual_seed(0)
    bw = copy_bandwidth(1 << 29, reps=10)
    print(f"copy {bw / 1e12:.2f} TB/s", flush=True)
    res = dict(copy_bw=bw, device=torch.cuda.get_device_name(), rows={})
    for path in ("auto", "lookback", "seq1", "seqv"):
        print(f"== diag_scan path {path}", flush=True)
        options = None if path == "auto" else {"path": path}
        try:
            rows = (G.scan_cases(bw, False) if options is None else []) + G.diag_cases(bw, options=options)
        except ValueError as e:  # a forced kernel that does not apply to a case: keep the other paths
            print(f"== diag_scan path {path}: {e}", flush=True)
            rows = [dict(error=str(e))]
        res["rows"][path] = rows
    B, T, n = 16, 2048, 256
    a = torch.randn(B, T, n, device="cuda") * (0.9 / n)
    u = torch.randn(B, T, n, device="cuda")
    dh = torch.randn_like(u)
    ah = torch.fft.rfft(a, dim=-1)
    t = dict(circ_fwd=median_ms(lambda: K.circulant_scan(a, u)),
             circ_fourier_fwd=median_ms(lambda: K.circulant_scan(ah, u, fourier=True)),
             circ_bwd=median_ms(lambda: K.circulant_scan_vjp(dh, a, u)),
             circ_fourier_bwd=median_ms(lambda: K.circulant_scan_vjp(dh, ah, u, fourier=True)),
             diag_fwd=median_ms(lambda: K.diag_scan(a, u)),
             diag_bwd=median_ms(lambda: K.diag_scan_vjp(dh, a, u)))
    print("circulant (16, 2048, 256) ms: " + ", ".join(f"{k} {v:.3f}" for k, v in t.items()) +
          f"; fwd/diag {t['circ_fwd'] / t['diag_fwd']:.2f}, bwd/diag bwd {t['circ_bwd'] / t['diag_bwd']:.2f}",
          flush=True)
    res["circulant"] = t
    with open(os.path.join(out, "scan_bench.json"), "w") as f:
        json.dump(res, f, indent=1, default=str)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
