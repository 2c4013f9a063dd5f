"""fftconv forward at long lengths (FFT sizes 65536 … 4M): the four-step solver (forced,
fftconv_algo = 8; the default at these sizes) against the cuFFT path (fftconv_algo = 1) and the
PyTorch rfft recipe (float32 rfft/irfft, in the same process), causal, float32 and float16
inputs (the recipe always on float32). Per case: ms per call with the filter (fftconv(u, k):
spectrum computed per call, as the recipe does), ms with a cached filter spectrum (FFTConvCUDA),
ratios, relative error against float64 on two rows, and the fraction of the HBM floor (read u +
write y once at the copy bandwidth of a 1 GiB torch copy measured here). CUDA events, 3 warm-up
calls, median of 10. Per pass of the cached four-step call (A: column FFTs, B: row pairs,
C: inverse column FFTs and epilogue): kernel times from the CUDA profiler (torch.profiler, 5
calls) and GB/s against each pass's own bytes (A: read u, write X; B: read + write X, read
K̂ once per h, as its grid order lets it; C: read X, read u, write y; X = 4·nfft bytes per row). Also the
cached call of plan algo 14 (the same kernels, pass B's grid row by row) over algo 8's ("k1/4s ca").
Writes OUTDIR/fftconv_long.json and prints the tables.
    python bench/gpu_fftconv_long.py OUTDIR [--quick]
"""
import json
import sys
import traceback

import torch

from strux import _cuda_fftconv as _fc
from strux.bench.gpu import copy_bandwidth, fftconv_algo, free, rel, with_algo
from strux.bench.timing import kernel_us, median_ms

out = sys.argv[1] if len(sys.argv) > 1 else "."
quick = "--quick" in sys.argv
# (B, H, L): Lk = L, causal
CASES = [(8, 64, 65536), (8, 64, 100000), (8, 64, 1 << 20), (1, 64, 1 << 19), (1, 64, 1 << 20), (1, 64, 1 << 21)]
if quick:
    CASES = [CASES[1], CASES[4]]
DTYPES = ["float32", "float16"]
REPS = 10


def ms(fn):
    return median_ms(fn, reps=REPS)


def recipe(u, k):
    L = u.shape[-1]
    n = 2 * L
    y = torch.fft.irfft(torch.fft.rfft(u.float(), n=n) * torch.fft.rfft(k.float(), n=n), n=n)
    return y[..., :L].to(u.dtype)


def ref64(u, k):
    L = u.shape[-1]
    n = 2 * L
    return torch.fft.irfft(torch.fft.rfft(u.double(), n=n) * torch.fft.rfft(k.double(), n=n), n=n)[..., :L]


PASSES = (("A", "cols_forward"), ("B", "rows_kernel"), ("C", "cols_inverse"))


def passes(op, u, nfft, B, H, L, calls=5):
    """Per-pass kernel ms (mean over `calls` cached calls) and GB/s against each pass's bytes."""
    ks = kernel_us(lambda: op(u), calls, width=200)
    us = {p: sum(t for k, _, t in ks if name in k) for p, name in PASSES}  # per call
    rows, e, x = B * H, u.element_size(), 4 * nfft
    nbytes = {"A": rows * (L * e + x), "B": rows * 2 * x + H * x, "C": rows * (x + 2 * L * e)}
    res = {}
    for p, _ in PASSES:
        t = us[p] / 1e3
        res[p] = {"ms": t, "GB": nbytes[p] / 1e9, "GBps": nbytes[p] / (t * 1e-3) / 1e9 if t > 0 else float("nan")}
    return res


