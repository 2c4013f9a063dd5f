"""strux fftconv beside FlashFFTConv (built from source by scripts/gpu_flashfftconv.sh, never
committed) and the PyTorch rfft recipe, in one process: issue 12's table.

Shapes as the issue: float16 (and bfloat16 unless --quick), B = 64, H = 768 at FFT sizes N = 256 …
32K; B = 1, H = 64 at N = 1M, 2M, 4M. Circular is L = N, causal is L = N/2 (FlashFFTConv pads the
input to its FFT size N), the filter k of length L. FlashFFTConv takes its filter in float32 (its
only form); strux is timed with the filter in the input dtype (its native call, `strux.torch.fftconv`),
with the float32 filter through `strux.torch.FFTConv` (which converts u to float32 here), and with
the filter spectrum cached in the plan (`FFTConvCUDA`, forward only). Forward + backward: causal,
`torch.autograd.grad` of both with respect to u and k (no accumulation kernels).

Per case: GPU ms per call (back to back), strux/peer time ratios, relative error of each against a
float64 convolution of the inputs it was given (two batch rows), and the fraction of the HBM floor
(read u and write y once, 2 bytes each; forward + backward also dy read, du written and u read
again) at the device-to-device copy bandwidth measured here.
    python bench/gpu_fftconv_peer.py OUT_JSON [--quick] [--sizes 256,1024,...]
"""
import argparse
import json
import traceback

import torch

import strux.torch as st
from strux import _cuda_fftconv as _fc
from strux.bench.gpu import copy_bandwidth, free, rel
from strux.bench.timing import back_to_back_ms

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--quick", action="store_true", help="float16 only, no float32-filter strux call")
ap.add_argument("--sizes", default="", help="comma-separated FFT sizes (default: the issue's)")
args = ap.parse_args()

from flashfftconv import FlashFFTConv  # noqa: E402  (after argparse: --help works without it)

SHORT = [256, 1024, 4096, 8192, 16384, 32768]
LONG = [1 << 20, 1 << 21, 1 << 22]
sizes = [int(s) for s in args.sizes.split(",") if s] or SHORT + LONG
dtypes = [torch.float16] if args.quick else [torch.float16, torch.bfloat16]
bw = copy_bandwidth()
res = dict(device=torch.cuda.get_device_name(), copy_TBps=bw / 1e12, cases=[])
print(f"{res['device']}: copy bandwidth {bw / 1e12:.3f} TB/s", flush=True)


def ms(fn, big):
    return back_to_back_ms(fn, n=3 if big else 20, reps=3 if big else 5, warm=2)


def ref64(u, k, mode):
    L, n = u.shape[-1], (u.shape[-1] if mode == "circular" else 2 * u.shape[-1])
    return torch.fft.irfft(torch.fft.rfft(u.double(), n=n) * torch.fft.rfft(k.double(), n=n), n=n)[..., :L]


def recipe(u, k, mode):
    L, n = u.shape[-1], (u.shape[-1] if mode == "circular" else 2 * u.shape[-1])
    return torch.fft.irfft(torch.fft.rfft(u.float(), n=n) * torch.fft.rfft(k.float(), n=n), n=n)[..., :L].to(u.dtype)


def grad_fn(conv, u, k, dy):
    def f():
        return torch.autograd.grad(conv(u, k), (u, k), dy)
    return f


