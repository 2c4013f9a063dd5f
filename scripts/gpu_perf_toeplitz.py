"""Focused GPU timing of the CUDA block Toeplitz (Nt=1000, Nd=100, Nm=5000, float32): copy
bandwidth, accuracy vs the PyTorch recipe, times of every transform layout fft 0 (strided R2C/C2R)
/ 1 (paired C2C) / 2 (contiguous + transposes) × product algo 0 (cuBLAS) / 2 (own) / -1 (default)
for R = 1 and 16, the recipe, space-major per fft, and a per-kernel breakdown (torch.profiler) per fft.
    python scripts/gpu_perf_toeplitz.py OUTDIR
"""
import json
import sys

import torch

sys.path.insert(0, "python")
from strux import _cuda  # noqa: E402
from strux.bench.gpu import copy_bandwidth, rel, time_ms  # noqa: E402

out = sys.argv[1] if len(sys.argv) > 1 else "."
Nt, Nd, Nm, R = 1000, 100, 5000, 16
bw = copy_bandwidth()
res = dict(copy_TBps=bw / 1e12, device=torch.cuda.get_device_name())
print(f"copy bandwidth {bw / 1e12:.3f} TB/s", flush=True)
op = _cuda.BlockToeplitzCUDA(torch.randn(Nt, Nd, Nm, device="cuda"))
fhat, nfft = op.fhat, _cuda.toeplitz_nfft(Nt)
fb = fhat.numel() * fhat.element_size()
floor = fb / bw * 1e3
res.update(fhat_GB=fb / 1e9, floor_ms=floor)
m, d = torch.randn(Nt, Nm, device="cuda"), torch.randn(Nt, Nd, device="cuda")
mR, dR = torch.randn(Nt, Nm, R, device="cuda"), torch.randn(Nt, Nd, R, device="cuda")


def recipe(x):
    X = torch.fft.rfft(x, n=nfft, dim=0)
    return torch.fft.irfft(torch.bmm(fhat, X.reshape(X.shape[0], Nm, -1)), n=nfft, dim=0)[:Nt]


def recipe_adj(x):
    X = torch.fft.rfft(x, n=nfft, dim=0)
    return torch.fft.irfft(torch.bmm(fhat.conj().transpose(1, 2), X.reshape(X.shape[0], Nd, -1)),
                           n=nfft, dim=0)[:Nt]


ref = dict(m=recipe(m)[..., 0], d=recipe_adj(d)[..., 0], mR=recipe(mR), dR=recipe_adj(dR))
torch.cuda.empty_cache()
cases = dict(m=(False, m), d=(True, d), mR=(False, mR), dR=(True, dR))
FFTS = (2,)  # fft 0 and 1 were measured in version 4 (bench/NOTES-gpu.md); they are slower
for fft in FFTS:
    for algo in (0, 2, -1):
        op.algo, op.fft = algo, fft
        op._plans.clear()
        torch.cuda.empty_cache()
        for k, (adj, x) in cases.items():
            f = op.rmatvec if adj else op.matvec
            err = rel(f(x), ref[k])
            t = time_ms(lambda: f(x), warm=3, reps=20 if x.dim() == 2 else 10)
            res[f"{k}_fft{fft}_algo{algo}"] = dict(ms=t[0], min=t[1], max=t[2], err=err,
                                                   bw_frac=fb / (t[0] * 1e-3) / bw)
            print(f"fft {fft} algo {algo:2d} {k:3s}: {t[0]:.3f} ms (min {t[1]:.3f} max {t[2]:.3f}) "
                  f"{fb / (t[0] * 1e-3) / bw:.1%} of copy bw, err {err:.1e}", flush=True)
op.algo, op.fft = -1, -1  # the defaults
op._plans.clear()
torch.cuda.empty_cache()
for k, (adj, x) in cases.items():
    f = op.rmatvec if adj else op.matvec
    err = rel(f(x), ref[k])
    t = time_ms(lambda: f(x), warm=3, reps=20 if x.dim() == 2 else 10)
    res[f"{k}_default"] = dict(ms=t[0], err=err, bw_frac=fb / (t[0] * 1e-3) / bw, fft=op._plan(x.shape[2] if
                               x.dim() == 3 else 1).fft)
    print(f"default (fft {res[f'{k}_default']['fft']}) {k:3s}: {t[0]:.3f} ms "
          f"{fb / (t[0] * 1e-3) / bw:.1%} of copy bw, err {err:.1e}", flush=True)
