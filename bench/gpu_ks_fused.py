"""The fused KS pair (src/cuda/ks/ks_fused_mon.cuh for the Monarch pairs it takes, else
src/cuda/ks/ks_fused.cuh; a forced fused_tb, as in the tb sweep, runs the latter) against the
factor-by-factor chain, two single-factor calls, a dense F.linear and bmm-with-permutations, same
process; batch-first, and batch-last for the Monarch pairs at batch 25088. The table's last column
names the fused kernel that ran.

Run: python bench/gpu_ks_fused.py --out DIR [--quick]. Measures the copy bandwidth first (the
HBM floor of one read of x and one write of y is batch * (N + M) * element size / bandwidth),
then per (pair, dtype, batch): ms per call (CUDA events, median) and back to back (GPU time),
the fused kernel's block shapes (fused_tb) at the large batch, errors vs float64. Inputs larger
than L2 rotate over three copies. Writes DIR/gpu_ks_fused.json and prints a table.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from strux import _cuda_ks as K
from strux.bench.gpu_ks_scan import bmm_operands, bmm_recipe
from strux.bench.timing import back_to_back_ms, copy_bandwidth, median_ms
from strux.patterns import monarch

FUSED = {"chain": "fused"}
FACTORS = {"chain": "factors"}
DT = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}

# (name, patterns K_1, K_2): the Monarch pairs, then the MLP pairs of bench/e2e_ks_mlp.py
PAIRS = [
    ("monarch1024", monarch(1024, 32)),
    ("monarch4096", monarch(4096, 64)),
    ("vit_fc1", [(1, 128, 32, 12), (12, 32, 32, 1)]),
    ("vit_fc2", [(1, 16, 64, 24), (24, 64, 64, 1)]),
    ("gpt2_fc", [(1, 128, 32, 32), (32, 32, 32, 1)]),
    ("gpt2_proj", [(1, 16, 64, 64), (64, 64, 64, 1)]),
]


def widths(ps):
    a1, b1, _, d1 = ps[0]
    a2, _, c2, d2 = ps[-1]
    return a2 * c2 * d2, a1 * b1 * d1  # N (in), M (out)


def dense_of(ws, ps):
    """K = K_1 K_2 (M, N) in float64 from the DESIGN.md formula."""
    Kt = None
    for w, p in zip(ws, ps):
        a, b, c, d = p
        ea = torch.eye(a, dtype=torch.float64, device=w.device)
        ed = torch.eye(d, dtype=torch.float64, device=w.device)
        D = torch.einsum("iklj,ie,jf->ikjelf", w.double(), ea, ed).reshape(a * b * d, a * c * d)
        Kt = D if Kt is None else Kt @ D
    return Kt


def rel(y, ref):
    return ((y.double() - ref).norm() / ref.norm()).item()


def cycling(xs, fn):
    """A no-argument call of fn on the next of xs (rotation past L2)."""
    it = [0]

    def call():
        it[0] = (it[0] + 1) % len(xs)
        return fn(xs[it[0]])
    return call


def safe(fn):
    try:
        return fn()
    except (RuntimeError, ValueError) as e:  # noqa: BLE001 (a row that cannot run says why)
        return f"error: {str(e).splitlines()[0][:200]}"


def case(name, ps, dtype, batch, bw, sweep, layout="bsf"):
    dt = DT[dtype]
    N, M = widths(ps)
    es = torch.finfo(dt).bits // 8
    torch.manual_seed(0)
    ws = [(torch.randn(*p, device="cuda", dtype=torch.float64) / p[2] ** 0.5).to(dt) for p in ps]
    nrot = 3 if batch * (N + M) * es > 40e6 else 1
    bl = layout == "bsl"
    xs = [torch.randn(*((N, batch) if bl else (batch, N)), device="cuda", dtype=dt) for _ in range(nrot)]
    Kd64 = dense_of(ws, ps)
    Kd = Kd64.to(dt)
    opers = [bmm_operands(w, p) for w, p in zip(ws, ps)]

    def bmm2(x):
        z = bmm_recipe(x, *opers[1], ps[1], layout)
        return bmm_recipe(z, *opers[0], ps[0], layout)

    def two_calls(x):
        return K.ks_matmul(K.ks_matmul(x, ws[1], ps[1], layout=layout), ws[0], ps[0], layout=layout)

    fns = {
        "fused": lambda x: K.ks_chain(x, ws, ps, layout=layout, options=FUSED),
        "factors": lambda x: K.ks_chain(x, ws, ps, layout=layout, options=FACTORS),
        "two_calls": two_calls,
        "dense": (lambda x: Kd @ x) if bl else (lambda x: F.linear(x, Kd)),
        "bmm": bmm2,
    }
    row = dict(pair=name, patterns=[list(p) for p in ps], dtype=dtype, batch=batch, layout=layout, N=N, M=M)
    path = safe(lambda: K.ks_chain_path(ps, batch, layout=layout, dtype=dtype, options=FUSED))
    row["path"] = list(path) if isinstance(path, tuple) else [path]
    reps = 20 if batch >= 4096 else 50
    for k, f in fns.items():
        call = cycling(xs, f)
        row[f"{k}_ms"] = safe(lambda: median_ms(call, reps=reps))
        row[f"{k}_b2b_ms"] = safe(lambda: back_to_back_ms(call, n=20 if batch >= 4096 else 50))
    # errors vs float64 on (up to) 2048 rows
    x0 = xs[0][:, :2048].contiguous() if bl else xs[0][:2048]
    ref = Kd64 @ x0.double() if bl else x0.double() @ Kd64.T
    for k, f in fns.items():
        row[f"{k}_err"] = safe(lambda: rel(f(x0), ref))
    floor = batch * (N + M) * es / bw * 1e3
    row["floor_ms"] = floor
    f_b2b = row["fused_b2b_ms"]
    if isinstance(f_b2b, float):
        row["fused_frac_floor"] = floor / f_b2b
        for k in ("factors", "two_calls", "dense", "bmm"):
            v = row[f"{k}_b2b_ms"]
            row[f"speedup_vs_{k}_b2b"] = v / f_b2b if isinstance(v, float) else None
            v = row[f"{k}_ms"]
            row[f"speedup_vs_{k}"] = v / row["fused_ms"] if isinstance(v, float) and isinstance(row["fused_ms"], float) else None
    if sweep:
        tbs = {}
        for tb in (8, 16, 32, 64):
            opts = dict(FUSED, fused_tb=tb)
            call = cycling(xs, lambda x, o=opts: K.ks_chain(x, ws, ps, layout=layout, options=o))
            tbs[tb] = safe(lambda: back_to_back_ms(call))
        row["fused_tb_b2b_ms"] = tbs
    del xs
    torch.cuda.empty_cache()
    return row


def kernel(path):
    """Which fused kernel the path names: "monarch" (ks_fused_mon.cuh), "pair tb N" (ks_fused.cuh),
    else the path's words (factors: why)."""
    text = " ".join(map(str, path))
    if "monarch kernel" in text:
        return "monarch"
    if text.startswith("fused tb "):
        return "pair " + " ".join(text.split()[1:3]).rstrip(",")
    return text[:40]


