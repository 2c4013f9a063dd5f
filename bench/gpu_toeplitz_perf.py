"""Focused GPU timing of the CUDA block Toeplitz (Nt=1000, Nd=100, Nm=5000, float32): copy
bandwidth, accuracy vs the PyTorch recipe, times of fft 2 with the default product (-1) for R = 1
and 16 and algo 3 (real gemm) for the R = 16 matvec, space-major, float64 at Nm = 1000, and a
per-kernel breakdown (torch.profiler). Writes OUTDIR/toeplitz_perf.json.
    python bench/gpu_toeplitz_perf.py OUTDIR     (scripts/gpu_focus.sh toeplitz)
"""
import json
import sys

import torch

from strux import _cuda, _cuda_toeplitz
from strux.bench.gpu import copy_bandwidth, rel, toeplitz_recipes
from strux.bench.timing import time_ms

out = sys.argv[1] if len(sys.argv) > 1 else "."
Nt, Nd, Nm, R = 1000, 100, 5000, 16
bw = copy_bandwidth()
res = dict(copy_TBps=bw / 1e12, device=torch.cuda.get_device_name())
print(f"copy bandwidth {bw / 1e12:.3f} TB/s", flush=True)
op = _cuda_toeplitz.BlockToeplitzCUDA(torch.randn(Nt, Nd, Nm, device="cuda"))
fhat, nfft = op.fhat, _cuda_toeplitz.toeplitz_nfft(Nt)
fb = fhat.numel() * fhat.element_size()
floor = fb / bw * 1e3
res.update(fhat_GB=fb / 1e9, floor_ms=floor)
m, d = torch.randn(Nt, Nm, device="cuda"), torch.randn(Nt, Nd, device="cuda")
mR, dR = torch.randn(Nt, Nm, R, device="cuda"), torch.randn(Nt, Nd, R, device="cuda")
recipe, recipe_adj = toeplitz_recipes(fhat, Nt, Nd, Nm, nfft)
ref = dict(m=recipe(m)[..., 0], d=recipe_adj(d)[..., 0], mR=recipe(mR), dR=recipe_adj(dR))
torch.cuda.empty_cache()
cases = dict(m=(False, m), d=(True, d), mR=(False, mR), dR=(True, dR))
FFTS = (2,)  # fft 0 and 1 are slower (bench/NOTES-gpu.md#toeplitz-fft-rule)
# The default (-1) against algo 3 (matvec R > 1 as one real gemm per frequency; R = 1 and rmatvec
# are algo 0 there); algo 0 and 2 alone: bench/NOTES-gpu.md#toeplitz-algo-rule.
ALGOS = (-1, 3)
for fft in FFTS:
    for algo in ALGOS:
        op.algo, op.fft = algo, fft
        _cuda.clear_plan_cache()
        torch.cuda.empty_cache()
        for k, (adj, x) in cases.items():
            if algo == 3 and k != "mR":
                continue
            f = op.rmatvec if adj else op.matvec
            err = rel(f(x), ref[k])
            t = time_ms(lambda: f(x), warm=3, reps=20 if x.dim() == 2 else 10)
            res[f"{k}_fft{fft}_algo{algo}"] = dict(ms=t[0], min=t[1], max=t[2], err=err,
                                                   bw_frac=fb / (t[0] * 1e-3) / bw, algo=op._plan(
                                                       x.shape[2] if x.dim() == 3 else 1).algo)
            print(f"fft {fft} algo {algo:2d} {k:3s}: {t[0]:.3f} ms (min {t[1]:.3f} max {t[2]:.3f}) "
                  f"{fb / (t[0] * 1e-3) / bw:.1%} of copy bw, err {err:.1e}", flush=True)
        # repeated calls keep the answer (fft 2's zero padding persists between calls)
        for k, (adj, x) in cases.items():
            if algo == 3 and k != "mR":
                continue
            f = op.rmatvec if adj else op.matvec
            res[f"{k}_fft{fft}_algo{algo}"]["err_after"] = e = rel(f(x), ref[k])
            print(f"   error after the timing loop, {k}: {e:.1e}", flush=True)
del ref
_cuda.clear_plan_cache()
torch.cuda.empty_cache()

