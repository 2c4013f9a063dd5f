"""fftconv backward at long lengths (bench/NOTES-gpu-fftconv-long.md, "Backward (four-step)"): B = 1,
H = 64, causal, Lk = L, float16 and float32, no gates. Per case, ms (CUDA events, 3 warm-up calls,
median of 10): the four-step forward with the filter spectrum cached (FFTConvCUDA), the four-step
plan's backward alone (its filter set once), the vjp call (fftconv_vjp: set_filter + backward) on the
four-step solver (algo 8) and on the cuFFT path (algo 1); ratios to the cached forward; the four-step
gradients' relative error against the cuFFT path's. Writes OUTDIR/fftconv_long_bwd.json.
    python bench/gpu_fftconv_long_bwd.py OUTDIR
"""
import json
import sys
import traceback

import torch

from strux import _cuda_fftconv as _fc
from strux.bench.gpu import fftconv_algo, free, rel
from strux.bench.timing import median_ms

out = sys.argv[1] if len(sys.argv) > 1 else "."
CASES = [(1, 64, 1 << 19), (1, 64, 1 << 20)]


def ms(fn):
    return median_ms(fn, reps=10)


def vjp_with(algo, dy, u, k):
    with fftconv_algo(algo):
        return _fc.fftconv_vjp(dy, u, k)


def run_case(B, H, L, dt):
    u = torch.randn(B, H, L, device="cuda", dtype=dt)
    k = (torch.randn(H, L, device="cuda") / L ** 0.5).to(dt)
    dy = torch.randn_like(u)
    d = {}
    with fftconv_algo(8):
        op = _fc.FFTConvCUDA(k, B, L)
    d["fwd_cached_ms"] = ms(lambda: op(u))
    del op
    mode = "causal"
    plan = _fc._ext.cuda.FFTConvPlan(B, H, L, L, mode, str(dt).split(".")[1], True, 8)
    d["nfft"] = plan.nfft
    s = torch.cuda.current_stream().cuda_stream
    plan.set_filter(k.data_ptr(), s)
    du, dk = torch.empty_like(u), torch.empty_like(k)
    d["bwd_passes_ms"] = ms(lambda: plan.backward(dy.data_ptr(), u.data_ptr(), 0, 0, 0, du.data_ptr(),
                                                  dk.data_ptr(), 0, 0, 0, s))
    del plan, du, dk
    free()
    d["vjp_fourstep_ms"] = ms(lambda: vjp_with(8, dy, u, k))
    d["vjp_cufft_ms"] = ms(lambda: vjp_with(1, dy, u, k))
    g4, g1 = vjp_with(8, dy, u, k), vjp_with(1, dy, u, k)
    d["err_du"], d["err_dk"] = rel(g4[0].double(), g1[0].double()), rel(g4[1].double(), g1[1].double())
    for key in ("bwd_passes_ms", "vjp_fourstep_ms", "vjp_cufft_ms"):
        d[key.replace("_ms", "_over_fwd")] = d[key] / d["fwd_cached_ms"]
    return d


def main():
    res = dict(device=torch.cuda.get_device_name(), cases={})
    print(f"{res['device']}", flush=True)
    print(f"{'case':>22} {'dtype':>8} {'fwd ca':>8} {'bwd':>8} {'vjp 4s':>8} {'vjp cuf':>8} "
          f"{'bwd/fwd':>8} {'vjp/fwd':>8} {'cuf/4s':>7} {'err du':>8} {'err dk':>8}", flush=True)
    for B, H, L in CASES:
        for dt in (torch.float16, torch.float32):
            key = f"B{B}_H{H}_L{L}_{str(dt).split('.')[1]}"
            try:
                d = res["cases"][key] = run_case(B, H, L, dt)
            except Exception:  # noqa: BLE001
                traceback.print_exc()
                continue
            finally:
                free()
            print(f"{f'B{B} H{H} L{L}':>22} {str(dt).split('.')[1]:>8} {d['fwd_cached_ms']:8.3f} "
                  f"{d['bwd_passes_ms']:8.3f} {d['vjp_fourstep_ms']:8.3f} {d['vjp_cufft_ms']:8.3f} "
                  f"{d['bwd_passes_over_fwd']:8.2f} {d['vjp_fourstep_over_fwd']:8.2f} "
                  f"{d['vjp_cufft_ms'] / d['vjp_fourstep_ms']:7.2f} {d['err_du']:8.1e} {d['err_dk']:8.1e}",
                  flush=True)
            with open(f"{out}/fftconv_long_bwd.json", "w") as fh:
                json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