def run_case(B, H, L, res, bw):
    key = f"B{B}_H{H}_L{L}"
    case = res["cases"][key] = {}
    u32 = torch.randn(B, H, L, device="cuda")
    k32 = torch.randn(H, L, device="cuda") / L ** 0.5
    case["recipe_f32_ms"] = t_rec = ms(lambda: recipe(u32, k32))
    ref = ref64(u32[:1, :2], k32[:2])
    case["recipe_err"] = rel(recipe(u32[:1, :2], k32[:2]).double(), ref)
    del ref
    free()
    for dt in DTYPES:
        u = u32.to(getattr(torch, dt))
        k = k32.to(getattr(torch, dt))
        elem = u.element_size()
        floor_ms = 2 * u.numel() * elem / bw * 1e3
        d = case[dt] = {"floor_ms": floor_ms}
        # fourstep_k1: algo 14, the same kernels with pass B's grid row by row (a probe of its order)
        for name, algo in (("cufft", 1), ("fourstep", 8), ("fourstep_k1", 14)):
            try:
                call = with_algo(algo, lambda: _fc.fftconv(u, k))
                y = call()
                ref = ref64(u[:1, :2], k[:2])
                d[f"{name}_err"] = rel(y[:1, :2].double(), ref)
                del y, ref
                d[f"{name}_ms"] = ms(call)
                with fftconv_algo(algo):
                    op = _fc.FFTConvCUDA(k, B, L)
                d[f"{name}_cached_ms"] = ms(lambda: op(u))
                if name == "fourstep":
                    try:
                        d["passes"] = passes(op, u, op._plan.nfft, B, H, L)
                    except Exception as e:  # noqa: BLE001  (no profiler: the timings above stand)
                        d["passes_error"] = f"{type(e).__name__}: {e}"
                        traceback.print_exc()
                del op
            except Exception as e:  # noqa: BLE001  (a failing solver must not hide the others)
                d[f"{name}_error"] = f"{type(e).__name__}: {e}"
                traceback.print_exc()
            free()
        if "fourstep_ms" in d:
            d["recipe_over_fourstep"] = t_rec / d["fourstep_ms"]
            d["cufft_over_fourstep"] = d.get("cufft_ms", float("nan")) / d["fourstep_ms"]
            d["floor_pct"] = 100 * floor_ms / d["fourstep_ms"]
            d["floor_pct_cached"] = 100 * floor_ms / d["fourstep_cached_ms"]
            d["k1_over_fourstep_cached"] = d.get("fourstep_k1_cached_ms", float("nan")) / d["fourstep_cached_ms"]
        del u, k
        free()
    del u32, k32
    free()
    return case


def main():
    bw = copy_bandwidth()
    res = dict(device=torch.cuda.get_device_name(), copy_TBps=bw / 1e12, cases={})
    print(f"{res['device']}: copy bandwidth {bw / 1e12:.3f} TB/s", flush=True)
    print(f"{'case':>22} {'dtype':>8} {'recipe':>8} {'cufft':>8} {'4step':>8} {'4s cach':>8} "
          f"{'rec/4s':>7} {'cuf/4s':>7} {'%floor':>7} {'%fl ca':>7} {'err 4s':>8} {'k1/4s ca':>8}", flush=True)
    for B, H, L in CASES:
        try:
            case = run_case(B, H, L, res, bw)
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            continue
        for dt in DTYPES:
            d = case.get(dt, {})
            f = lambda k: d.get(k, float("nan"))  # noqa: E731
            print(f"{f'B{B} H{H} L{L}':>22} {dt:>8} {case['recipe_f32_ms']:8.3f} {f('cufft_ms'):8.3f} "
                  f"{f('fourstep_ms'):8.3f} {f('fourstep_cached_ms'):8.3f} {f('recipe_over_fourstep'):7.2f} "
                  f"{f('cufft_over_fourstep'):7.2f} {f('floor_pct'):7.1f} {f('floor_pct_cached'):7.1f} "
                  f"{f('fourstep_err'):8.1e} {f('k1_over_fourstep_cached'):8.2f}", flush=True)
        for dt in DTYPES:
            ps = case.get(dt, {}).get("passes")
            if ps:
                print(f"{'':>22} {dt:>8} passes " + "  ".join(
                    f"{p} {ps[p]['ms']:.3f} ms {ps[p]['GBps']:.0f} GB/s ({100 * ps[p]['GBps'] * 1e9 / bw:.0f}%)"
                    for p, _ in PASSES), flush=True)
        with open(f"{out}/fftconv_long.json", "w") as fh:  # after every case: a timeout keeps the rest
            json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
