"""Issue 15's CPU goal in one process: a radix-2 butterfly chain (N = 1024, 10 factors, batch
4096, float32) by strux against the dense product and numpy einsum per factor.

Every candidate runs on the same arrays, one call of each per round in a random order (so a
change of load hits all of them, and no case always follows the same one), and the table gives
medians and minimums over the rounds, and the median count of minor page faults per call (a
fresh 16 MiB result costs 4096 of them, ~3 ms on this VM); ratio = baseline median / strux
median. Before timing, every output is checked
against the float64 product x K^T (K = K_1 ... K_P formed in float64).

Candidates, per layout ("bsf": x (batch, N) -> x K^T; "bsl": x (N, batch) -> K x):
- strux: ks_chain (the solver table's choice: the fused tile chain for this shape);
- dense: numpy matmul with K (float32, formed once outside the timing), numpy's BLAS on all cores;
- einsum: the natural numpy recipe, one np.einsum per factor over the (a, b, c, d) reshape;
- (--more) numpy broadcast: per radix-2 factor y = w[:, :, 0] x_0 + w[:, :, 1] x_1 with
  broadcasting, a faster numpy recipe than einsum, listed so the einsum figure is not the only one;
- (--more) strux factor by factor with GEMMs (solver "gemm"), the path before the tiles, and
  the fused tile kernel (solver "fused"), the path before the radix-2 pair kernels.
--backward adds dx and every dw (ks_chain_vjp) against einsum per factor and the dense dy K.

Run: PYTHONPATH=python python bench/cpu_ks_butterfly.py [--rounds 30] [--more] [--backward]
     [--layouts bsf,bsl] [--json FILE]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import statistics
import subprocess
import time

import numpy as np

import strux
from strux import _ext
from strux.ks import ks_chain, ks_chain_vjp, ks_dense
from strux.patterns import butterfly


def einsum_chain(x, ws, ps, layout):
    """y = x K^T (bsf) / K x (bsl), one np.einsum per factor, K_P first."""
    y = x
    for w, (a, b, c, d) in zip(ws[::-1], ps[::-1]):
        if layout == "bsf":
            bt = y.shape[0]
            y = np.einsum("iklj,rilj->rikj", w, y.reshape(bt, a, c, d)).reshape(bt, a * b * d)
        else:
            bt = y.shape[1]
            y = np.einsum("iklj,iljr->ikjr", w, y.reshape(a, c, d, bt)).reshape(a * b * d, bt)
    return y


def broadcast_chain(x, ws, ps, layout):
    """The same product by broadcast multiply-adds per factor (any b, c; c terms per output)."""
    y = x
    for w, (a, b, c, d) in zip(ws[::-1], ps[::-1]):
        if layout == "bsf":
            bt = y.shape[0]
            xs = y.reshape(bt, a, 1, c, d)
            out = w[None, :, :, 0, :] * xs[:, :, :, 0, :]
            for l in range(1, c):
                out += w[None, :, :, l, :] * xs[:, :, :, l, :]
            y = out.reshape(bt, a * b * d)
        else:
            bt = y.shape[1]
            xs = y.reshape(a, 1, c, d, bt)
            out = w[:, :, 0, :, None] * xs[:, :, 0]
            for l in range(1, c):
                out += w[:, :, l, :, None] * xs[:, :, l]
            y = out.reshape(a * b * d, bt)
    return y


def einsum_chain_vjp(dy, x, ws, ps):
    """dx and every dw of the bsf product, one einsum per factor and gradient."""
    bt, acts, y = x.shape[0], [], x
    for w, (a, b, c, d) in zip(ws[::-1], ps[::-1]):
        acts.append(y.reshape(bt, a, c, d))
        y = np.einsum("iklj,rilj->rikj", w, acts[-1]).reshape(bt, a * b * d)
    g, dws = dy, []
    for w, (a, b, c, d), xin in zip(ws, ps, acts[::-1]):
        gq = g.reshape(bt, a, b, d)
        dws.append(np.einsum("rikj,rilj->iklj", gq, xin))
        g = np.einsum("iklj,rikj->rilj", w, gq).reshape(bt, a * c * d)
    return g, dws


def rel_err(got, ref):
    got = np.asarray(got, dtype=np.float64)
    return float(np.linalg.norm(got - ref) / np.linalg.norm(ref))


def machine():
    model = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    except OSError:
        commit = "?"
    return {"cpu": model, "cpus": os.cpu_count(), "strux_threads": strux.get_num_threads(),
            "numpy": np.__version__, "python": platform.python_version(), "commit": commit,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "load_before": os.getloadavg()[0]}


def time_rounds(fns, rounds, warm=2, seed=0):
    """{name: [seconds]}, {name: [minor page faults]}: warm-up calls, then one call of each per
    round in a fresh random order (so no case always follows the same one: numpy's BLAS threads
    spin for a while after a call, and large frees give pages back to the kernel)."""
    names = list(fns)
    for n in names:
        for _ in range(warm):
            fns[n]()
    out, faults = {n: [] for n in names}, {n: [] for n in names}
    order = np.random.default_rng(seed)
    for _ in range(rounds):
        for i in order.permutation(len(names)):
            n = names[i]
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            t0 = time.perf_counter()
            fns[n]()
            out[n].append(time.perf_counter() - t0)
            faults[n].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
    return out, faults


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--radix", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--layouts", default="bsf,bsl")
    ap.add_argument("--more", action="store_true", help="also numpy broadcast and strux's GEMM path")
    ap.add_argument("--backward", action="store_true", help="also dx and every dw (bsf)")
    ap.add_argument("--threads", type=int, default=None, help="strux CPU threads (default: all available)")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    if args.threads:
        strux.set_num_threads(args.threads)

    rng = np.random.default_rng(15)
    ps = butterfly(args.n, args.radix)
    flat = [v for p in ps for v in p]
    ws = [(rng.standard_normal(p) / np.sqrt(p[2])).astype(np.float32) for p in ps]
    K = np.eye(args.n)
    for w, p in zip(ws, ps):
        K = K @ ks_dense(w.astype(np.float64), p)
    K32 = K.astype(np.float32)
    x = rng.standard_normal((args.batch, args.n), dtype=np.float32)
    xT = np.ascontiguousarray(x.T)
    ref = x.astype(np.float64) @ K.T
    info = machine()
    print(f"# {info['date']}  {info['cpu']}, {info['cpus']} CPUs, strux threads {info['strux_threads']}, "
          f"numpy {info['numpy']}, commit {info['commit']}, load {info['load_before']:.2f}")
    print(f"# butterfly({args.n}, {args.radix}) x{len(ps)}, batch {args.batch}, float32, {args.rounds} rounds")

    fns, refs, rows = {}, {}, []
    for lay in args.layouts.split(","):
        xi = x if lay == "bsf" else xT
        r = ref if lay == "bsf" else ref.T
        fns[f"{lay} strux"] = lambda xi=xi, lay=lay: ks_chain(xi, ws, ps, layout=lay)
        if lay == "bsf":
            fns[f"{lay} dense"] = lambda: x @ K32.T
        else:
            fns[f"{lay} dense"] = lambda: K32 @ xT
        fns[f"{lay} einsum"] = lambda xi=xi, lay=lay: einsum_chain(xi, ws, ps, lay)
        if args.more:
            fns[f"{lay} numpy broadcast"] = lambda xi=xi, lay=lay: broadcast_chain(xi, ws, ps, lay)
            fns[f"{lay} strux gemm path"] = lambda xi=xi, lay=lay: _ext.ks_chain_f32(xi, ws, flat, lay, "gemm")
            fns[f"{lay} strux tiles"] = lambda xi=xi, lay=lay: _ext.ks_chain_f32(xi, ws, flat, lay, "fused")
        for k in fns:
            if k.startswith(lay + " "):
                refs[k] = r
    if args.backward:
        dy = rng.standard_normal((args.batch, args.n), dtype=np.float32)
        fns["bwd strux"] = lambda: ks_chain_vjp(dy, x, ws, ps)
        fns["bwd einsum"] = lambda: einsum_chain_vjp(dy, x, ws, ps)
        fns["bwd dense (dx only)"] = lambda: (dy @ K32, None)
        if args.more:
            fns["bwd strux tiles"] = lambda: _ext.ks_chain_vjp_f32(dy, x, ws, flat, "bsf", "fused")
        refs.update({k: dy.astype(np.float64) @ K for k in fns if k.startswith("bwd")})

    errs = {}
    for k, f in fns.items():
        out = f()
        errs[k] = rel_err(out[0] if k.startswith("bwd") else out, refs[k])
    ok = all(e < 1e-5 for e in errs.values())
    if args.backward:  # dw of strux against einsum's (float64 einsum as the reference)
        _, dws = ks_chain_vjp(dy, x, ws, ps)
        _, dws64 = einsum_chain_vjp(dy.astype(np.float64), x.astype(np.float64),
                                    [w.astype(np.float64) for w in ws], ps)
        errs["bwd strux dw (worst factor)"] = max(rel_err(g, g64) for g, g64 in zip(dws, dws64))
        ok = ok and errs["bwd strux dw (worst factor)"] < 1e-5

    times, faults = time_rounds(fns, args.rounds)
    print(f"{'case':28s} {'median ms':>10s} {'min ms':>9s} {'rel err':>9s} {'faults':>7s}  ratio to strux (median / min)")
    for k in fns:
        med, mn = statistics.median(times[k]) * 1e3, min(times[k]) * 1e3
        grp = k.split(" ")[0]
        smed = statistics.median(times[f"{grp} strux"]) * 1e3
        smin = min(times[f"{grp} strux"]) * 1e3
        ratio = "" if k == f"{grp} strux" else f"{med / smed:6.2f}x / {mn / smin:6.2f}x"
        flt = statistics.median(faults[k])
        print(f"{k:28s} {med:10.2f} {mn:9.2f} {errs[k]:9.1e} {flt:7.0f}  {ratio}")
        rows.append({"case": k, "median_ms": med, "min_ms": mn, "rel_err": errs[k], "faults_median": flt,
                     "ratio_median": med / smed, "ratio_min": mn / smin})
    if "bwd strux dw (worst factor)" in errs:
        print(f"bwd strux dw (worst factor) rel err {errs['bwd strux dw (worst factor)']:.1e}")
    info["load_after"] = os.getloadavg()[0]
    print(f"# load after {info['load_after']:.2f}; errors {'ok' if ok else 'TOO LARGE'} (< 1e-5 against float64)")
    for lay in args.layouts.split(","):
        if f"{lay} dense" in fns:
            d = next(r for r in rows if r["case"] == f"{lay} dense")
            e = next(r for r in rows if r["case"] == f"{lay} einsum")
            met = d["ratio_median"] >= 5 and e["ratio_median"] >= 2
            print(f"# goal {lay}: {d['ratio_median']:.2f}x dense (>= 5), {e['ratio_median']:.1f}x einsum (>= 2): "
                  f"{'met' if met else 'MISSED'}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": info, "args": vars(args), "rows": rows, "errors": errs}, fh, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