def fmt(v, p=3):
    return f"{v:.{p}f}" if isinstance(v, float) else ("-" if v is None else str(v)[:18])


def save(out, dev, bw, rows):
    """gpu_ks_fused.json, rewritten after every row (a timeout keeps what ran)."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "gpu_ks_fused.json"), "w") as fh:
        json.dump(dict(device=dev, copy_bytes_per_s=bw, rows=rows), fh, indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--quick", action="store_true", help="the two Monarch pairs at batch 25088 only")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    bw = copy_bandwidth(1 << 28, reps=10)
    dev = torch.cuda.get_device_name()
    print(f"device {dev}: copy {bw / 1e12:.2f} TB/s", flush=True)
    rows = []
    t0 = time.time()
    pairs = PAIRS[:2] if args.quick else PAIRS
    for name, ps in pairs:
        big = name.startswith("monarch")
        batches = (25088, 1, 16, 256) if big else (25088, 256)
        for dtype in ("float32", "bfloat16"):
            for batch in batches:
                if args.quick and batch != 25088:
                    continue
                for layout in (("bsf", "bsl") if big and batch == 25088 else ("bsf",)):
                    # the tb sweep for every pair at the large batch (the MLP pairs decide the e2e rule)
                    r = case(name, ps, dtype, batch, bw, sweep=batch == 25088 and layout == "bsf",
                             layout=layout)
                    rows.append(r)
                    save(args.out, dev, bw, rows)
                    print(f"{name} {layout} {dtype} {batch}: fused {fmt(r['fused_b2b_ms'], 4)} factors "
                          f"{fmt(r['factors_b2b_ms'], 4)} ({time.time() - t0:.0f} s)", flush=True)
    save(args.out, dev, bw, rows)
    lines = ["| pair | layout | dtype | batch | fused ms (b2b) | factors | two calls | dense | bmm | floor | "
             "frac floor | x factors (b2b) | err fused / factors | tb sweep b2b | path |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        sw = r.get("fused_tb_b2b_ms")
        sw = " ".join(f"{k}:{fmt(v, 4)}" for k, v in sw.items()) if sw else ""
        lines.append(
            f"| {r['pair']} | {r['layout']} | {r['dtype']} | {r['batch']} | {fmt(r['fused_ms'], 4)} ({fmt(r['fused_b2b_ms'], 4)}) | "
            f"{fmt(r['factors_ms'], 4)} ({fmt(r['factors_b2b_ms'], 4)}) | {fmt(r['two_calls_ms'], 4)} | "
            f"{fmt(r['dense_ms'], 4)} ({fmt(r['dense_b2b_ms'], 4)}) | {fmt(r['bmm_ms'], 4)} ({fmt(r['bmm_b2b_ms'], 4)}) | "
            f"{fmt(r['floor_ms'], 4)} | {fmt(r.get('fused_frac_floor'), 2)} | "
            f"{fmt(r.get('speedup_vs_factors'), 2)} ({fmt(r.get('speedup_vs_factors_b2b'), 2)}) | "
            f"{fmt(r['fused_err'], 1) if not isinstance(r['fused_err'], float) else format(r['fused_err'], '.1e')} / "
            f"{format(r['factors_err'], '.1e') if isinstance(r['factors_err'], float) else r['factors_err']} | {sw} | "
            f"{kernel(r['path'])} |")
    print("\n".join(lines))
    big = [r for r in rows if r["batch"] == 25088 and isinstance(r.get("speedup_vs_factors_b2b"), float)]
    if big:
        s = [r["speedup_vs_factors_b2b"] for r in big]
        print(f"batch 25088: fused vs factors back to back: median {statistics.median(s):.2f}x, "
              f">= 1.3x in {sum(v >= 1.3 for v in s)}/{len(s)}; >= 50% of floor in "
              f"{sum(r['fused_frac_floor'] >= 0.5 for r in big)}/{len(big)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
