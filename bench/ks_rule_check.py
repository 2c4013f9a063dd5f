"""Offline check of the ks product rules against a sweep JSON (bench/gpu_ks_sweep.py).

The large-segment tr rule (bench/NOTES-gpu-ks-scan.md "ks-path-rule"; src/cuda/ks/ks_plan.cu
tr_rule): batch-first d > 1 from batch 1024, tr wherever the row segments fit the opt-in shared
memory, but segments over 48 KB with min(b, c) < 4 (round 1 capped them at 12288 elements: 48 KB
float32, 24 KB halves). The
sweep's default (strux_ms, row["path"]) is the new rule; its forced alternative (alt_ms) on every
bsf d > 1 row is the other path, i.e. round 1's ("old") path on every moved row. For each row
whose forward the rule moved: new default vs forced old path, and both vs bmm. Also: whether
new_path() below (the rule mirrored in Python) agrees with the path the code chose, and the
rows the new rule keeps on the kernels where forced tr was faster.
The small-batch part (--small) is the landed rule (bench/NOTES-gpu-ks-small.md).
The dense part (--dense) reads the sweep's forced dense path times (row["dense_path_ms"], rows with
a*d <= 8) and prints, per dtype and layout, what the candidate rule "dense where a*d <= T" would do
for T = 1 ... 8 against the default (rows > 5% faster / slower, geometric mean of default/picked),
and the same for "dense where H = M*N/(M + N) <= h" (M = a*b*d, N = a*c*d: the dense GEMM's FLOPs
over the bytes of x and y, the quantity the NOTES' prediction turns on): the threshold to propose
(bench/NOTES-gpu-ks-scan.md "ks-dense").

  python3 bench/ks_rule_check.py ks_sweep.json [--small ks_small.json] [--smem-optin 232448]
      [--table FILE]   (one line per moved row, written to FILE) [--dense]
"""
import argparse
import json
import math
import statistics
from collections import defaultdict


def pick_qs(P, Q):
    if P >= 32:
        return Q | 1
    want = (32 + P - 1) // P
    qs = Q
    while qs % 32 != want % 32:
        qs += 1
    return qs


def seg_bytes(P, Q, es):
    return P * pick_qs(P, Q) * es


def tr_seg_bytes(b, c, d, es):
    return max(seg_bytes(c, d, es), seg_bytes(d, b, es))


def old_path(row):
    """Round 1's rule: tr from batch 1024 where both segments fit 12288 elements (padded)."""
    a, b, c, d = row["pattern"]
    fits = all(P * Q <= 12288 and P * pick_qs(P, Q) <= 12288 for P, Q in ((c, d), (d, b)))
    return "tr" if fits and row["batch"] >= 1024 else "kernels"


def new_path(row, smem_optin):
    """The code's rule (ks_plan.cu tr_rule) for a batch-first d > 1 forward."""
    a, b, c, d = row["pattern"]
    es = 4 if row["dtype"] == "float32" else 2
    sb = tr_seg_bytes(b, c, d, es)
    if sb > smem_optin or row["batch"] < 1024:
        return "kernels"
    return "tr" if sb <= 48 * 1024 or min(b, c) >= 4 else "kernels"


def small_batch(p, batch, dtype):
    """Whether the small path is taken (src/cuda/ks/ks_plan.cu small_batch, landed 2026-11-23 after
    the H100 run confirmed the H200 one)."""
    a, b, c, d = p
    if dtype == "float32":
        return batch <= (64 if d > 1 else 8)
    return batch == 1 and (d > 1 or a * b * c <= 1 << 17)


def check_small(path):
    ok, bad = 0, []
    for r in json.load(open(path))["rows"]:
        for f in r["factors"]:
            pick = f["small_ms"] if small_batch(f["pattern"], r["batch"], r["dtype"]) else f["default_ms"]
            best = min(f["small_ms"], f["default_ms"])
            if pick <= best / 0.95:
                ok += 1
            else:
                bad.append((r["dtype"], r["batch"], tuple(f["pattern"]), best / pick))
    print(f"small-batch rule: {ok} of {ok + len(bad)} factor rows pick a path >= 0.95 x min(small, default)")
    for dt, batch, p, v in bad:
        print(f"  {dt} batch {batch} {p}: x{v:.2f}")


def harm(p):
    a, b, c, d = p
    M, N = a * b * d, a * c * d
    return M * N / (M + N)


