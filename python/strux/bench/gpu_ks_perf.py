"""Focused GPU bench of the ks kernels (scripts/gpu_perf_ks.sh): the ks cases of gpu_ks_scan
(ours vs bmm-with-permutations vs dense, fp32, batch 25088, both layouts; bf16/fp16 rows), a
summary of wins against bmm, and the forward times and float64 errors of each float32 product
path forced (STRUX_KS_PATH=tc: the ks kernels, =blas: cuBLAS on strided views, =stream: the
batch-last streaming kernel; the plan reads the knob at construction, so one process times all).

Run: python -m strux.bench.gpu_ks_perf --out DIR
     python -m strux.bench.gpu_ks_perf --quick   (batch-last only: forced paths and streaming
     tiles back to back, forward and dx, vs bmm; a few seconds)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics

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


def bmm_f32(x, wl, wf, p, layout):
    """bmm with permutations (the baseline of gpu_ks_scan.ks_cases)."""
    import torch
    a, b, c, d = p
    if layout == "bsf":
        batch = x.shape[0]
        xp = x.view(batch, a, c, d).permute(1, 3, 0, 2).reshape(a * d, batch, c)
        return torch.bmm(xp, wf).view(a, d, batch, b).permute(2, 0, 3, 1).reshape(batch, a * b * d)
    batch = x.shape[1]
    xp = x.view(a, c, d, batch).permute(0, 2, 1, 3).reshape(a * d, c, batch)
    return torch.bmm(wl, xp).view(a, d, b, batch).permute(0, 2, 1, 3).reshape(a * b * d, batch)


def back_to_back(fn, n=20):
    """ms per call of n calls between two events: the GPU time (the per-call timer also counts
    host overhead that leaves the GPU idle). A ~2 ms GPU sleep before the first event lets the
    host queue all n calls first, so the figure is GPU time even where a call's host work takes
    longer than its kernels."""
    import torch
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(5):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(4_000_000)
        e0.record()
        for _ in range(n):
            fn()
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1) / n)
    return statistics.median(ts)


def with_env(env, fn):
    """fn() with the environment variables of `env` set (None: removed), then restored."""
    old = {k: os.environ.get(k) for k in env}
    try:
        for k, v in env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        return fn()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def b2b_times(batch=25088):
    """{"pattern layout": [ours ms, bmm ms, blas ms, stream ms]}, back to back (no host overhead in
    the figure); the forced paths for batch-last only (nan where a path does not apply)."""
    import torch
    from strux import _cuda_ks_scan as K
    out = {}
    for p in PATS:
        a, b, c, d = p
        w = torch.randn(*p, device="cuda") / c ** 0.5
        wf = w.permute(0, 3, 2, 1).reshape(a * d, c, b).contiguous()
        wl = w.permute(0, 3, 1, 2).reshape(a * d, b, c).contiguous()
        for layout in ("bsf", "bsl"):
            x = torch.randn(batch, a * c * d, device="cuda") if layout == "bsf" else \
                torch.randn(a * c * d, batch, device="cuda")
            f = lambda: K.ks_matmul(x, w, p, layout=layout)  # noqa: E731
            row = [back_to_back(f), back_to_back(lambda: bmm_f32(x, wl, wf, p, layout))]
            for path in ("blas", "stream"):
                env = {"STRUX_KS_PATH": path}
                takes = layout == "bsl" and with_env(env, lambda: K._ext.cuda_ks_path(
                    list(p), batch, True, 0)[0]) == path
                row.append(with_env(env, lambda: back_to_back(f)) if takes else float("nan"))
            out[f"{p} {layout}"] = row
    return out


def quick(batch=25088):
    """Batch-last float32 only: per pattern, back-to-back ms of forward and dx for the default
    path, each forced path (kernels, cuBLAS, stream) and each streaming shape (m16 tiles per warp
    item, batch tile), bmm's forward, and the float64 error of the streaming forward and dx.
    Returns (lines, data)."""
    import torch
    from strux import _cuda_ks_scan as K
    torch.manual_seed(0)
    cols = [("auto", {}), ("tc", {"STRUX_KS_PATH": "tc"}), ("blas", {"STRUX_KS_PATH": "blas"}),
            ("stream", {"STRUX_KS_PATH": "stream"})] + \
        [(f"m{mt}t{tn}", {"STRUX_KS_PATH": "stream", "STRUX_KS_STREAM_TN": tn, "STRUX_KS_STREAM_MT": mt})
         for mt in ("1", "2") for tn in ("128", "64", "32")]
    lines = ["bsl fp32 back to back ms, fwd (dx): " + " | ".join(n for n, _ in cols) +
             " | bmm fwd | x bmm (auto fwd) | x blas (stream fwd) | err64 stream fwd / dx | paths"]
    data = {}
    for p in PATS:
        a, b, c, d = p
        w = torch.randn(*p, device="cuda") / c ** 0.5
        wl = w.permute(0, 3, 1, 2).reshape(a * d, b, c).contiguous()
        x = torch.randn(a * c * d, batch, device="cuda")
        dy = torch.randn(a * b * d, batch, device="cuda")
        fwd = lambda: K.ks_matmul(x, w, p, layout="bsl")  # noqa: E731
        bx = lambda: K._ks_bwd(dy, x, w, p, "bsl", need_dx=True, need_dw=False)  # noqa: E731
        row = {}
        for name, env in cols:
            env = {"STRUX_KS_PATH": None, "STRUX_KS_STREAM_TN": None, "STRUX_KS_STREAM_MT": None, **env}
            path = with_env(env, lambda: tuple(K._ext.cuda_ks_path(list(p), batch, True, 0)))
            want = env["STRUX_KS_PATH"]
            if want == "tc":
                want = "kernels"
            # nan where the forced path does not apply (a plan then falls back to the kernels)
            nan = float("nan")
            row[name] = (with_env(env, lambda: back_to_back(fwd)) if want in (None, path[0]) else nan,
                         with_env(env, lambda: back_to_back(bx)) if want in (None, path[1]) else nan)
        row["bmm"] = back_to_back(lambda: bmm_f32(x, wl, None, p, "bsl"))
        env = {"STRUX_KS_PATH": "stream", "STRUX_KS_STREAM_TN": None, "STRUX_KS_STREAM_MT": None}
        e_f = e_b = float("nan")
        forced = with_env(env, lambda: K._ext.cuda_ks_path(list(p), batch, True, 0))
        if forced[0] == "stream":
            y = with_env(env, fwd)
            r = ref64(x, w, p, "bsl")
            e_f = ((y.double() - r).norm() / r.norm()).item()
            del y, r
        if forced[1] == "stream":
            dx = with_env(env, bx)[0]
            r = ref64(dy, w.transpose(1, 2).contiguous(), (a, c, b, d), "bsl")
            e_b = ((dx.double() - r).norm() / r.norm()).item()
            del r, dx
        paths = tuple(K._ext.cuda_ks_path(list(p), batch, True, 0))
        data[str(p)] = dict(row=row, err=(e_f, e_b), paths=paths)
        cells = " | ".join(f"{row[n][0]:.4f} ({row[n][1]:.4f})" for n, _ in cols)
        lines.append(f"{p}: {cells} | {row['bmm']:.4f} | {row['bmm'] / row['auto'][0]:.2f} | "
                     f"{row['blas'][0] / row['stream'][0]:.2f} | {e_f:.1e} / {e_b:.1e} | {paths}")
    return lines, data


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
    ap.add_argument("--quick", action="store_true", help="batch-last paths back to back only")
    args = ap.parse_args()
    if args.quick:
        import torch
        lines, data = quick()
        print(f"device {torch.cuda.get_device_name()}")
        print("\n".join(lines))
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "gpu_ks_quick.json"), "w") as fh:
            json.dump(data, fh, indent=1)
        return
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
    from strux import _cuda_ks_scan as K
    for path in ("tc", "blas", "stream"):
        os.environ["STRUX_KS_PATH"] = path
        var[path] = forward_times()
        os.environ.pop("STRUX_KS_PATH")
    b2b = b2b_times()
    pick = {f"{p} {lay}": K._ext.cuda_ks_path(list(p), 25088, lay == "bsl", 0)[0]
            for p in PATS for lay in ("bsf", "bsl")}
    vn = list(var)
    f32 = [x for x in rows if x.get("dtype") == "float32"]
    lines = ["| pattern | layout | ours ms | " + " | ".join(f"{v} ms (err64)" for v in vn) +
             " | bmm ms | dense ms | floor ms | bwd ms | x bmm | err vs fp32 dense | path |",
             "|---|---|---|" + "---|" * len(vn) + "---|---|---|---|---|---|---|"]
    nan = [float("nan"), float("nan")]
    for x in f32:
        key = f"{tuple(x['pattern'])} {x['layout']}"
        vs = " | ".join(f"{var[v].get(key, nan)[0]:.3f} ({var[v].get(key, nan)[1]:.1e})" for v in vn)
        lines.append(f"| {tuple(x['pattern'])} | {x['layout']} | {x['ms']:.3f} | {vs} | "
                     f"{x['bmm_ms']:.3f} | {x['dense_ms']:.3f} | {x['floor_ms']:.3f} | {x['bwd_ms']:.3f} | "
                     f"{x['speedup_vs_bmm']:.2f} | {x['rel_err_vs_dense']:.1e} | {pick.get(key)} |")
    for x in rows:
        if x.get("dtype") != "float32":
            lines.append(f"| {tuple(x['pattern'])} | bsl {x['dtype']} | {x['ms']:.3f} | | | | {x['floor_ms']:.3f} | | | |")
    for lay in ("bsf", "bsl"):
        s = [x["speedup_vs_bmm"] for x in f32 if x["layout"] == lay]
        lines.append(f"{lay}: faster than bmm in {sum(v > 1 for v in s)}/{len(s)}, median {statistics.median(s):.2f}x")
    for v in vn:
        s = [x["bmm_ms"] / var[v][f"{tuple(x['pattern'])} {x['layout']}"][0] for x in f32
             if f"{tuple(x['pattern'])} {x['layout']}" in var[v]]
        if s:
            lines.append(f"{v} forced: faster than bmm in {sum(u > 1 for u in s)}/{len(s)}")
    lines.append("back to back (ms per call, 20 calls between events): pattern layout ours / bmm (x bmm)"
                 " [forced blas / stream]")
    for k, (o, bm, bl, st) in b2b.items():
        lines.append(f"  {k}: {o:.3f} / {bm:.3f} ({bm / o:.2f}) [{bl:.3f} / {st:.3f}]")
    s = [x["speedup_vs_bmm"] for x in f32]
    lines.append(f"all: faster than bmm in {sum(v > 1 for v in s)}/{len(s)}, median {statistics.median(s):.2f}x")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "gpu_ks_perf.json"), "w") as fh:
        json.dump(dict(copy_bw=bw, fp32_flops=fl, rows=rows, variants=var, back_to_back=b2b), fh, indent=1, default=str)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
