"""Offline check of ks product rules against a sweep JSON (bench/gpu_ks_sweep.py).

The tr part is a PROPOSAL, not the library's rule: src/cuda/ks/ks_plan.cu keeps round 1's tr
rule (tr from batch 1024 on segments up to 48 KB, large segments forced only); this script
mirrors the proposal in bench/NOTES-gpu-ks-scan.md ("tr on large segments"), to be checked against
the next GPU session's sweep (its alt_ms timings of the forced alternative). The small-batch part
(--small) is the landed rule (bench/NOTES-gpu-ks-small.md).

For every measured (pattern, dtype, layout) row: the path the proposed rule picks (its
batch-first d > 1 choice, the only part the sweep's batch reaches that would change), and whether that path measured >= 0.95 x min(bmm, dense).
Rows whose path changes have no measurement of the new path: they are reported separately with
the bmm-relative ratio that path reached on the rows where the sweep did run it.
--small ks_small.json (bench/gpu_ks_small.py): the same check of the small-batch rule per factor
(the proposal's wider small_batch) against min(small, default).

  python3 bench/ks_rule_check.py ks_sweep.json [--small ks_small.json] [--smem-optin 232448]
"""
import argparse
import json
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


def new_path(row, smem_optin):
    """The proposed rule's product path for a batch-first d > 1 forward (None: not this rule's case)."""
    a, b, c, d = row["pattern"]
    if row["layout"] != "bsf" or d < 2:
        return None
    es = 4 if row["dtype"] == "float32" else 2
    sb = tr_seg_bytes(b, c, d, es)
    if sb > smem_optin or row["batch"] < 1024:
        return "kernels"
    if sb <= 48 * 1024:
        return "tr"
    if row["dtype"] == "float32":
        return "kernels" if (b <= c and b < 256) else "tr"
    return "tr" if min(b, c) >= 16 else "kernels"


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("--small", help="ks_small.json: check the small-batch rule too")
    ap.add_argument("--smem-optin", type=int, default=232448, help="H100/H200: 227 KB")
    args = ap.parse_args()
    rows = [r for r in json.load(open(args.json))["rows"] if "strux_ms" in r]
    # bmm-relative speed of each measured path, by dtype (for the rows whose path changes)
    rel = defaultdict(list)
    for r in rows:
        if r["layout"] == "bsf":
            rel[(r["dtype"], r["path"])].append(r["bmm_ms"] / r["strux_ms"])
    kept_ok = kept_bad = 0
    bad, changed = [], []
    for r in rows:
        best = min(x for x in (r["bmm_ms"], r.get("dense_ms")) if x)
        p = new_path(r, args.smem_optin) or r["path"]
        # the sweep's forced alternative (alt_ms) measures the new path where it ran
        ms = r["strux_ms"] if p == r["path"] else r.get("alt_ms", {}).get(p)
        if ms is not None:
            if ms <= best / 0.95:
                kept_ok += 1
            else:
                kept_bad += 1
                bad.append((r, p, ms, best))
        else:
            changed.append((r, p, best))
    print(f"{len(rows)} rows; path unchanged or timed as the alternative: {kept_ok} >= 0.95 x min(bmm, dense), {kept_bad} below")
    for (dt, p), v in sorted(rel.items()):
        v.sort()
        print(f"  measured bsf {dt} {p}: bmm/strux min {v[0]:.2f} median {v[len(v) // 2]:.2f} (n {len(v)})")
    print(f"path changed ({len(changed)}), unmeasured; old ratio -> needs >= 0.95 x best:")
    for r, p, best in changed:
        dense = r.get("dense_ms")
        need = "bmm" if not dense or dense >= r["bmm_ms"] else f"dense {dense:.3f}"
        print(f"  {tuple(r['pattern'])} {r['dtype']} {r['path']} -> {p}: old x{best / r['strux_ms']:.2f},"
              f" bmm {r['bmm_ms']:.3f} ms, to beat: {need}")
    print("measured and below 0.95 (path: the proposed rule's):")
    for r, p, ms, best in sorted(bad, key=lambda t: t[3] / t[2]):
        print(f"  {tuple(r['pattern'])} {r['dtype']} {r['layout']} {p}: x{best / ms:.2f}"
              f" (strux {ms:.3f}, bmm {r['bmm_ms']:.3f}, dense {r.get('dense_ms')})")
    if args.small:
        check_small(args.small)


if __name__ == "__main__":
    main()
