"""ksmm's whole pattern list on the GPU (issue 15, speed goal 1): strux.ks_matmul (default
choice) against bmm with permutations (the baseline) and dense F.linear, batch 25088, float32
and bfloat16, batch-size-first and batch-size-last, same process.

Per pattern, dtype and layout: CUDA-event medians (strux.bench.timing) of strux, of bmm with
permutations (weights laid out for bmm outside the timed call) and, where the dense product does
at most 16x the FLOPs (a*d <= 16), of dense F.linear / torch.mm with K formed once. Accuracy:
one strux call per pattern against a float64 reference on the first REF_ROWS batch entries
(the same formula through bmm in float64), and the same for bmm in the run's dtype, so a
half-type error reads against bmm's own.

Batch-first d > 1 rows (where the solver table chooses between the fused kernels and the
transpositions + cuBLAS ("tr") from the pattern's shape) also time the other of the two paths,
forced, where it applies: row["alt_ms"] = {path: ms}; the summary lists the rows where the
alternative was > 5% faster than the default choice (a rule to revisit).

Patterns whose tensors (x, y and bmm's permuted copies; dense K) pass --mem-gb are skipped and
said so. --max-seconds: every pattern's time is estimated from its bytes and FLOPs; when the
whole list does not fit, patterns are taken evenly from it (every k-th, deterministic) and the
output says how many ran.

Rows with a*d <= 8 (both layouts) also time the forced-only dense path (W expanded into the
dense K, one cuBLAS GEMM: src/cuda/ks/ks_dense.cu) as row["dense_path_ms"], with its accuracy on
the REF_ROWS entries (row["dense_path_err"]); the summary lists where it beat the default by > 5%,
by a*d, so a default rule can be read off the JSON (bench/NOTES-gpu-ks-scan.md "ks-dense";
bench/ks_rule_check.py --dense prints a candidate rule's outcome).

--focus tr-large: only the batch-first d > 1 patterns whose float32 row segments are over 48 KB
(the rows the large-segment tr rule decides, both sides of it: bench/NOTES-gpu-ks-scan.md
"ks-path-rule"), sampled evenly to fit, plus --rest N patterns taken evenly from the others (their
time counted first). --focus dense: only the patterns with a*d <= 8 (the dense path's rows),
sampled evenly to fit.

Run: python bench/gpu_ks_sweep.py --out DIR [--max-seconds S] [--batch B] [--dtypes float32,bfloat16]
     [--focus tr-large --rest N | --focus dense]
(PYTHONPATH=python, as scripts/gpu_build.sh sets). Writes DIR/ks_sweep.json and prints a summary.
"""
from __future__ import annotations

import argparse
import gc
import json
import math
import os
import statistics
import time

import torch
import torch.nn.functional as F

import strux
from strux import _cuda, _cuda_ks
from strux.bench.gpu_ks_scan import bmm_operands, bmm_recipe
from strux.bench.timing import time_ms

PATTERN_FILE = os.path.join(os.path.dirname(strux.__file__), "bench", "ksmm_patterns.txt")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
TOL = {"float32": 1e-5, "bfloat16": 2e-2}
REF_ROWS = 64
DENSE_MAX_RATIO = 16  # dense does a*d times the FLOPs of the ks product
# The time model that fits a run into --max-seconds: bytes at BW, dense FLOPs at PEAK, and a
# fixed host cost per (pattern, dtype, layout) (tensors, plans, reference).
BW = 2.0e12
PEAK = {"float32": 4.0e13, "bfloat16": 4.0e14}
FIXED_S = 0.06
# The fused kernels' FLOP rate where they are the forced alternative (FFMA for halves: 6-12
# TFLOP/s measured on the H200 at (1,1024,256,64) and (1,1024,1024,16) bf16)
KPEAK = {"float32": 2.0e13, "bfloat16": 6.0e12}
WARM, REPS = 2, 5
ALT_PATHS = ("kernels", "tr")  # the choice the batch-first d > 1 rule makes (src/cuda/ks/ks_plan.cu)
DENSE_PATH_MAX_AD = 8  # rows that time the forced dense path (a*d times the ks FLOPs)


def load_patterns(path=PATTERN_FILE):
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                p = tuple(int(v) for v in line.split(","))
                if p not in out:  # (the list names two patterns twice)
                    out.append(p)
    return out