def case(N, mode, dt):
    B, H = (64, 768) if N <= 32768 else (1, 64)
    L = N if mode == "circular" else N // 2
    big = B * H * L >= (1 << 27)
    g = torch.Generator(device="cuda").manual_seed(N + (mode == "causal"))
    u = torch.randn(B, H, L, device="cuda", generator=g).to(dt)
    k32 = torch.randn(H, L, device="cuda", generator=g) / L ** 0.5
    kh = k32.to(dt)
    flash = FlashFFTConv(N, dtype=dt).cuda()
    mod32 = st.FFTConv(L, dtype=dt, mode=mode)
    r = dict(N=N, mode=mode, dtype=str(dt).replace("torch.", ""), B=B, H=H, L=L)
    es = u.element_size()
    r["floor_fwd_ms"] = 2 * u.numel() * es / bw * 1e3
    r["floor_fwdbwd_ms"] = 5 * u.numel() * es / bw * 1e3
    with torch.no_grad():
        yf, ys, ys32 = flash(u, k32), st.fftconv(u, kh, mode), mod32(u, k32)
        r["err_flash"] = rel(yf[:2], ref64(u[:2], k32, mode))
        r["err_strux"] = rel(ys[:2], ref64(u[:2], kh, mode))
        r["err_strux_k32"] = rel(ys32[:2], ref64(u[:2], k32, mode))
        del yf, ys, ys32
        free()
        r["flash_ms"] = ms(lambda: flash(u, k32), big)
        r["strux_ms"] = ms(lambda: st.fftconv(u, kh, mode), big)
        if not args.quick:
            r["strux_k32_ms"] = ms(lambda: mod32(u, k32), big)
        conv = _fc.FFTConvCUDA(kh, B, L, mode)
        r["strux_cached_ms"] = ms(lambda: conv(u), big)
        r["strux_solver"] = conv.describe()
        del conv
        free()
        # the recipe where its float32 spectra fit comfortably (B = 64 at N = 32K needs ~60 GB)
        if B * H * (L if mode == "circular" else 2 * L) * 8 * 3 < 24e9:
            r["recipe_ms"] = ms(lambda: recipe(u, kh, mode), big)
            free()
    if mode == "causal":
        dy = torch.randn_like(u)
        uf, kf, khg = u.clone().requires_grad_(), k32.clone().requires_grad_(), kh.clone().requires_grad_()
        r["flash_fb_ms"] = ms(grad_fn(flash, uf, kf, dy), big)
        free()
        r["strux_fb_ms"] = ms(grad_fn(lambda a, b: st.fftconv(a, b, mode), uf, khg, dy), big)
        del uf, kf, khg, dy
    del u, k32, kh, flash
    free()
    for p in ("strux", "strux_cached", "strux_k32", "recipe"):
        if p + "_ms" in r:
            r[p + "_over_flash"] = r[p + "_ms"] / r["flash_ms"]
    if "flash_fb_ms" in r:
        r["strux_fb_over_flash"] = r["strux_fb_ms"] / r["flash_fb_ms"]
        r["strux_fb_floor_frac"] = r["floor_fwdbwd_ms"] / r["strux_fb_ms"]
        r["flash_fb_floor_frac"] = r["floor_fwdbwd_ms"] / r["flash_fb_ms"]
    r["strux_floor_frac"] = r["floor_fwd_ms"] / r["strux_ms"]
    r["flash_floor_frac"] = r["floor_fwd_ms"] / r["flash_ms"]
    return r


for dt in dtypes:
    for N in sizes:
        for mode in ("circular", "causal"):
            try:
                r = case(N, mode, dt)
            except Exception as e:  # one case's failure (memory, a peer size it lacks) is reported
                traceback.print_exc()
                r = dict(N=N, mode=mode, dtype=str(dt), error=repr(e)[:300])
                free()
            res["cases"].append(r)
            if "error" in r:
                print(f"{r['dtype']} N={N} {mode}: ERROR {r['error']}", flush=True)
                continue
            fb = (f"; fwd+bwd strux {r['strux_fb_ms']:.3f} flash {r['flash_fb_ms']:.3f} "
                  f"-> {r['strux_fb_over_flash']:.2f}") if "flash_fb_ms" in r else ""
            print(f"{r['dtype']} N={N} {mode}: strux {r['strux_ms']:.3f} ms (cached {r['strux_cached_ms']:.3f}) "
                  f"flash {r['flash_ms']:.3f} -> strux/flash {r['strux_over_flash']:.2f}, "
                  f"floor strux {r['strux_floor_frac']:.0%} flash {r['flash_floor_frac']:.0%}, "
                  f"err strux {r['err_strux']:.1e} flash {r['err_flash']:.1e}{fb}", flush=True)
            with open(args.out, "w") as f:
                json.dump(res, f, indent=1)
