"""diag_scan on the GPU against the copy bandwidth, every solver forced, plus host time.

    python bench/gpu_scan_bw.py OUT_DIR [--quick] [--rows NAME ...] [--solvers PATH ...] [--lean]

For each row of issue 14's table (shapes (B, T, n), DESIGN.md "scan"): forward and backward
time of every applicable solver ("auto" = the plan's own choice, then each forced one), the
fraction of the copy bandwidth measured in the same run (forward moves a, b in and h out;
backward, with the forward's h given, a, h, dh in and da, db out), and two torch baselines:
an elementwise op of the forward's bytes (torch.addcmul: a, b in, one array out) and, for the
real rows, a log-space cumsum scan (positive a). Times: CUDA events, back to back (GPU time),
medians (strux.bench.timing). Host time: diag_scan (1, 16, 8) float32 with a cached plan from
Python, against torch.add of the same tensors. Also circulant_scan (n = 64, 256, 1024) and
block_circulant_scan (p = 4, 8, 16) against their byte floors. Writes OUT_DIR/gpu_scan_bw.json and prints a
markdown table. --solvers: only these ("auto" first is the default to compare against); --lean:
diag_scan rows only (no torch baselines, circulant rows or host times), for the part script.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import torch

from strux import _cuda_scan as K
from strux.bench.timing import back_to_back_ms, copy_bandwidth, host_us

ROWS = [  # name, dtype, (B, T, n)
    ("c64 (16,2048,4096)", torch.complex64, (16, 2048, 4096)),
    ("c64 (8,8192,1024)", torch.complex64, (8, 8192, 1024)),
    ("c64 (32,512,64)", torch.complex64, (32, 512, 64)),
    ("f32 (8,8192,1024)", torch.float32, (8, 8192, 1024)),
    ("f32 (4,65536,256)", torch.float32, (4, 65536, 256)),
    ("bf16 (64,1024,2048)", torch.bfloat16, (64, 1024, 2048)),
    ("f32 (1,4096,16384)", torch.float32, (1, 4096, 16384)),
]
SOLVERS = ["auto", "lookback", "seq1", "seqv", "chunk", "pipe", "tile"]
VEC = {torch.float32: 4, torch.complex64: 2, torch.float16: 8, torch.bfloat16: 8}


def applies(path, dtype, n):
    if path in ("auto", "lookback"):
        return True
    return dtype in VEC and (path != "seqv" or n % VEC[dtype] == 0)


def rel(x, ref):
    w = torch.complex128 if x.is_complex() else torch.float64
    x, ref = x.to(w), ref.to(w)
    return float((x - ref).abs().norm() / ref.abs().norm().clamp_min(1e-300))


def inputs(dtype, shape):
    mag = 0.5 + 0.49 * torch.rand(shape, device="cuda")
    if dtype.is_complex:
        a = torch.polar(mag, 6.3 * torch.rand_like(mag)).to(dtype)
        b = torch.randn(shape, device="cuda", dtype=dtype)
    else:
        a, b = mag.to(dtype), torch.randn(shape, device="cuda").to(dtype)
    return a, b


def row(name, dtype, shape, bw, n_b2b, solvers=SOLVERS, lean=False):
    a, b = inputs(dtype, shape)
    esize = a.element_size()
    numel = a.numel()
    fwd_bytes, bwd_bytes = 3 * numel * esize, 5 * numel * esize
    res = {"row": name, "dtype": str(dtype), "shape": shape, "fwd_bytes": fwd_bytes, "bwd_bytes": bwd_bytes,
           "floor_fwd_ms": fwd_bytes / bw * 1e3, "floor_bwd_ms": bwd_bytes / bw * 1e3, "solvers": {}}
    ref = K.diag_scan(a, b, options={"path": "lookback"})
    dh = torch.randn_like(b)
    for path in solvers:
        if not applies(path, dtype, shape[2]):
            continue
        o = None if path == "auto" else {"path": path}
        r = {}
        try:
            h = K.diag_scan(a, b, options=o)
            r["rel_err_vs_lookback"] = rel(h, ref)
            r["describe"] = K.diag_scan_describe(*shape, dtype=str(dtype).split(".")[1], options=o)
            r["fwd_ms"] = back_to_back_ms(lambda: K.diag_scan(a, b, options=o), n=n_b2b)
            r["bwd_ms"] = back_to_back_ms(lambda: K.diag_scan_vjp(dh, a, b, h=h, options=o), n=n_b2b)
            r["fwd_frac_copy"] = res["floor_fwd_ms"] / r["fwd_ms"]
            r["bwd_frac_copy"] = res["floor_bwd_ms"] / r["bwd_ms"]
            del h
        except Exception as e:  # noqa: BLE001  (a failing solver is a result, not the end of the run)
            r["error"] = f"{type(e).__name__}: {e}"
        res["solvers"][path] = r
        torch.cuda.empty_cache()
    if lean:
        return res
    out = torch.empty_like(b)
    t = back_to_back_ms(lambda: torch.addcmul(b, a, b, out=out), n=n_b2b)
    res["torch_addcmul_ms"], res["torch_addcmul_frac_copy"] = t, res["floor_fwd_ms"] / t
    if not dtype.is_complex:
        la = a.float().abs().log()

        def logcumsum():  # h_t = sum_s exp(L_t - L_s) b_s with L = cumsum(log a): a scan for a > 0
            L = torch.cumsum(la, 1)
            return torch.exp(L) * torch.cumsum(b.float() * torch.exp(-L), 1)

        try:
            res["torch_logcumsum_ms"] = back_to_back_ms(logcumsum, n=max(2, n_b2b // 4), reps=3)
        except torch.OutOfMemoryError:
            res["torch_logcumsum_ms"] = None
    del a, b, dh, ref, out
    torch.cuda.empty_cache()
    return res


def circulant_rows(bw, n_b2b):
    """circulant_scan (B, T, n) = (16, 2048, n) float32, n = 64, 256, 1024, and
    block_circulant_scan with n = 256, p = 4, 8, 16, against their byte floors (forward: read a,
    u, write h; backward: read a, u, dh, write da, du), the baselines for the fused kernels."""
    rows = []
    B, T = 16, 2048
    for n in (64, 256, 1024):
        a = 0.9 * torch.rand(B, T, n, device="cuda") / n
        u, dh = torch.randn(B, T, n, device="cuda"), torch.randn(B, T, n, device="cuda")
        nb = a.numel() * 4
        r = {"op": "circulant_scan", "shape": (B, T, n), "floor_fwd_ms": 3 * nb / bw * 1e3,
             "floor_bwd_ms": 5 * nb / bw * 1e3}
        r["fwd_ms"] = back_to_back_ms(lambda: K.circulant_scan(a, u), n=n_b2b)
        r["bwd_ms"] = back_to_back_ms(lambda: K.circulant_scan_vjp(dh, a, u), n=n_b2b)
        r["fwd_frac_floor"], r["bwd_frac_floor"] = r["floor_fwd_ms"] / r["fwd_ms"], r["floor_bwd_ms"] / r["bwd_ms"]
        try:
            fused = {"path": "fused"}
            r["fused_rel_err_vs_fft"] = rel(K.circulant_scan(a, u, options=fused), K.circulant_scan(a, u))
            r["fused_fwd_ms"] = back_to_back_ms(lambda: K.circulant_scan(a, u, options=fused), n=n_b2b)
            r["fused_fwd_frac_floor"] = r["floor_fwd_ms"] / r["fused_fwd_ms"]
        except Exception as e:  # noqa: BLE001
            r["fused_error"] = f"{type(e).__name__}: {e}"
        rows.append(r)
        del a, u, dh
    n = 256
    for p in (4, 8, 16):
        k = n // p
        a = 0.9 * torch.rand(B, T, p, p, k, device="cuda") / n
        u, dh = torch.randn(B, T, n, device="cuda"), torch.randn(B, T, n, device="cuda")
        na, nu = a.numel() * 4, u.numel() * 4
        r = {"op": "block_circulant_scan", "shape": (B, T, p, p, k), "floor_fwd_ms": (na + 2 * nu) / bw * 1e3,
             "floor_bwd_ms": (2 * na + 3 * nu) / bw * 1e3}
        try:
            r["plan"] = K.block_circulant_scan_describe(B, T, p, k)
            # the transform of a alone (read a, write its half spectra): a bound on the FFT stage
            r["rfft_a_ms"] = back_to_back_ms(lambda: torch.fft.rfft(a, dim=-1), n=max(2, n_b2b // 4), reps=3)
            r["fwd_ms"] = back_to_back_ms(lambda: K.block_circulant_scan(a, u), n=max(2, n_b2b // 4), reps=3)
            r["bwd_ms"] = back_to_back_ms(lambda: K.block_circulant_scan_vjp(dh, a, u), n=max(2, n_b2b // 4), reps=3)
            r["fwd_frac_floor"] = r["floor_fwd_ms"] / r["fwd_ms"]
            r["bwd_frac_floor"] = r["floor_bwd_ms"] / r["bwd_ms"]
        except Exception as e:  # noqa: BLE001
            r["error"] = f"{type(e).__name__}: {e}"
        rows.append(r)
        del a, u, dh
    torch.cuda.empty_cache()
    return rows


def host_rows():
    """Host microseconds per call of the small case (cached plan, torch CUDA tensors)."""
    import strux
    a, b = torch.rand(1, 16, 8, device="cuda"), torch.randn(1, 16, 8, device="cuda")
    fns = {
        "strux.diag_scan (1,16,8)": lambda: strux.diag_scan(a, b),
        "strux._cuda_scan.diag_scan (1,16,8)": lambda: K.diag_scan(a, b),
        "strux._cuda_scan.diag_scan (1,16,8) chunk": lambda: K.diag_scan(a, b, options={"path": "chunk"}),
        "strux._cuda_scan.diag_scan (1,16,8) lookback": lambda: K.diag_scan(a, b, options={"path": "lookback"}),
        "torch.add (1,16,8)": lambda: torch.add(a, b),
    }
    with torch.no_grad():
        return {k: host_us(f, n=200, reps=11) for k, f in fns.items()}


def lean_markdown(res):
    """One line per row: % of copy bandwidth forward / backward of each solver, and its time
    relative to the default's (>1: faster than the default)."""
    names = [p for p in res["rows"][0]["solvers"]] if res["rows"] else []
    lines = [f"copy bandwidth {res['copy_GBps']:.0f} GB/s; per solver: fwd% / bwd% of copy (speed-up vs auto)", "",
             "| row | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for r in res["rows"]:
        auto = r["solvers"].get("auto", {})
        cells = []
        for p in names:
            s = r["solvers"].get(p)
            if s is None:
                cells.append("")
            elif "error" in s:
                cells.append(s["error"][:30])
            else:
                c = f"{100 * s['fwd_frac_copy']:.0f}/{100 * s['bwd_frac_copy']:.0f}"
                if p == "auto":
                    c += " " + s["describe"].split(": ", 1)[1].split(" ")[0]
                elif "fwd_ms" in auto:
                    c += f" ({auto['fwd_ms'] / s['fwd_ms']:.2f}x/{auto['bwd_ms'] / s['bwd_ms']:.2f}x)"
                if s["rel_err_vs_lookback"] > (3e-2 if "bfloat16" in r["dtype"] else 1e-3):
                    c += f" ERR {s['rel_err_vs_lookback']:.0e}"
                cells.append(c)
        lines.append(f"| {r['row']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def markdown(res):
    lines = [f"copy bandwidth {res['copy_GBps']:.0f} GB/s", "",
             "| row | solver | fwd ms | fwd % copy | bwd ms | bwd % copy | err |", "|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        for p, s in r["solvers"].items():
            if "error" in s:
                lines.append(f"| {r['row']} | {p} | {s['error'][:60]} | | | | |")
                continue
            lines.append(f"| {r['row']} | {p} | {s['fwd_ms']:.3f} | {100 * s['fwd_frac_copy']:.0f}% | {s['bwd_ms']:.3f} "
                         f"| {100 * s['bwd_frac_copy']:.0f}% | {s['rel_err_vs_lookback']:.1e} |")
        lc = r.get("torch_logcumsum_ms")
        if "torch_addcmul_ms" not in r:
            continue
        lines.append(f"| {r['row']} | torch addcmul (same bytes) | {r['torch_addcmul_ms']:.3f} | "
                     f"{100 * r['torch_addcmul_frac_copy']:.0f}% | | | |")
        if lc:
            lines.append(f"| {r['row']} | torch log-cumsum scan | {lc:.3f} | | | | |")
    lines += ["", "| op | shape | fwd ms | fwd % floor | bwd ms | bwd % floor |", "|---|---|---|---|---|---|"]
    if "host_us" not in res:
        return "\n".join(lines)
    for r in res.get("circulant", []):
        if "error" in r:
            lines.append(f"| {r['op']} | {r['shape']} | {r['error'][:60]} | | | |")
            continue
        lines.append(f"| {r['op']} | {r['shape']} | {r['fwd_ms']:.3f} | {100 * r['fwd_frac_floor']:.0f}% | "
                     f"{r['bwd_ms']:.3f} | {100 * r['bwd_frac_floor']:.0f}% |")
        if "fused_fwd_ms" in r:
            lines.append(f"| {r['op']} fused | {r['shape']} | {r['fused_fwd_ms']:.3f} | "
                         f"{100 * r['fused_fwd_frac_floor']:.0f}% | | |")
        elif "fused_error" in r:
            lines.append(f"| {r['op']} fused | {r['shape']} | {r['fused_error'][:60]} | | | |")
        if "rfft_a_ms" in r:
            lines.append(f"| torch.fft.rfft(a) alone ({r['plan'].split(': ', 1)[-1]}) | {r['shape']} | "
                         f"{r['rfft_a_ms']:.3f} | {100 * r['floor_fwd_ms'] / r['rfft_a_ms']:.0f}% | | |")
    lines += ["", "| host call | us |", "|---|---|"] + [f"| {k} | {v:.1f} |" for k, v in res["host_us"].items()]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--quick", action="store_true", help="fewer calls per timing")
    ap.add_argument("--rows", nargs="*", help="names of rows to run (default: all)")
    ap.add_argument("--solvers", nargs="*", default=SOLVERS, help="solvers to time (default: all)")
    ap.add_argument("--lean", action="store_true", help="diag_scan rows only")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    bw = copy_bandwidth(1 << 28, reps=10)
    res = {"device": torch.cuda.get_device_name(), "copy_GBps": bw / 1e9, "rows": []}
    for name, dt, shape in ROWS:
        if args.rows and name not in args.rows:
            continue
        print("==", name, flush=True)
        res["rows"].append(row(name, dt, shape, bw, 5 if args.quick else 20, args.solvers, args.lean))
        with open(os.path.join(args.out, "gpu_scan_bw.json"), "w") as f:
            json.dump(res, f, indent=1)
    if args.lean:
        print(lean_markdown(res))
        return 0
    if not args.rows:
        print("== circulant", flush=True)
        res["circulant"] = circulant_rows(bw, 5 if args.quick else 20)
    res["host_us"] = host_rows()
    with open(os.path.join(args.out, "gpu_scan_bw.json"), "w") as f:
        json.dump(res, f, indent=1)
    print(markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