# repeated calls keep the answer (fft 2's zero padding persists between calls)
for k, (adj, x) in cases.items():
    f = op.rmatvec if adj else op.matvec
    res[f"{k}_default_err_after"] = rel(f(x), ref[k])
print("errors after the timing loops:", {k: f"{res[f'{k}_default_err_after']:.1e}" for k in cases}, flush=True)
del ref
op._plans.clear()
torch.cuda.empty_cache()
res["torch_m"] = time_ms(lambda: recipe(m), reps=10)[0]
res["torch_mR"] = time_ms(lambda: recipe(mR), reps=10)[0]
torch.cuda.empty_cache()
print(f"torch recipe matvec {res['torch_m']:.3f} ms, R=16 {res['torch_mR']:.3f} ms", flush=True)

# space-major layout (same F̂), default algo, every fft
for fft in FFTS:
    sm = _cuda.BlockToeplitzCUDA.from_fhat(fhat, Nt, layout="space-major", fft=fft)
    for k, adj, x in (("m", False, m.t().contiguous()), ("d", True, d.t().contiguous()),
                      ("mR", False, mR.permute(1, 0, 2).contiguous()),
                      ("dR", True, dR.permute(1, 0, 2).contiguous())):
        f = sm.rmatvec if adj else sm.matvec
        res[f"sm_{k}_fft{fft}"] = time_ms(lambda: f(x), reps=10)[0]
        print(f"space-major fft {fft} default algo {k}: {res[f'sm_{k}_fft{fft}']:.3f} ms", flush=True)
    del sm
    torch.cuda.empty_cache()

# per-kernel breakdown of the default algo, every fft
from torch.profiler import ProfilerActivity, profile  # noqa: E402
op.algo = -1
brk = {}
for fft, k in [(fft, k) for fft in FFTS for k in cases]:
    if op.fft != fft:
        op.fft = fft
        op._plans.clear()
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
    brk[f"{k}_fft{fft}"] = rows
    print(f"-- breakdown fft {fft} {k} (ms per call):", flush=True)
    for name, ms, c in rows[:8]:
        print(f"   {ms:7.3f}  x{c}  {name}", flush=True)
res["breakdown"] = brk
json.dump(res, open(f"{out}/toeplitz_perf.json", "w"), indent=1)

print("\n== summary (H200 target: >= 85% copy bw = <= 1.12 ms; R=16 per RHS <= 0.25 of a single matvec)")
print(f"copy {bw / 1e12:.2f} TB/s, F̂ {fb / 1e9:.2f} GB, floor {floor:.3f} ms")
for fft in FFTS:
    best_m = min(res[f"m_fft{fft}_algo{a}"]["ms"] for a in (0, 2, -1))
    best_d = min(res[f"d_fft{fft}_algo{a}"]["ms"] for a in (0, 2, -1))
    for algo in (0, 2, -1):
        a = {k: res[f"{k}_fft{fft}_algo{algo}"] for k in cases}
        print(f"fft {fft} algo {algo:2d}: matvec {a['m']['ms']:.3f} ({a['m']['bw_frac']:.0%})  rmatvec "
              f"{a['d']['ms']:.3f} ({a['d']['bw_frac']:.0%})  R16 matvec {a['mR']['ms']:.3f} (per RHS "
              f"{a['mR']['ms'] / R / best_m:.3f})  R16 rmatvec {a['dR']['ms']:.3f} (per RHS "
              f"{a['dR']['ms'] / R / best_d:.3f})")
dm, dd = res["m_default"]["ms"], res["d_default"]["ms"]
print(f"default: matvec {dm:.3f} ({res['m_default']['bw_frac']:.0%})  rmatvec {dd:.3f} "
      f"({res['d_default']['bw_frac']:.0%})  R16 matvec {res['mR_default']['ms']:.3f} (per RHS "
      f"{res['mR_default']['ms'] / R / dm:.3f})  R16 rmatvec {res['dR_default']['ms']:.3f} (per RHS "
      f"{res['dR_default']['ms'] / R / dd:.3f})")
print(f"torch: matvec {res['torch_m']:.3f} ({fb / (res['torch_m'] * 1e-3) / bw:.0%})  R16 {res['torch_mR']:.3f}")