def check_dense(rows):
    """The candidate rules "dense where a*d <= T" (T = 1 ... 8) and "dense where H <= h" per
    (dtype, layout)."""
    dr = [r for r in rows if "dense_path_ms" in r]
    print(f"dense path: {len(dr)} rows with the forced dense path timed"
          + (f", {sum(not r['dense_path_ok'] for r in dr)} above the accuracy tolerance" if dr else ""))
    for dt in sorted({r["dtype"] for r in dr}):
        for lay in ("bsf", "bsl"):
            rs = [r for r in dr if r["dtype"] == dt and r["layout"] == lay and r["dense_path_ok"]]
            if not rs:
                continue
            print(f"  {dt} {lay} ({len(rs)} rows): rule  faster>5%  slower>5%  geomean default/picked")
            rules = [(f"a*d <= {T}", lambda p, T=T: p[0] * p[3] <= T) for T in range(1, 9)]
            rules += [(f"H <= {h}", lambda p, h=h: harm(p) <= h) for h in (50, 100, 200, 300, 500, 700, 1000)]
            for name, take in rules:
                picked = [(r, r["dense_path_ms"] if take(r["pattern"]) else r["strux_ms"]) for r in rs]
                g = math.exp(statistics.fmean(math.log(r["strux_ms"] / m) for r, m in picked))
                print(f"    {name:10s} {sum(m * 1.05 < r['strux_ms'] for r, m in picked):5d}  "
                      f"{sum(m > 1.05 * r['strux_ms'] for r, m in picked):9d}  x{g:.3f}")


def fmt(r, alt):
    return (f"{tuple(r['pattern'])} {r['dtype']} {r['path']} {r['strux_ms']:.3f} ms, forced {alt[0]} "
            f"{alt[1]:.3f} ms (x{alt[1] / r['strux_ms']:.2f}), bmm {r['bmm_ms']:.3f} (x{r['bmm_ms'] / r['strux_ms']:.2f})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("--small", help="ks_small.json: check the small-batch rule too")
    ap.add_argument("--smem-optin", type=int, default=232448, help="H100/H200: 227 KB")
    ap.add_argument("--table", help="write one line per moved row here")
    ap.add_argument("--dense", action="store_true", help="the candidate dense rules (a*d <= T)")
    args = ap.parse_args()
    rows = [r for r in json.load(open(args.json))["rows"] if "strux_ms" in r]
    bsf = [r for r in rows if r["layout"] == "bsf" and r["pattern"][3] > 1]
    mism = [r for r in bsf if new_path(r, args.smem_optin) != r["path"]]
    print(f"ks rule check: {len(rows)} rows, {len(bsf)} bsf d > 1; the Python mirror of the rule "
          f"disagrees with the code's path on {len(mism)}"
          + ("".join(f"\n  MISMATCH {tuple(r['pattern'])} {r['dtype']}: code {r['path']}, mirror "
                     f"{new_path(r, args.smem_optin)}" for r in mism[:3])))
    moved, kept = defaultdict(list), []
    for r in bsf:
        alt = next(iter(r.get("alt_ms", {}).items()), None)
        if old_path(r) != r["path"]:
            moved[r["dtype"]].append((r, alt))
        elif r["path"] == "kernels" and alt and tr_seg_bytes(r["pattern"][1], r["pattern"][2], r["pattern"][3],
                                                              4 if r["dtype"] == "float32" else 2) > 48 * 1024:
            kept.append((r, alt))
    lines, losers = [], []
    for dt, ms in sorted(moved.items()):
        timed = [(r, a) for r, a in ms if a]
        sp = sorted(a[1] / r["strux_ms"] for r, a in timed)
        vb = sorted(r["bmm_ms"] / r["strux_ms"] for r, _ in ms)
        win = sum(v > 1 for v in sp)
        print(f"moved {dt}: {len(ms)} rows ({len(timed)} with the forced old path timed): new default faster "
              f"on {win}, >5% slower on {sum(v < 1 / 1.05 for v in sp)}; old/new median x{statistics.median(sp):.2f} "
              f"min x{sp[0]:.2f}; new vs bmm median x{statistics.median(vb):.2f} min x{vb[0]:.2f}"
              if sp else f"moved {dt}: {len(ms)} rows, none with the old path timed")
        losers += [(r, a) for r, a in timed if a[1] * 1.05 < r["strux_ms"]]
        lines += [fmt(r, a) if a else f"{tuple(r['pattern'])} {r['dtype']} {r['path']} (old path not timed)"
                  for r, a in ms]
    if not moved:
        print("no moved rows in this sweep (every row on round 1's path)")
    print(f"moved rows where the forced old path was > 5% faster ({len(losers)}):")
    for r, a in sorted(losers, key=lambda t: t[1][1] / t[0]["strux_ms"])[:10]:
        print("  " + fmt(r, a))
    kb = [(r, a) for r, a in kept if a[1] * 1.05 < r["strux_ms"]]
    print(f"large-segment rows the rule keeps on the kernels: {len(kept)}, forced tr > 5% faster on {len(kb)}:")
    for r, a in sorted(kb, key=lambda t: t[1][1] / t[0]["strux_ms"])[:5]:
        print("  " + fmt(r, a))
    below = [r for r in rows if min(x for x in (r["bmm_ms"], r.get("dense_ms")) if x) / r["strux_ms"] < 0.95]
    print(f"all rows below 0.95 x min(bmm, dense): {len(below)} of {len(rows)}")
    if args.table:
        with open(args.table, "w") as f:
            f.write("\n".join(lines) + "\n")
    if args.small:
        check_small(args.small)
    if args.dense:
        check_dense(rows)


if __name__ == "__main__":
    main()
