"""circulant_scan forward on the GPU, every path side by side: B = 16, T = 2048, n = 64..1024, and
B = 64 at n = 256, float32; "auto" (the plan's default), and "fft" / "fused" / "onepass" forced (strux._cuda_options.
circulant_scan_code). ms per call back to back (GPU time), and the fraction of the byte floor:
read a and u, write h (12 bytes per element) at the copy bandwidth measured in the same run.
Also the three-launch and single-pass kernels' agreement with the cuFFT path (max |diff| / max |h|).
Writes OUTDIR/circulant.json.
    python bench/gpu_circulant.py OUTDIR            (scripts/gpu_part_circ.sh)
"""
import json
import os
import sys

import torch

from strux import _cuda_scan as K
from strux.bench.timing import back_to_back_ms, copy_bandwidth

PATHS = ["auto", "fft", "fused", "onepass"]


def main(out):
    torch.manual_seed(0)
    bw = copy_bandwidth(1 << 28, reps=10)
    res = dict(copy_bw=bw, device=torch.cuda.get_device_name(), rows=[])
    print(f"{res['device']}: copy {bw / 1e12:.2f} TB/s", flush=True)
    print(f"{'B,T,n':>14} {'floor us':>9} " + " ".join(f"{p:>16}" for p in PATHS) + "  diff fused/onepass",
          flush=True)
    for B, T, n in [(16, 2048, 64), (16, 2048, 128), (16, 2048, 256), (16, 2048, 512), (16, 2048, 1024),
                    (64, 2048, 256)]:
        a = (2 * torch.rand(B, T, n, device="cuda") - 1) * (0.9 / n)
        u = torch.randn(B, T, n, device="cuda")
        floor_ms = 12 * B * T * n / bw * 1e3
        row = dict(B=B, T=T, n=n, floor_ms=floor_ms, ms={}, frac={}, diff={})
        ref = K.circulant_scan(a, u, options={"path": "fft"})
        for p in PATHS:
            opts = None if p == "auto" else {"path": p}
            try:
                h = K.circulant_scan(a, u, options=opts)
                row["diff"][p] = float((h - ref).abs().max() / ref.abs().max())
                ms = back_to_back_ms(lambda: K.circulant_scan(a, u, options=opts), n=20, reps=5)
                row["ms"][p], row["frac"][p] = ms, floor_ms / ms
            except Exception as e:  # keep the other paths' numbers
                row["ms"][p], row["frac"][p] = None, None
                row.setdefault("errors", {})[p] = repr(e)[:300]
        res["rows"].append(row)
        cell = lambda p: ("failed" if row["ms"][p] is None
                          else f"{row['ms'][p]:.3f} ({100 * row['frac'][p]:.0f}%)")
        print(f"{str((B, T, n)):>14} {1e3 * floor_ms:9.1f} " + " ".join(f"{cell(p):>16}" for p in PATHS) +
              f"  {row['diff'].get('fused', float('nan')):.1e}/{row['diff'].get('onepass', float('nan')):.1e}",
              flush=True)
        for p, e in row.get("errors", {}).items():
            print(f"   {p}: {e}", flush=True)
    with open(os.path.join(out, "circulant.json"), "w") as f:
        json.dump(res, f, indent=1, default=str)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