def sizes(p, batch, es):
    """(bytes of x + y, bytes the timed calls touch at most (bmm's copies), dense K bytes)."""
    a, b, c, d = p
    N, M = a * c * d, a * b * d
    xy = es * batch * (N + M)
    return xy, 2 * xy + es * batch * M, es * M * N


def dense_ok(p):
    return p[0] * p[3] <= DENSE_MAX_RATIO


def dense_path_ok(p):
    return p[0] * p[3] <= DENSE_PATH_MAX_AD


def estimate_s(p, batch, dtypes, layouts):
    """Seconds the sweep spends on pattern p (every dtype and layout), from its bytes and FLOPs."""
    a, b, c, d = p
    N, M, nnz = a * c * d, a * b * d, a * b * c * d
    t = 0.0
    for dt in dtypes:
        es = DTYPES[dt].itemsize
        xy = es * batch * (N + M)
        call = xy / BW + 2.0 * batch * nnz / PEAK[dt] + 2e-5
        bmm = 3 * xy / BW + 2.0 * batch * nnz / PEAK[dt] + 4e-5
        dense = 2.0 * batch * M * N / PEAK[dt] + xy / BW if dense_ok(p) else 0.0
        per_layout = FIXED_S + (WARM + REPS + 1) * (call + bmm + dense)
        t += len(layouts) * per_layout
        if dense_path_ok(p):  # the forced dense path: accuracy call + 1 warm + 3 reps per layout
            t += len(layouts) * 5 * (2.0 * batch * M * N / PEAK[dt] + xy / BW + 2e-5)
        if d > 1 and "bsf" in layouts:  # the forced alternative: tr or the fused kernels
            t += 4 * max(call, 2.0 * batch * nnz / KPEAK[dt] + xy / BW)
    return t


