"""diag_scan against accelerated-scan (the peer) on issue 14's rows, each in its own layout.

    python bench/gpu_scan_peer.py OUT_DIR [--quick] [--rows NAME ...] [--strux PATH ...] [--scalar]

The peer's source is not part of strux: it is imported from .deps/peers/accelerated-scan (not
committed; when missing the rows say so). Per row of bench/gpu_scan_bw.py:
- the peer in its layout, (B, C, T) with time contiguous: real rows run its CUDA warp kernel
  (accelerated_scan.warp, compiled by torch.utils.cpp_extension on first import; float32 /
  bfloat16, T a power of two in [32, 65536]), complex rows its Triton complex kernel
  (accelerated_scan.complex); --scalar adds its Triton real kernel (accelerated_scan.scalar);
- strux in its layout, (B, T, n) with channels contiguous, on the same values: the default
  solver and each --strux solver forced (default: "rows"; "tile:64" forces the tile solver with
  tile_bytes 64), checked against the default on the same values. "rows" (n = 1 only) runs in
  the peer's layout: its (B, C, T) arrays viewed as (B * C, T, 1), no copy -- the side by side of
  the two time-last kernels.
Forward: h from a, b; backward: the gradients of a and b given dh (the peer through autograd,
as a model calls it; strux through diag_scan_vjp with the forward's h). Bytes are the same in
both layouts (forward: a, b in, h out; backward: a, h, dh in, da, db out); the copy bandwidth
is measured in the same run. Results are checked against each other (forward; backward too,
printed). Prints per row (as soon as it is measured) ms, % of copy bandwidth and peer ms /
strux ms (> 1: strux faster); writes OUT_DIR/gpu_scan_peer.json after each row.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

from strux import _cuda_scan as K
from strux.bench.timing import back_to_back_ms, copy_bandwidth

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEER = os.path.join(ROOT, ".deps", "peers", "accelerated-scan")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_scan_bw import ROWS, inputs, rel  # noqa: E402

TOL = {torch.float32: 1e-4, torch.complex64: 1e-4, torch.bfloat16: 5e-2}


def peer_modules(scalar):
    """{kind: scan function (gates, tokens) -> states} of the peer, and load errors."""
    mods, errs = {}, {}
    if not os.path.isdir(PEER):
        return mods, {"all": f"peer source not found at {PEER}"}
    sys.path.insert(0, PEER)
    t0 = time.time()
    try:
        from accelerated_scan.warp import scan as warp_scan
        mods["warp"] = warp_scan
    except Exception as e:  # noqa: BLE001  (a peer that does not build is a result)
        errs["warp"] = f"{type(e).__name__}: {str(e)[:200]}"
    print(f"== peer warp kernel loaded in {time.time() - t0:.0f} s", flush=True)
    try:
        from accelerated_scan.complex import scan as complex_scan
        mods["complex"] = complex_scan
    except Exception as e:  # noqa: BLE001
        errs["complex"] = f"{type(e).__name__}: {str(e)[:200]}"
    if scalar:
        try:
            from accelerated_scan.scalar import scan as scalar_scan
            mods["scalar"] = scalar_scan
        except Exception as e:  # noqa: BLE001
            errs["scalar"] = f"{type(e).__name__}: {str(e)[:200]}"
    return mods, errs


def peer_kinds(dtype, mods):
    if dtype.is_complex:
        return [k for k in ("complex",) if k in mods]
    return [k for k in ("warp", "scalar") if k in mods and not (k == "scalar" and dtype != torch.float32)]


def time_peer(fn, a, b, dh, n):
    """fwd ms, bwd ms, h, (da, db) of the peer in its layout (a, b, dh (B, C, T) contiguous)."""
    fwd = back_to_back_ms(lambda: fn(a, b), n=n)
    ag, bg = a.detach().requires_grad_(), b.detach().requires_grad_()
    h = fn(ag, bg)
    grads = torch.autograd.grad(h, (ag, bg), dh, retain_graph=True)
    bwd = back_to_back_ms(lambda: torch.autograd.grad(h, (ag, bg), dh, retain_graph=True), n=n)
    return fwd, bwd, h.detach(), grads


def options(path):
    """The options= of a --strux name: a path, or "tile:BYTES" (the tile solver's tile_bytes)."""
    if path == "auto":
        return None
    name, _, tb = path.partition(":")
    return {"path": name, "tile_bytes": int(tb)} if tb else {"path": name}


def row(name, dtype, shape, bw, mods, strux_paths, n):
    B, T, nc = shape
    a, b = inputs(dtype, shape)
    dh = torch.randn_like(b)
    esize, numel = a.element_size(), a.numel()
    floor_f, floor_b = 3 * numel * esize / bw * 1e3, 5 * numel * esize / bw * 1e3
    res = {"row": name, "dtype": str(dtype), "shape": shape, "floor_fwd_ms": floor_f, "floor_bwd_ms": floor_b,
           "strux": {}, "peer": {}}
    h = K.diag_scan(a, b)
    da, db, _ = K.diag_scan_vjp(dh, a, b, h=h)
    # the peer's layout: (B, C, T), time contiguous
    ap, bp, dhp = (x.transpose(1, 2).contiguous() for x in (a, b, dh))
    for path in ["auto"] + strux_paths:
        o = options(path)
        r = {}
        try:
            if path == "rows":  # time-last: the peer's arrays as B * C rows of T steps
                xa, xb, xd = (x.view(B * nc, T, 1) for x in (ap, bp, dhp))
                r["describe"] = K.diag_scan_describe(B * nc, T, 1, dtype=str(dtype).split(".")[1], options=o)
                hr = K.diag_scan(xa, xb, options=o)
                r["rel_err_h"] = rel(hr.view(B, nc, T).transpose(1, 2), h)
                r["rel_err_db"] = rel(K.diag_scan_vjp(xd, xa, xb, h=hr, options=o)[1].view(B, nc, T).transpose(1, 2), db)
                r["fwd_ms"] = back_to_back_ms(lambda: K.diag_scan(xa, xb, options=o), n=n)
                r["bwd_ms"] = back_to_back_ms(lambda: K.diag_scan_vjp(xd, xa, xb, h=hr, options=o), n=n)
                print(f"== rows {name}: h {r['rel_err_h']:.0e} db {r['rel_err_db']:.0e} against the default", flush=True)
                del hr
            else:
                r["describe"] = K.diag_scan_describe(*shape, dtype=str(dtype).split(".")[1], options=o)
                if o is not None:  # a forced solver checked against the default on the same values
                    r["rel_err_h"] = rel(K.diag_scan(a, b, options=o), h)
                    r["rel_err_db"] = rel(K.diag_scan_vjp(dh, a, b, h=h, options=o)[1], db)
                    print(f"== {path} {name}: h {r['rel_err_h']:.0e} db {r['rel_err_db']:.0e} against the default; "
                          f"{r['describe'].split(': ', 1)[1]}", flush=True)
                r["fwd_ms"] = back_to_back_ms(lambda: K.diag_scan(a, b, options=o), n=n)
                r["bwd_ms"] = back_to_back_ms(lambda: K.diag_scan_vjp(dh, a, b, h=h, options=o), n=n)
        except Exception as e:  # noqa: BLE001
            r["error"] = f"{type(e).__name__}: {e}"
        res["strux"][path] = r
    for kind in peer_kinds(dtype, mods):
        r = {}
        try:
            fwd, bwd, hp, (dap, dbp) = time_peer(mods[kind], ap, bp, dhp, n)
            r["fwd_ms"], r["bwd_ms"] = fwd, bwd
            r["rel_err_h"] = rel(hp.transpose(1, 2), h)
            r["rel_err_db"] = rel(dbp.transpose(1, 2), db)
            r["rel_err_da"] = rel(dap.transpose(1, 2), da)
            if dtype.is_complex:  # the conjugate convention of complex gradients may differ
                r["rel_err_da_conj"] = rel(dap.transpose(1, 2).conj(), da)
            r["agrees"] = r["rel_err_h"] < TOL[dtype]
            del hp, dap, dbp
        except Exception as e:  # noqa: BLE001
            r["error"] = f"{type(e).__name__}: {str(e)[:200]}"
        res["peer"][kind] = r
        torch.cuda.empty_cache()
    del a, b, dh, ap, bp, dhp, h, da, db
    torch.cuda.empty_cache()
    return res


def header(res):
    paths = res["strux_paths"]
    return "\n".join([
        f"copy bandwidth {res['copy_GBps']:.0f} GB/s; ms (% of copy bw); ratio = peer ms / strux ms (> 1: strux faster)",
        "", "| row | dir | strux default | " + " | ".join(f"strux {p}" for p in paths) +
        " | peer | peer ms | ratio (default) | ratio (best strux) | check |",
        "|---|---|---|" + "---|" * len(paths) + "---|---|---|---|---|"])


def row_lines(res, r):
    lines = []
    for d in ("fwd", "bwd"):
        fl = r[f"floor_{d}_ms"]

        def cell(s):
            if "error" in s:
                return s["error"][:30]
            return f"{s[f'{d}_ms']:.3f} ({100 * fl / s[f'{d}_ms']:.0f}%)"
        auto = r["strux"]["auto"]
        cells = [cell(auto)] + [cell(r["strux"][p]) for p in res["strux_paths"]]
        best = min((s[f"{d}_ms"] for s in r["strux"].values() if "error" not in s), default=None)
        peers = r["peer"] or {"-": {"error": res["peer_errors"].get("all", "no peer kernel for this dtype")}}
        for kind, p in peers.items():
            if "error" in p:
                lines.append(f"| {r['row']} | {d} | " + " | ".join(cells) + f" | {kind} | {p['error'][:40]} | | | |")
                continue
            pm = p[f"{d}_ms"]
            ra = pm / auto[f"{d}_ms"] if "error" not in auto else float("nan")
            rb = pm / best if best else float("nan")
            chk = (f"h {p['rel_err_h']:.0e} {'ok' if p['agrees'] else 'DIFFERS'}" if d == "fwd" else
                   f"db {p['rel_err_db']:.0e} da {min(p['rel_err_da'], p.get('rel_err_da_conj', 9)):.0e}")
            lines.append(f"| {r['row']} | {d} | " + " | ".join(cells) +
                         f" | {kind} | {pm:.3f} ({100 * fl / pm:.0f}%) | {ra:.2f} | {rb:.2f} | {chk} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--quick", action="store_true", help="fewer calls per timing")
    ap.add_argument("--rows", nargs="*", help="names of rows to run (default: all)")
    ap.add_argument("--strux", nargs="*", default=["rows"], help="strux solvers forced beside the default")
    ap.add_argument("--scalar", action="store_true", help="also the peer's Triton real kernel")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    mods, errs = peer_modules(args.scalar)
    bw = copy_bandwidth(1 << 28, reps=10)
    res = {"device": torch.cuda.get_device_name(), "copy_GBps": bw / 1e9, "strux_paths": args.strux,
           "peer": sorted(mods), "peer_errors": errs, "rows": []}
    for k, e in errs.items():
        print(f"== peer {k}: {e}", flush=True)
    print(header(res), flush=True)  # then a row's lines as soon as it is measured
    for name, dt, shape in ROWS:
        if args.rows and name not in args.rows:
            continue
        res["rows"].append(row(name, dt, shape, bw, mods, args.strux, 5 if args.quick else 20))
        print(row_lines(res, res["rows"][-1]), flush=True)
        with open(os.path.join(args.out, "gpu_scan_peer.json"), "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
