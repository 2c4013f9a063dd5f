"""fftconv forward with short filters on long rows (issue 12, "Short and partial filters"): the
blocks solver (forced, options={"solver": "blocks"}, plan algo 10) against the automatic choice
as it was before this solver ("whole": one transform of the padded row, the four-step kernels
where they apply, else cuFFT; every case here has more than 32 taps, so not the direct kernels),
the automatic choice now ("auto"; the table names what algo 0 takes) and the PyTorch rfft recipe
(float32 rfft/irfft at n = L + Lk - 1 rounded up to a 2·3·5·7-smooth size), all in this process,
causal. Cases: B=1 H=64 L in
{2^18, 2^20, 2^22} and B=8 H=64 L=100000, Lk in {64, 256, 1024, 4096}, float32 and float16 (the
recipe always computes in float32). CUDA events through strux.bench.timing, 3 warm-up calls,
medians. Per case also: the relative error of each solver against float64 on two rows, and the
fraction of the HBM floor (u read + y written once, at the device-to-device copy bandwidth
measured here). With --backward, fftconv_vjp (every gradient, no gates) of blocks and the whole-row
solver too.

    python bench/gpu_fftconv_blocks.py [--json PATH] [--quick] [--backward] [--reps N]

Prints a table; writes the results as JSON to PATH (after every case, so a timeout keeps the rest).
"""
import argparse
import json
import traceback

import torch

from strux import _cuda_fftconv as _fc
from strux.bench.gpu import copy_bandwidth, free, rel
from strux.bench.timing import time_ms

CASES = [(1, 64, 1 << 18), (1, 64, 1 << 20), (1, 64, 1 << 22), (8, 64, 100000)]
TAPS = [64, 256, 1024, 4096]
DTYPES = ["float32", "float16"]
SOLVERS = {"blocks": {"solver": "blocks"}, "auto": None, "fourstep": {"solver": "fourstep"},
           "cufft": {"solver": "cufft"}}


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


def recipe(u, k):
    L, Lk = u.shape[-1], k.shape[-1]
    n = smooth(L + Lk - 1)
    y = torch.fft.irfft(torch.fft.rfft(u.float(), n=n) * torch.fft.rfft(k.float(), n=n), n=n)
    return y[..., :L].to(u.dtype)


def ref64(u, k):
    L, Lk = u.shape[-1], k.shape[-1]
    n = smooth(L + Lk - 1)
    return torch.fft.irfft(torch.fft.rfft(u.double(), n=n) * torch.fft.rfft(k.double(), n=n), n=n)[..., :L]


def auto_choice(u, B, H, L, Lk, dt):
    """What the automatic choice (algo 0) runs for this problem, in one word."""
    p = _fc._ext.cuda.fftconv_plan(u.get_device(), B, H, L, Lk, "causal", dt, False, 0)
    return ("blocks" if p.blocks else "direct" if p.direct else "tensor" if p.tensor else
            "fourstep" if p.fourstep else "fused" if p.fused else "cufft")


def run_case(B, H, L, Lk, res, bw, args):
    key = f"B{B}_H{H}_L{L}_Lk{Lk}"
    case = res["cases"][key] = {"B": B, "H": H, "L": L, "Lk": Lk}
    u32 = torch.randn(B, H, L, device="cuda")
    k32 = torch.randn(H, Lk, device="cuda") / Lk ** 0.5
    case["recipe_f32_ms"] = ms(lambda: recipe(u32, k32), args)
    case["recipe_err"] = rel(recipe(u32[:1, :2], k32[:2]).double(), ref64(u32[:1, :2], k32[:2]))
    free()
    for dt in DTYPES:
        u = u32.to(getattr(torch, dt))
        k = k32.to(getattr(torch, dt))
        floor_ms = 2 * u.numel() * u.element_size() / bw * 1e3
        d = case[dt] = {"floor_ms": floor_ms, "auto_is": auto_choice(u, B, H, L, Lk, dt)}
        ref = ref64(u[:1, :2], k[:2])
        for name, opt in SOLVERS.items():
            if name == "cufft" and "fourstep_ms" in d:
                continue  # the whole-row solver is the four-step one here
            try:
                call = (lambda o: lambda: _fc.fftconv(u, k, options=o))(opt)
                y = call()
                d[f"{name}_err"] = rel(y[:1, :2].double(), ref)
                del y
                d[f"{name}_ms"] = ms(call, args)
                d[f"{name}_floor_pct"] = 100 * floor_ms / d[f"{name}_ms"]
                if args.backward and name in ("blocks", "fourstep", "cufft"):
                    dy = torch.randn_like(u)
                    d[f"{name}_vjp_ms"] = ms(lambda o=opt: _fc.fftconv_vjp(dy, u, k, options=o), args)
                    del dy
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
        u = k = ref = None  # freed before the next dtype (the lambdas above are done with them)
        free()
    u32 = k32 = None
    free()
    return case


def ms(fn, args):
    return time_ms(fn, warm=3, reps=args.reps)[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--quick", action="store_true", help="one row length per shape, Lk 256 and 4096")
    ap.add_argument("--backward", action="store_true", help="time fftconv_vjp too (blocks and the whole row)")
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    cases = [CASES[1], CASES[3]] if args.quick else CASES
    taps = [256, 4096] if args.quick else TAPS
    bw = copy_bandwidth()
    res = dict(device=torch.cuda.get_device_name(), copy_TBps=bw / 1e12, reps=args.reps, cases={})
    print(f"{res['device']}: copy bandwidth {bw / 1e12:.3f} TB/s", flush=True)
    head = (f"{'case':>26} {'dtype':>8} {'auto is':>8} {'recipe':>8} {'whole':>8} {'auto':>8} {'blocks':>8} "
            f"{'whole/bl':>8} {'rec/bl':>7} {'%floor':>7} {'err bl':>8}")
    if args.backward:
        head += f" {'vjp wh':>8} {'vjp bl':>8}"
    print(head, flush=True)
    for B, H, L in cases:
        for Lk in taps:
            try:
                case = run_case(B, H, L, Lk, res, bw, args)
            except Exception:  # noqa: BLE001  (out of memory at one size must not end the run)
                traceback.print_exc()
                free()
                continue
            for dt in DTYPES:
                d = case.get(dt, {})
                f = lambda k: d.get(k, float("nan"))  # noqa: E731
                whole = d.get("fourstep_ms", d.get("cufft_ms", float("nan")))
                line = (f"{f'B{B} H{H} L{L} Lk{Lk}':>26} {dt:>8} {d.get('auto_is', '?'):>8} "
                        f"{case['recipe_f32_ms']:8.3f} {whole:8.3f} {f('auto_ms'):8.3f} {f('blocks_ms'):8.3f} "
                        f"{f('whole_over_blocks'):8.2f} {f('recipe_over_blocks'):7.2f} {f('blocks_floor_pct'):7.1f} "
                        f"{f('blocks_err'):8.1e}")
                if args.backward:
                    wv = d.get("fourstep_vjp_ms", d.get("cufft_vjp_ms", float("nan")))
                    line += f" {wv:8.3f} {f('blocks_vjp_ms'):8.3f}"
                print(line, flush=True)
            if args.json:
                with open(args.json, "w") as fh:
                    json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
