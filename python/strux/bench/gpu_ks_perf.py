"""Focused GPU bench of the ks kernels (scripts/gpu_perf_ks.sh): the ks cases of gpu_ks_scan
(ours vs bmm-with-permutations vs dense, fp32, batch 25088, both layouts; bf16/fp16 rows), a
summary of wins against bmm, and the forward times and float64 errors of each tensor-core
variant (STRUX_KS_TC_VAR=0, 1, one subprocess each: the knob is read once per process).

Run: python -m strux.bench.gpu_ks_perf --out DIR
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

PATS = [(1, 48, 48, 16), (2, 96, 384, 4), (2, 192, 48, 4), (1, 768, 768, 1), (6, 64, 64, 1),
        (1, 768, 192, 2), (4, 64, 64, 4), (1, 256, 256, 4), (4, 96, 96, 2), (16, 64, 64, 1)]


def ref64(x, w, p, layout):
    """float64 product through bmm with permutations (the same formula, a different code)."""
    import torch
    a, b, c, d = p
    batch = x.shape[0] if layout == "bsf" else x.shape[1]
    x, w = x.double(), w.double()
    if layout == "bsf":
        xp = x.view(batch, a, c, d).permute(1, 3, 0, 2).reshape(a * d, batch, c)
        yp = torch.bmm(xp, w.permute(0, 3, 2, 1).reshape(a * d, c, b))
        return yp.view(a, d, batch, b).permute(2, 0, 3, 1).reshape(batch, a * b * d)
    xp = x.view(a, c, d, batch).permute(0, 2, 1, 3).reshape(a * d, c, batch)
    yp = torch.bmm(w.permute(0, 3, 1, 2).reshape(a * d, b, c), xp)
    return yp.view(a, d, b, batch).permute(0, 2, 1, 3).reshape(a * b * d, batch)


def forward_times(batch=25088):
    """{"pattern layout": [ms, rel err vs float64]} of the current process's kernels."""
    import torch
    from strux import _cuda_ks_scan as K
    from strux.bench.gpu_ks_scan import timeit
    out = {}
    for p in PATS:
        a, b, c, d = p
        w = torch.randn(*p, device="cuda") / c ** 0.5
        for layout in ("bsf", "bsl"):
            x = torch.randn(batch, a * c * d, device="cuda") if layout == "bsf" else \
                torch.randn(a * c * d, batch, device="cuda")
            y = K.ks_matmul(x, w, p, layout=layout)
            r = ref64(x, w, p, layout)
            err = ((y.double() - r).norm() / r.norm()).item()
            del r, y
            out[f"{p} {layout}"] = [timeit(lambda: K.ks_matmul(x, w, p, layout=layout)), err]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--variant", action="store_true", help="print forward times as JSON only")
    args = ap.parse_args()
    if args.variant:
        print(json.dumps(forward_times()))
        return
    from strux.bench.gpu_ks_scan import ceilings, ks_cases
    import torch
    torch.manual_seed(0)
    bw, fl = ceilings()
    print(f"device {torch.cuda.get_device_name()}: copy {bw / 1e12:.2f} TB/s, fp32 {fl / 1e12:.1f} TFLOP/s", flush=True)
    rows = ks_cases(bw, fl, 25088, False)
    var = {"table": forward_times()}
    for v in range(2):
        env = dict(os.environ, STRUX_KS_TC_VAR=str(v))
        r = subprocess.run([sys.executable, "-m", "strux.bench.gpu_ks_perf", "--variant"], env=env,
                           capture_output=True, text=True, timeout=120)
        try:
            var[f"v{v}"] = json.loads(r.stdout.strip().splitlines()[-1])
        except Exception:  # noqa: BLE001 - report and go on
            print(f"variant {v} run failed:", r.stderr[-2000:])
    vn = list(var)
    f32 = [x for x in rows if x.get("dtype") == "float32"]
    lines = ["| pattern | layout | ours ms | " + " | ".join(f"{v} ms (err64)" for v in vn) +
             " | bmm ms | dense ms | floor ms | bwd ms | x bmm | err vs fp32 dense |",
             "|---|---|---|" + "---|" * len(vn) + "---|---|---|---|---|---|"]
    nan = [float("nan"), float("nan")]
    for x in f32:
        key = f"{tuple(x['pattern'])} {x['layout']}"
        vs = " | ".join(f"{var[v].get(key, nan)[0]:.3f} ({var[v].get(key, nan)[1]:.1e})" for v in vn)
        lines.append(f"| {tuple(x['pattern'])} | {x['layout']} | {x['ms']:.3f} | {vs} | "
                     f"{x['bmm_ms']:.3f} | {x['dense_ms']:.3f} | {x['floor_ms']:.3f} | {x['bwd_ms']:.3f} | "
                     f"{x['speedup_vs_bmm']:.2f} | {x['rel_err_vs_dense']:.1e} |")
    for x in rows:
        if x.get("dtype") != "float32":
            lines.append(f"| {tuple(x['pattern'])} | bsl {x['dtype']} | {x['ms']:.3f} | | | | {x['floor_ms']:.3f} | | | |")
    for lay in ("bsf", "bsl"):
        s = [x["speedup_vs_bmm"] for x in f32 if x["layout"] == lay]
        lines.append(f"{lay}: faster than bmm in {sum(v > 1 for v in s)}/{len(s)}, median {statistics.median(s):.2f}x")
    s = [x["speedup_vs_bmm"] for x in f32]
    lines.append(f"all: faster than bmm in {sum(v > 1 for v in s)}/{len(s)}, median {statistics.median(s):.2f}x")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "gpu_ks_perf.json"), "w") as fh:
        json.dump(dict(copy_bw=bw, fp32_flops=fl, rows=rows, variants=var), fh, indent=1, default=str)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