# space-major layout (same F̂): default for every case, algo 3 for R = 16 matvec
for fft in FFTS:
    for algo in ALGOS:
        sm = _cuda_toeplitz.BlockToeplitzCUDA.from_fhat(fhat, Nt, layout="space-major", fft=fft, algo=algo)
        for k, adj, x in (("m", False, m.t().contiguous()), ("d", True, d.t().contiguous()),
                          ("mR", False, mR.permute(1, 0, 2).contiguous()),
                          ("dR", True, dR.permute(1, 0, 2).contiguous())):
            if algo == 3 and k != "mR":
                continue
            f = sm.rmatvec if adj else sm.matvec
            res[f"sm_{k}_fft{fft}_algo{algo}"] = time_ms(lambda: f(x), reps=10)[0]
            print(f"space-major fft {fft} algo {algo} {k}: {res[f'sm_{k}_fft{fft}_algo{algo}']:.3f} ms", flush=True)
        del sm
        torch.cuda.empty_cache()

# float64 at a smaller shape (Nm = 1000, F̂ 1.6 GB): R = 16 matvec, default vs algo 3
op64 = _cuda_toeplitz.BlockToeplitzCUDA(torch.randn(Nt, Nd, 1000, device="cuda", dtype=torch.float64))
x64 = torch.randn(Nt, 1000, R, device="cuda", dtype=torch.float64)
X64 = torch.fft.rfft(x64, n=nfft, dim=0)
ref64 = torch.fft.irfft(torch.bmm(op64.fhat, X64), n=nfft, dim=0)[:Nt]
del X64
for algo in ALGOS:
    op64.algo = algo
    _cuda.clear_plan_cache()
    e = rel(op64.matvec(x64), ref64)
    res[f"f64_mR_algo{algo}"] = dict(ms=time_ms(lambda: op64.matvec(x64), reps=10)[0], err=e)
    print(f"float64 Nm=1000 matvec R=16 algo {algo}: {res[f'f64_mR_algo{algo}']['ms']:.3f} ms, err {e:.1e}",
          flush=True)
del op64, x64, ref64
torch.cuda.empty_cache()

# per-kernel breakdown of the default algo, every fft
from torch.profiler import ProfilerActivity, profile  # noqa: E402
brk = {}
for fft, algo, k in [(fft, a, k) for fft in FFTS for a in ALGOS for k in ("mR",)]:
    op.fft, op.algo = fft, algo
    _cuda.clear_plan_cache()
    torch.cuda.empty_cache()
    adj, x = cases[k]
    f = op.rmatvec if adj else op.matvec
    f(x)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            f(x)
        torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        tt = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
        if tt > 0 and e.count > 0:
            rows.append((e.key[:90], tt / 5 / 1e3, e.count // 5))
    rows.sort(key=lambda r: -r[1])
    brk[f"{k}_fft{fft}_algo{algo}"] = rows
    print(f"-- breakdown fft {fft} algo {algo} {k} (ms per call):", flush=True)
    for name, ms, c in rows[:8]:
        print(f"   {ms:7.3f}  x{c}  {name}", flush=True)
res["breakdown"] = brk
json.dump(res, open(f"{out}/toeplitz_perf.json", "w"), indent=1)

print("\n== summary (target: R=16 matvec per RHS <= 0.25 of the single matvec)")
print(f"copy {bw / 1e12:.2f} TB/s, F̂ {fb / 1e9:.2f} GB, floor {floor:.3f} ms")
for fft in FFTS:
    dm = res[f"m_fft{fft}_algo-1"]["ms"]
    for k in cases:
        a = res[f"{k}_fft{fft}_algo-1"]
        print(f"default {k:3s}: {a['ms']:.3f} ms ({a['bw_frac']:.0%}) err {a['err']:.1e}")
    for algo in ALGOS:
        a = res[f"mR_fft{fft}_algo{algo}"]
        print(f"fft {fft} algo {algo:2d} (plan algo {a['algo']}) R16 matvec {a['ms']:.3f} ms, per RHS "
              f"{a['ms'] / R / dm:.3f}, err {a['err']:.1e} / {a['err_after']:.1e}")
