"""Focused GPU timing of the CUDA block Toeplitz (Nt=1000, Nd=100, Nm=5000, float32): copy
bandwidth, accuracy of the own kernels vs the PyTorch recipe, times of algo 0 (cuBLAS) / 2 (own) /
-1 (default) for R = 1 and 16, the recipe, and a per-kernel breakdown (torch.profiler).
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
for algo in (0, 2, -1):
    op.algo = algo
    op._plans.clear()
    torch.cuda.empty_cache()
    for k, (adj, x) in cases.items():
        f = op.rmatvec if adj else op.matvec
        err = rel(f(x), ref[k])
        t = time_ms(lambda: f(x), warm=3, reps=20 if x.dim() == 2 else 10)
        res[f"{k}_algo{algo}"] = dict(ms=t[0], min=t[1], max=t[2], err=err, bw_frac=fb / (t[0] * 1e-3) / bw)
        print(f"algo {algo:2d} {k:3s}: {t[0]:.3f} ms (min {t[1]:.3f} max {t[2]:.3f}) "
              f"{fb / (t[0] * 1e-3) / bw:.1%} of copy bw, err {err:.1e}", flush=True)
del ref
op._plans.clear()
torch.cuda.empty_cache()
res["torch_m"] = time_ms(lambda: recipe(m), reps=10)[0]
res["torch_mR"] = time_ms(lambda: recipe(mR), reps=10)[0]
torch.cuda.empty_cache()
print(f"torch recipe matvec {res['torch_m']:.3f} ms, R=16 {res['torch_mR']:.3f} ms", flush=True)

# space-major layout (same F̂), default algo
sm = _cuda.BlockToeplitzCUDA.from_fhat(fhat, Nt, layout="space-major")
for k, adj, x in (("m", False, m.t().contiguous()), ("d", True, d.t().contiguous()),
                  ("mR", False, mR.permute(1, 0, 2).contiguous()), ("dR", True, dR.permute(1, 0, 2).contiguous())):
    f = sm.rmatvec if adj else sm.matvec
    res[f"sm_{k}"] = time_ms(lambda: f(x), reps=10)[0]
    print(f"space-major default {k}: {res[f'sm_{k}']:.3f} ms", flush=True)
del sm
torch.cuda.empty_cache()

# per-kernel breakdown of the default path
from torch.profiler import ProfilerActivity, profile  # noqa: E402
op.algo = -1
op._plans.clear()
brk = {}
for k, (adj, x) in cases.items():
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
    brk[k] = rows
    print(f"-- breakdown {k} (ms per call):", flush=True)
    for name, ms, c in rows[:8]:
        print(f"   {ms:7.3f}  x{c}  {name}", flush=True)
res["breakdown"] = brk
json.dump(res, open(f"{out}/toeplitz_perf.json", "w"), indent=1)

best1 = min(res["m_algo0"]["ms"], res["m_algo2"]["ms"], res["m_algo-1"]["ms"])
print("\n== summary (H200 target: >= 85% copy bw; R=16 per RHS <= 0.25 of a single matvec)")
print(f"copy {bw / 1e12:.2f} TB/s, F̂ {fb / 1e9:.2f} GB, floor {floor:.3f} ms")
for algo in (0, 2, -1):
    a = {k: res[f"{k}_algo{algo}"] for k in cases}
    print(f"algo {algo:2d}: matvec {a['m']['ms']:.3f} ({a['m']['bw_frac']:.0%})  rmatvec {a['d']['ms']:.3f} "
          f"({a['d']['bw_frac']:.0%})  R16 matvec {a['mR']['ms']:.3f} (per RHS {a['mR']['ms'] / R / best1:.3f})  "
          f"R16 rmatvec {a['dR']['ms']:.3f} (per RHS {a['dR']['ms'] / R / res['d_algo-1']['ms']:.3f})")
print(f"torch: matvec {res['torch_m']:.3f} ({fb / (res['torch_m'] * 1e-3) / bw:.0%})  R16 {res['torch_mR']:.3f}")