def sample(pats, est, max_s):
    """(patterns to run, their estimated seconds): all when they fit, else every k-th."""
    total = sum(est)
    if max_s <= 0 or total <= max_s:
        return list(range(len(pats))), total
    n = len(pats)
    k = n
    while k > 1:
        idx = sorted({(i * n) // k for i in range(k)})
        t = sum(est[i] for i in idx)
        if t <= max_s:
            return idx, t
        k = max(1, int(k * 0.9))
    return [0], est[0]


def seg_bytes(P, Q, es):
    """Bytes of a P x Q row segment in the transposition kernel's shared memory (ks_tr.cu pick_qs)."""
    want = (32 + P - 1) // P
    qs = Q | 1 if P >= 32 else next(q for q in range(Q, Q + 32) if q % 32 == want % 32)
    return P * qs * es


def tr_large(p):
    """Batch-first d > 1 with a float32 forward segment (x's c x d, y's d x b) over 48 KB."""
    a, b, c, d = p
    return d > 1 and max(seg_bytes(c, d, 4), seg_bytes(d, b, 4)) > 48 * 1024


def focus_sample(pats, est, max_s, rest):
    """(indices, seconds): `rest` patterns evenly from those not tr_large, then the tr_large ones
    sampled to fit what is left of max_s."""
    big = [i for i, p in enumerate(pats) if tr_large(p)]
    other = [i for i, p in enumerate(pats) if not tr_large(p)]
    pick = sorted({other[(j * len(other)) // rest] for j in range(rest)}) if rest and other else []
    t_rest = sum(est[i] for i in pick)
    sub, t = sample([pats[i] for i in big], [est[i] for i in big], max(max_s - t_rest, 1e-9)
                    if max_s > 0 else 0)
    return sorted(pick + [big[j] for j in sub]), t_rest + t


def dense_matrix(w, p):
    a, b, c, d = p
    K = torch.zeros(a * b * d, a * c * d, device=w.device, dtype=w.dtype)
    ii, kk, ll, jj = torch.meshgrid(*[torch.arange(s, device=w.device) for s in p], indexing="ij")
    K[ii * b * d + kk * d + jj, ii * c * d + ll * d + jj] = w
    return K


def rel(y, ref):
    y, ref = y.double(), ref.double()
    return float((y - ref).norm() / ref.norm().clamp_min(1e-300))


def free():
    _cuda.clear_plan_cache()
    gc.collect()
    torch.cuda.empty_cache()


def time_dense_path(row, x, w, p, layout, fits):
    """row["dense_path_ms"] (forced dense: K expanded per call + one GEMM) and its accuracy on the
    first REF_ROWS entries, or row["dense_path"] saying why not."""
    opt = {"path": "dense"}
    if not fits:
        row["dense_path"] = "skipped: memory"
        return
    try:
        _cuda_ks.ks_paths(p, row["batch"], layout=layout, dtype=row["dtype"], options=opt)
    except ValueError as e:  # K over 2^28 elements
        row["dense_path"] = f"not applicable: {e}"
        return
    r = min(REF_ROWS, row["batch"])
    xs = x[:r] if layout == "bsf" else x[:, :r].contiguous()
    ref = bmm_recipe(xs.double(), *bmm_operands(w.double(), p), p, layout)
    row["dense_path_err"] = rel(_cuda_ks.ks_matmul(xs, w, p, layout=layout, options=opt), ref)
    row["dense_path_ok"] = row["dense_path_err"] <= max(TOL[row["dtype"]], 2 * row["err_bmm"])
    f = lambda: _cuda_ks.ks_matmul(x, w, p, layout=layout, options=opt)  # noqa: E731
    row["dense_path_ms"] = time_ms(f, warm=1, reps=3)[0]


def run_one(p, batch, dt, layout, mem_bytes):
    a, b, c, d = p
    N = a * c * d
    tdt = DTYPES[dt]
    es = tdt.itemsize
    xy, peak, kbytes = sizes(p, batch, es)
    row = {"pattern": list(p), "dtype": dt, "layout": layout, "batch": batch}
    if peak > mem_bytes:
        row["skipped"] = f"memory: {peak / 2**30:.1f} GiB > budget {mem_bytes / 2**30:.1f} GiB"
        return row
    g = torch.Generator(device="cuda").manual_seed(hash(p) & 0xFFFF)
    w = (torch.randn(*p, device="cuda", generator=g) / math.sqrt(c)).to(tdt)
    x = torch.randn((batch, N) if layout == "bsf" else (N, batch), device="cuda", generator=g).to(tdt)
    wl, wf = bmm_operands(w, p)
    ks = lambda: strux.ks_matmul(x, w, p, layout=layout)  # noqa: E731
    bmm = lambda: bmm_recipe(x, wl, wf, p, layout)  # noqa: E731
    # accuracy on the first REF_ROWS batch entries against float64
    r = min(REF_ROWS, batch)
    xs = x[:r] if layout == "bsf" else x[:, :r].contiguous()
    ref = bmm_recipe(xs.double(), *bmm_operands(w.double(), p), p, layout)
    y = ks()
    ys = y[:r] if layout == "bsf" else y[:, :r]
    row["err"] = rel(ys, ref)
    yb = bmm_recipe(xs, wl, wf, p, layout)
    row["err_bmm"] = rel(yb, ref)
    row["ok"] = row["err"] <= max(TOL[dt], 2 * row["err_bmm"])
    y = ys = yb = ref = xs = None  # (freed before the timed calls)
    row["path"] = _cuda_ks.ks_paths(p, batch, layout=layout, dtype=dt)[0]
    row["strux_ms"] = time_ms(ks, warm=WARM, reps=REPS)[0]
    row["bmm_ms"] = time_ms(bmm, warm=WARM, reps=REPS)[0]
    if layout == "bsf" and d > 1 and row["path"] in ALT_PATHS:
        row["alt_ms"] = {}
        for alt in ALT_PATHS:
            if alt == row["path"]:
                continue
            opt = {"path": alt}
            try:
                _cuda_ks.ks_paths(p, batch, layout=layout, dtype=dt, options=opt)
            except ValueError:  # the forced path does not apply (tr: segment too large)
                continue
            f = lambda: _cuda_ks.ks_matmul(x, w, p, layout=layout, options=opt)  # noqa: E731
            row["alt_ms"][alt] = time_ms(f, warm=1, reps=3)[0]  # (the kernels may take ~10x)
    if not dense_ok(p):
        row["dense"] = "dense skipped: a*d FLOP ratio"
    elif kbytes + xy > mem_bytes:
        row["dense"] = f"dense skipped: memory ({(kbytes + xy) / 2**30:.1f} GiB)"
    else:
        K = dense_matrix(w, p)
        dense = (lambda: F.linear(x, K)) if layout == "bsf" else (lambda: torch.mm(K, x))
        row["dense_ms"] = time_ms(dense, warm=WARM, reps=REPS)[0]
        K = None
    if dense_path_ok(p):
        time_dense_path(row, x, w, p, layout, xy + kbytes <= mem_bytes)
    best = min(row["bmm_ms"], row.get("dense_ms", math.inf))
    row["vs_bmm"] = row["bmm_ms"] / row["strux_ms"]
    row["vs_best"] = best / row["strux_ms"]
    row["floor_ms"] = xy / BW * 1e3  # one read of x and one write of y at the model bandwidth BW
    return row


def summary(rows, n_run, n_all, skipped, est_s, wall_s):
    lines = [f"ks sweep: {n_run} of {n_all} ksmm patterns run"
             + (" (every k-th, --max-seconds)" if n_run < n_all else "")
             + f", estimated {est_s:.0f} s, took {wall_s:.0f} s"]
    if skipped:
        lines.append(f"  {len(skipped)} (pattern, dtype, layout) skipped for memory, e.g. "
                     f"{skipped[0]['pattern']} {skipped[0]['dtype']} {skipped[0]['layout']}: {skipped[0]['skipped']}")
    bad = [r for r in rows if not r["ok"]]
    if bad:
        lines.append(f"  ACCURACY: {len(bad)} rows above tolerance, e.g. " + ", ".join(
            f"{tuple(r['pattern'])} {r['dtype']} {r['layout']} err {r['err']:.1e} (bmm {r['err_bmm']:.1e})"
            for r in bad[:5]))
    for dt in DTYPES:
        for lay in ("bsf", "bsl"):
            rs = [r for r in rows if r["dtype"] == dt and r["layout"] == lay]
            if not rs:
                continue
            ratios = [r["vs_bmm"] for r in rs]
            slow = [r for r in rs if r["vs_best"] < 1 / 1.05]
            lines.append(f"  {dt:8s} {lay}: n {len(rs)}, median x{statistics.median(ratios):.2f} over bmm "
                         f"(min {min(ratios):.2f}, max {max(ratios):.2f}), faster than bmm "
                         f"{sum(v > 1 for v in ratios) / len(rs):.0%}, >5% slower than min(bmm, dense) {len(slow)}")
    alt = [(r, min(r["alt_ms"].items(), key=lambda kv: kv[1])) for r in rows if r.get("alt_ms")]
    lost = sorted([(r, k, v) for r, (k, v) in alt if v * 1.05 < r["strux_ms"]],
                  key=lambda t: t[2] / t[0]["strux_ms"])
    lines.append(f"  bsf d > 1 rule: {len(alt)} rows timed the forced alternative path, "
                 f"{len(lost)} where it was > 5% faster than the default choice"
                 + (":" if lost else ""))
    for r, k, v in lost[:8]:
        lines.append(f"    {tuple(r['pattern'])} {r['dtype']} {r['path']} {r['strux_ms']:.3f} ms, {k} {v:.3f} ms")
    lines += dense_summary(rows)
    worst = sorted(rows, key=lambda r: r["vs_best"])[:10]
    lines.append("  worst 10 (strux vs min(bmm, dense)): pattern dtype layout path strux_ms bmm_ms dense_ms ratio")
    for r in worst:
        dn = f"{r['dense_ms']:.3f}" if "dense_ms" in r else "-"
        lines.append(f"    {tuple(r['pattern'])} {r['dtype']} {r['layout']} {r['path']} {r['strux_ms']:.3f} "
                     f"{r['bmm_ms']:.3f} {dn} x{r['vs_best']:.2f}")
    return lines


def dense_summary(rows):
    """The forced dense path against the default, by dtype, layout and a*d: where it wins by > 5%."""
    dr = [r for r in rows if "dense_path_ms" in r]
    bad = [r for r in dr if not r["dense_path_ok"]]
    lines = [f"  dense path (forced, a*d <= {DENSE_PATH_MAX_AD}): {len(dr)} rows timed"
             + (f"; ACCURACY: {len(bad)} above tolerance, e.g. {tuple(bad[0]['pattern'])} {bad[0]['dtype']} "
                f"{bad[0]['layout']} err {bad[0]['dense_path_err']:.1e}" if bad else "")]
    groups = {}
    for r in dr:
        a, _, _, d = r["pattern"]
        groups.setdefault((r["dtype"], r["layout"], a * d), []).append(r)
    for (dt, lay, ad), rs in sorted(groups.items()):
        sp = sorted(r["strux_ms"] / r["dense_path_ms"] for r in rs)
        lines.append(f"    {dt:8s} {lay} a*d={ad}: n {len(rs)}, default/dense median x{statistics.median(sp):.2f} "
                     f"(min {sp[0]:.2f}, max {sp[-1]:.2f}), dense > 5% faster on {sum(v > 1.05 for v in sp)}")
    wins = sorted([r for r in dr if r["dense_path_ms"] * 1.05 < r["strux_ms"]],
                  key=lambda r: r["dense_path_ms"] / r["strux_ms"])
    lines.append(f"  dense path > 5% faster than the default on {len(wins)} rows"
                 + (" (pattern dtype layout a*d default_path strux_ms dense_path_ms F.linear_ms):" if wins else ""))
    for r in wins[:20]:
        a, _, _, d = r["pattern"]
        dn = f"{r['dense_ms']:.3f}" if "dense_ms" in r else "-"
        lines.append(f"    {tuple(r['pattern'])} {r['dtype']} {r['layout']} {a * d} {r['path']} "
                     f"{r['strux_ms']:.3f} {r['dense_path_ms']:.3f} {dn}")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--batch", type=int, default=25088)
    ap.add_argument("--max-seconds", type=float, default=0.0, help="0: the whole list")
    ap.add_argument("--mem-gb", type=float, default=24.0, help="budget for one case's tensors (GiB)")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--layouts", default="bsf,bsl")
    ap.add_argument("--patterns", default=PATTERN_FILE)
    ap.add_argument("--focus", choices=["tr-large", "dense"],
                    help="only the rows the large-segment tr rule decides / the dense path's rows (a*d <= 8)")
    ap.add_argument("--rest", type=int, default=6, help="with --focus: other patterns to add")
    args = ap.parse_args()
    dtypes, layouts = args.dtypes.split(","), args.layouts.split(",")
    pats = load_patterns(args.patterns)
    est = [estimate_s(p, args.batch, dtypes, layouts) for p in pats]
    if args.focus == "dense":
        keep = [i for i, p in enumerate(pats) if dense_path_ok(p)]
        sub, est_s = sample([pats[i] for i in keep], [est[i] for i in keep], args.max_seconds)
        idx = [keep[j] for j in sub]
    elif args.focus:
        idx, est_s = focus_sample(pats, est, args.max_seconds, args.rest)
    else:
        idx, est_s = sample(pats, est, args.max_seconds)
    t0 = time.time()
    rows, skipped, done = [], [], 0
    mem = int(args.mem_gb * 2**30)
    for i in idx:
        p = pats[i]
        for dt in dtypes:
            for lay in layouts:
                r = run_one(p, args.batch, dt, lay, mem)
                (skipped if "skipped" in r else rows).append(r)
        done += 1
        free()
        # a safety stop: the estimate is a model; never run far past the budget
        if args.max_seconds > 0 and time.time() - t0 > 1.15 * args.max_seconds:
            break
    wall = time.time() - t0
    os.makedirs(args.out, exist_ok=True)
    meta = {"batch": args.batch, "n_patterns": len(pats), "n_sampled": len(idx), "n_run": done,
            "estimated_s": est_s, "wall_s": wall, "device": torch.cuda.get_device_name(),
            "allow_tf32": torch.backends.cuda.matmul.allow_tf32, "mem_gb": args.mem_gb,
            "focus": args.focus, "rest": args.rest if args.focus else None}
    with open(os.path.join(args.out, "ks_sweep.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows, "skipped": skipped}, f, indent=1)
    if done < len(idx):
        print(f"ks sweep: stopped at {done} of {len(idx)} sampled patterns (time budget)")
    print("\n".join(summary(rows, done, len(pats), skipped, est_s, wall)))


if __name__ == "__main__":
    main()
