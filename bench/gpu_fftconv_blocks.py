"""fftconv with short filters on long rows (issue 12, "Short and partial filters"): the blocks
solver (forced, options={"solver": "blocks"}, plan algo 10) against the automatic choice as it was
before this solver ("whole": one transform of the whole row, the four-step kernels where they
apply, else cuFFT; every case here has more than 32 taps, so not the direct kernels), the automatic
choice now ("auto"; the table names what algo 0 takes) and the PyTorch rfft recipe (float32
rfft/irfft of the whole row: causal at n = L + Lk - 1 rounded up to a 2·3·5·7-smooth size,
circular at n = L), all in this process. Causal and circular rows (the automatic rule takes both since
the H100 run of 2026-11-28). With --probes also the
block sizes N >= 4m, 8m and 16m (plan algos 13, 11 and 12, forced: "b4", "b8", "b16") beside the
solver's own size (blocks.hpp auto_fft_size).
Cases: B=1 H=64 L in {2^20, 2^22} and B=8 H=64 L=100000 (with --all also 2^18), Lk in --taps,
dtypes in --dtypes (the recipe always computes in float32). CUDA events through
strux.bench.timing, 3 warm-up calls, medians. Per case also: the relative error of each solver
against float64 on two rows, and the fraction of the HBM floor (forward: u read + y written once;
backward: dy and u read, du written once; at the device-to-device copy bandwidth measured here).
With --backward, fftconv_vjp (every gradient, no gates) of blocks (and the probes) and the
whole-row solver too.

    python bench/gpu_fftconv_blocks.py [--json PATH] [--backward] [--probes] [--reps N]
        [--modes causal,circular] [--dtypes float16,bfloat16,float32] [--taps 64,256,1024] [--all]

Prints a table; writes the results as JSON to PATH (after every case, so a timeout keeps the rest).
"""
import argparse
import json
import traceback

import torch

from strux import _cuda_fftconv as _fc
from strux.bench.gpu import copy_bandwidth, free, rel
from strux.bench.timing import time_ms

CASES = [(1, 64, 1 << 20), (1, 64, 1 << 22), (8, 64, 100000)]
SOLVERS = {"blocks": {"solver": "blocks"}, "auto": None, "fourstep": {"solver": "fourstep"},
           "cufft": {"solver": "cufft"}}
PROBES = {"b8": 11, "b16": 12, "b4": 13}  # plan algos: blocks of N >= 8m, 16m, 4m (blocks.hpp ratio_of)
SHORT = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}


def smooth(n):
    """The least 2·3·5·7-smooth integer >= n (cuFFT's and torch's fast sizes)."""
    while True:
        r = n
        for p in (2, 3, 5, 7):
            while r % p == 0:
                r //= p
        if r == 1:
            return n
        n += 1


def _conv(u, k, mode, dtype):
    L, Lk = u.shape[-1], k.shape[-1]
    n = L if mode == "circular" else smooth(L + Lk - 1)
    return torch.fft.irfft(torch.fft.rfft(u.to(dtype), n=n) * torch.fft.rfft(k.to(dtype), n=n), n=n)[..., :L]


def recipe(u, k, mode):
    return _conv(u, k, mode, torch.float32).to(u.dtype)


def ref64(u, k, mode):
    return _conv(u, k, mode, torch.float64)


def auto_choice(u, B, H, L, Lk, mode, dt):
    """What the automatic choice (algo 0) runs for this problem, in one word."""
    p = _fc._ext.cuda.fftconv_plan(u.get_device(), B, H, L, Lk, mode, dt, False, 0)
    return ("blocks" if p.blocks else "direct" if p.direct else "tensor" if p.tensor else
            "fourstep" if p.fourstep else "fused" if p.fused else "cufft")


def calls(name, u, k, mode, dy):
    """(forward, vjp) callables of one solver: a named one through options, a probe by its plan algo."""
    if name in PROBES:
        a, r = PROBES[name], _fc._fast(u, k, mode, None, None, None)
        return (lambda: _fc.forward_torch(u, k, None, None, None, r, a),
                lambda: _fc._vjp(dy, u, k, None, None, None, r, u.new_empty, a))
    o = SOLVERS[name]
    return lambda: _fc.fftconv(u, k, mode, options=o), lambda: _fc.fftconv_vjp(dy, u, k, mode, options=o)


