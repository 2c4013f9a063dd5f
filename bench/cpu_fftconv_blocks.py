"""CPU fftconv: the forced solvers "fft", "blocks" and "direct" (where it applies) against each other
(issue 12, deliverables 3-4; bench/NOTES-cpu.md "fftconv-blocks").

Per (L, Lk, dtype): one plan per solver (strux.FFTConv, no gates), then the solvers alternate
within each repetition (so load from other processes hits them alike) and the medians are kept:
forward = op(u), fwd+bwd = op(u) then op.vjp(dy, u). Prints a markdown table of ms and the ratios
fft / blocks (> 1: blocks is faster) and fft / direct; --json writes every timing.

  PYTHONPATH=python python bench/cpu_fftconv_blocks.py [--L 4096 65536 262144] [--Lk 32 64 ...]
      [--dtype float32 float64] [--B 8] [--H 64] [--rows-cap 128] [--reps 5] [--json out.json]

--rows-cap: at L >= 2^18 B is cut so that B·H <= rows-cap (memory and time on a small machine;
the per-row cost is what is compared).
"""
import argparse
import json
import statistics
import time

import numpy as np

import strux

DIRECT_MAX_TAPS = 64  # strux's kDirectMaxTaps (include/strux/fftconv.hpp)


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def run_case(B, H, L, Lk, dtype, reps, circular=False):
    rng = np.random.default_rng(L + Lk)
    mode = "circular" if circular else "causal"
    u = rng.standard_normal((B, H, L)).astype(dtype)
    dy = rng.standard_normal((B, H, L)).astype(dtype)
    k = (rng.standard_normal((H, Lk)) / np.sqrt(Lk)).astype(dtype)
    ops = {s: strux.FFTConv(k, L, mode=mode, solver=s) for s in ("fft", "blocks")}
    if (Lk if circular else min(Lk, L)) <= DIRECT_MAX_TAPS:
        ops["direct"] = strux.FFTConv(k, L, mode=mode, solver="direct")
    fwd = {s: [] for s in ops}
    both = {s: [] for s in ops}
    for op in ops.values():  # warm-up: FFTW plans, first-touch of the thread buffers
        op(u)
    for _ in range(reps):
        for s, op in ops.items():
            fwd[s].append(timed(lambda: op(u)))
            both[s].append(timed(lambda: (op(u), op.vjp(dy, u))))
    out = {"B": B, "H": H, "L": L, "Lk": Lk, "dtype": np.dtype(dtype).name, "mode": mode,
           "nfft": ops["fft"].nfft, "N": ops["blocks"].nfft,
           "auto": strux.FFTConv(k, L, mode=mode).solver}
    for s in ops:
        out[f"{s}_fwd_ms"] = 1e3 * statistics.median(fwd[s])
        out[f"{s}_both_ms"] = 1e3 * statistics.median(both[s])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--L", type=int, nargs="+", default=[4096, 65536, 262144])
    ap.add_argument("--Lk", type=int, nargs="+", default=[32, 64, 128, 256, 1024, 4096])
    ap.add_argument("--dtype", nargs="+", default=["float32", "float64"])
    ap.add_argument("--B", type=int, default=8)
    ap.add_argument("--H", type=int, default=64)
    ap.add_argument("--rows-cap", type=int, default=128)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--circular", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    print("| dtype | B, H, L | Lk | nfft | N | fft fwd ms | blocks fwd | direct fwd | fft/blocks fwd | "
          "fft/direct fwd | fft f+b ms | blocks f+b | direct f+b | fft/blocks f+b | fft/direct f+b | auto |")
    print("|" + "---|" * 16)
    for dt in a.dtype:
        for L in a.L:
            B = a.B if L < 2**18 else max(1, min(a.B, a.rows_cap // a.H))
            for Lk in a.Lk:
                if a.circular and Lk > L:
                    continue
                r = run_case(B, a.H, L, Lk, np.dtype(dt), a.reps, a.circular)
                rows.append(r)
                ms = lambda key: f"{r[key]:.1f}" if key in r else "-"
                ratio = lambda a, b: f"{r[a] / r[b]:.2f}x" if b in r else "-"
                print(f"| {dt} | {B}, {a.H}, {L} | {Lk} | {r['nfft']} | {r['N']} | {ms('fft_fwd_ms')} | "
                      f"{ms('blocks_fwd_ms')} | {ms('direct_fwd_ms')} | {ratio('fft_fwd_ms', 'blocks_fwd_ms')} | "
                      f"{ratio('fft_fwd_ms', 'direct_fwd_ms')} | {ms('fft_both_ms')} | {ms('blocks_both_ms')} | "
                      f"{ms('direct_both_ms')} | {ratio('fft_both_ms', 'blocks_both_ms')} | "
                      f"{ratio('fft_both_ms', 'direct_both_ms')} | {r['auto']} |",
                      flush=True)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
