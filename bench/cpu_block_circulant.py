"""Issue 14's block-circulant CPU goal: strux.block_circulant_scan against the numpy recipe
(rfft, a time loop of per-frequency p x p einsums, irfft; python/strux/bench/scan.py), at the
`strux bench --family scan` shapes (p = 2, 4, 8, 16), in one process per build.

Each round calls every candidate once in a fresh random order; the child prints medians and
minimums (ms) and ratio = numpy median / strux median. With --builds DIR1,DIR2 the parent runs
one child per build per round, alternating (so a change of load on this shared machine hits
both builds), and reports the load average before and after. Outputs are checked against the
float64 recipe before timing.

Run: python bench/cpu_block_circulant.py [--rounds 15] [--builds python,/tmp/base] [--ps 2,4,8,16]
     [--vjp]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

SHAPES = {2: (4, 512, 64), 4: (4, 512, 64), 8: (4, 256, 32), 16: (4, 256, 16)}  # p: (B, T, k)


def child(ps, rounds, vjp):
    import strux
    from strux.bench.scan import _block_recipe, block_circulant_case

    fns, checks = {}, {}
    for p in ps:
        B, T, k = SHAPES[p]
        c = block_circulant_case(B=B, T=T, p=p, k=k)
        fns[f"strux p={p}"], fns[f"numpy p={p}"] = c.strux, c.baseline
        checks[p] = (c.strux, c.reference)
        if vjp:
            rng = np.random.default_rng(1)
            a = (rng.standard_normal((B, T, p, p, k)) * 0.02).astype(np.float32)
            u = rng.standard_normal((B, T, p * k)).astype(np.float32)
            dh = rng.standard_normal((B, T, p * k)).astype(np.float32)
            fns[f"vjp p={p}"] = lambda a=a, u=u, dh=dh: strux.block_circulant_scan_vjp(dh, a, u)
    for p, (f, ref) in checks.items():
        r = ref()
        err = np.linalg.norm(np.asarray(f(), np.float64) - r) / np.linalg.norm(r)
        assert err < 1e-4, (p, err)
    names = list(fns)
    for n in names:
        fns[n]()
    t = {n: [] for n in names}
    order = np.random.default_rng(0)
    for _ in range(rounds):
        for i in order.permutation(len(names)):
            t0 = time.perf_counter()
            fns[names[i]]()
            t[names[i]].append(time.perf_counter() - t0)
    out = {}
    for p in ps:
        s, n = t[f"strux p={p}"], t[f"numpy p={p}"]
        out[p] = {"strux_med": statistics.median(s) * 1e3, "strux_min": min(s) * 1e3,
                  "numpy_med": statistics.median(n) * 1e3, "numpy_min": min(n) * 1e3,
                  "ratio_med": statistics.median(n) / statistics.median(s), "ratio_min": min(n) / min(s)}
        if vjp:
            out[p]["vjp_med"] = statistics.median(t[f"vjp p={p}"]) * 1e3
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--builds", default="")
    ap.add_argument("--alternations", type=int, default=3)
    ap.add_argument("--ps", default="2,4,8,16")
    ap.add_argument("--vjp", action="store_true")
    ap.add_argument("--child", action="store_true")
    args = ap.parse_args()
    ps = [int(x) for x in args.ps.split(",")]
    if args.child or not args.builds:
        return child(ps, args.rounds, args.vjp)
    builds = args.builds.split(",")
    res = {b: [] for b in builds}
    print(f"load before {os.getloadavg()}", flush=True)
    for _ in range(args.alternations):
        for b in builds:
            env = dict(os.environ, PYTHONPATH=b)
            cmd = [sys.executable, os.path.abspath(__file__), "--child", "--rounds", str(args.rounds), "--ps", args.ps]
            if args.vjp:
                cmd.append("--vjp")
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            res[b].append(json.loads(r.stdout))
    print(f"load after {os.getloadavg()}")
    for p in ps:
        # numpy's median over every child of every build: the same recipe, so one yardstick
        # (a child's own numpy time moves with what the machine does during that child)
        pooled = statistics.median([r[str(p)]["numpy_med"] for b in builds for r in res[b]])
        for b in builds:
            runs = [r[str(p)] for r in res[b]]
            med = statistics.median([r["strux_med"] for r in runs])
            mn = min(r["strux_min"] for r in runs)
            rm = statistics.median([r["ratio_med"] for r in runs])
            nm = statistics.median([r["numpy_med"] for r in runs])
            extra = f" vjp {statistics.median([r['vjp_med'] for r in runs]):.2f} ms" if args.vjp else ""
            print(f"p={p:2d} {b:16s} strux med {med:6.2f} min {mn:6.2f} ms | numpy med {nm:6.2f} (all {pooled:6.2f}) | "
                  f"all-numpy/strux {pooled / med:5.2f}x, same-child {rm:5.2f}x "
                  f"{[round(r['ratio_med'], 2) for r in runs]}" + extra)


if __name__ == "__main__":
    main()