def run_case(B, H, L, Lk, mode, res, bw, args):
    key = f"B{B}_H{H}_L{L}_Lk{Lk}_{mode}"
    case = res["cases"][key] = {"B": B, "H": H, "L": L, "Lk": Lk, "mode": mode}
    u32 = torch.randn(B, H, L, device="cuda")
    k32 = torch.randn(H, Lk, device="cuda") / Lk ** 0.5
    case["recipe_f32_ms"] = ms(lambda: recipe(u32, k32, mode), args)
    case["recipe_err"] = rel(recipe(u32[:1, :2], k32[:2], mode).double(), ref64(u32[:1, :2], k32[:2], mode))
    free()
    names = list(SOLVERS) + (list(PROBES) if args.probes else [])
    for dt in args.dtypes:
        u = u32.to(getattr(torch, dt))
        k = k32.to(getattr(torch, dt))
        nbytes = u.numel() * u.element_size()
        floor_ms, vjp_floor_ms = 2 * nbytes / bw * 1e3, 3 * nbytes / bw * 1e3
        d = case[dt] = {"floor_ms": floor_ms, "vjp_floor_ms": vjp_floor_ms,
                        "auto_is": auto_choice(u, B, H, L, Lk, mode, dt)}
        ref = ref64(u[:1, :2], k[:2], mode)
        dy = torch.randn_like(u) if args.backward else None
        for name in names:
            if name == "cufft" and "fourstep_ms" in d:
                continue  # the whole-row solver is the four-step one here
            try:
                fwd, vjp = calls(name, u, k, mode, dy)
                y = fwd()
                d[f"{name}_err"] = rel(y[:1, :2].double(), ref)
                del y
                d[f"{name}_ms"] = ms(fwd, args)
                d[f"{name}_floor_pct"] = 100 * floor_ms / d[f"{name}_ms"]
                if args.backward and name != "auto":
                    d[f"{name}_vjp_ms"] = ms(vjp, args)
                    d[f"{name}_vjp_floor_pct"] = 100 * vjp_floor_ms / d[f"{name}_vjp_ms"]
            except Exception as e:  # noqa: BLE001  (a solver that does not apply must not hide the others)
                d[f"{name}_error"] = f"{type(e).__name__}: {e}"
                if "does not apply" not in str(e) and "needs" not in str(e):
                    traceback.print_exc()
            free()
        whole = d.get("fourstep_ms", d.get("cufft_ms"))
        if "blocks_ms" in d:
            d["whole_over_blocks"] = whole / d["blocks_ms"] if whole else float("nan")
            d["recipe_over_blocks"] = case["recipe_f32_ms"] / d["blocks_ms"]
            d["auto_over_blocks"] = d.get("auto_ms", float("nan")) / d["blocks_ms"]
        u = k = ref = dy = None  # freed before the next dtype (the lambdas above are done with them)
        free()
    u32 = k32 = None
    free()
    return case


def ms(fn, args):
    return time_ms(fn, warm=3, reps=args.reps)[0]


def line(B, H, L, Lk, mode, dt, case, args):
    d = case.get(dt, {})
    f = lambda k: d.get(k, float("nan"))  # noqa: E731
    whole = d.get("fourstep_ms", d.get("cufft_ms", float("nan")))
    s = (f"{f'B{B} H{H} L{L} Lk{Lk}':>24} {mode[:4]:>4} {SHORT.get(dt, dt):>4} {d.get('auto_is', '?'):>8} "
         f"{case['recipe_f32_ms']:7.3f} {whole:7.3f} {f('auto_ms'):7.3f} {f('blocks_ms'):7.3f}")
    if args.probes:
        s += f" {f('b4_ms'):7.3f} {f('b8_ms'):7.3f} {f('b16_ms'):7.3f}"
    s += (f" {f('whole_over_blocks'):6.2f} {f('recipe_over_blocks'):6.2f} {f('blocks_floor_pct'):5.1f} "
          f"{f('blocks_err'):7.1e}")
    if args.backward:
        wv = d.get("fourstep_vjp_ms", d.get("cufft_vjp_ms", float("nan")))
        s += f" {wv:7.3f} {f('blocks_vjp_ms'):7.3f} {f('blocks_vjp_floor_pct'):5.1f}"
        if args.probes:
            s += f" {f('b4_vjp_ms'):7.3f} {f('b8_vjp_ms'):7.3f} {f('b16_vjp_ms'):7.3f}"
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--backward", action="store_true", help="time fftconv_vjp too (blocks and the whole row)")
    ap.add_argument("--probes", action="store_true", help="time the block sizes 4m, 8m and 16m too (algos 13, 11, 12)")
    ap.add_argument("--modes", default="causal,circular")
    ap.add_argument("--dtypes", default="float16,bfloat16,float32")
    ap.add_argument("--taps", default="64,256,1024")
    ap.add_argument("--all", action="store_true", help="also L = 2^18 (B=1, H=64)")
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    args.dtypes = args.dtypes.split(",")
    cases = ([(1, 64, 1 << 18)] if args.all else []) + CASES
    taps = [int(t) for t in args.taps.split(",")]
    bw = copy_bandwidth()
    res = dict(device=torch.cuda.get_device_name(), copy_TBps=bw / 1e12, reps=args.reps, cases={})
    print(f"{res['device']}: copy bandwidth {bw / 1e12:.3f} TB/s", flush=True)
    head = (f"{'case':>24} {'mode':>4} {'dt':>4} {'auto is':>8} {'recipe':>7} {'whole':>7} {'auto':>7} "
            f"{'blocks':>7}")
    if args.probes:
        head += f" {'b4':>7} {'b8':>7} {'b16':>7}"
    head += f" {'wh/bl':>6} {'rec/bl':>6} {'%fl':>5} {'err bl':>7}"
    if args.backward:
        head += f" {'vjp wh':>7} {'vjp bl':>7} {'%fl':>5}"
        if args.probes:
            head += f" {'vjp b4':>7} {'vjp b8':>7} {'vjp b16':>7}"
    print(head, flush=True)
    for B, H, L in cases:  # shapes outermost: a timeout drops the last shape, not a mode
        for Lk in taps:
            for mode in args.modes.split(","):
                try:
                    case = run_case(B, H, L, Lk, mode, res, bw, args)
                except Exception:  # noqa: BLE001  (out of memory at one size must not end the run)
                    traceback.print_exc()
                    free()
                    continue
                for dt in args.dtypes:
                    print(line(B, H, L, Lk, mode, dt, case, args), flush=True)
                if args.json:
                    with open(args.json, "w") as fh:
                        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
