"""Where the diag_scan `rows` solver should be the automatic choice: n = 1 problems (the time-last
layout (B, n, T) seen as (B * n, T, 1)) from a few rows to many, against the solvers the automatic
rule picks there today (chunk, seq1), forward and backward, % of copy bandwidth.

    python bench/gpu_scan_rows_rule.py [OUT.json]

Each row count R runs T = max(1024, 2^24 / R) steps (64 MiB per float32 array at most), so every
case moves enough bytes to be timed against the copy bandwidth measured in the same run. Each
forced solver is checked against the automatic one (relative error). Prints one line per case.
"""
from __future__ import annotations

import json
import sys

import torch

from strux import _cuda_scan as K
from strux.bench.timing import back_to_back_ms, copy_bandwidth

ROWS = [33, 132, 264, 528, 1056, 2112, 8448]
SOLVERS = ["auto", "rows", "chunk", "seq1"]


def rel(x, y):
    x, y = x.to(torch.complex128 if x.is_complex() else torch.float64), y.to(torch.complex128 if y.is_complex() else torch.float64)
    return float((x - y).abs().norm() / y.abs().norm().clamp_min(1e-300))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else None
    bw = copy_bandwidth()
    print(f"copy bandwidth {bw / 1e9:.0f} GB/s; ms (% of copy bw) per solver; err = forced vs auto", flush=True)
    res = {"copy_bw": bw, "rows": []}
    for dt in (torch.float32, torch.complex64, torch.bfloat16):
        for R in ROWS:
            T = max(1024, (1 << 24) // R)
            g = torch.Generator(device="cuda").manual_seed(R)
            mag = 0.5 + 0.49 * torch.rand(R, T, 1, device="cuda", generator=g)
            if dt.is_complex:
                a = torch.polar(mag, 6.3 * torch.rand(R, T, 1, device="cuda", generator=g))
                b = torch.randn(R, T, 1, device="cuda", dtype=dt, generator=g)
            else:
                a = mag.to(dt)
                b = torch.randn(R, T, 1, device="cuda", generator=g).to(dt)
            dh = torch.randn_like(b)
            esz = a.element_size()
            fwd_bytes, bwd_bytes = 3 * a.numel() * esz, 5 * a.numel() * esz
            row = {"dtype": str(dt)[6:], "R": R, "T": T,
                   "auto_is": K.diag_scan_describe(R, T, 1, str(dt)[6:])}
            h_ref = K.diag_scan(a, b)
            line = f"{row['dtype']:>9} R={R:<5} T={T:<6}"
            for s in SOLVERS:
                o = None if s == "auto" else {"path": s}
                h = K.diag_scan(a, b, options=o)
                err = rel(h, h_ref)
                f = back_to_back_ms(lambda: K.diag_scan(a, b, options=o), n=10, reps=3)
                bk = back_to_back_ms(lambda: K.diag_scan_vjp(dh, a, b, h=h_ref, options=o), n=10, reps=3)
                row[s] = {"fwd_ms": f, "bwd_ms": bk, "err": err}
                line += (f" | {s} {f:.3f} ({100 * fwd_bytes / bw / f * 1e3:.0f}%)"
                         f" / {bk:.3f} ({100 * bwd_bytes / bw / bk * 1e3:.0f}%) e{err:.0e}")
            res["rows"].append(row)
            print(line + f" | auto: {row['auto_is'][:40]}", flush=True)
            del a, b, dh, h, h_ref
    if out:
        with open(out, "w") as fh:
            json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
