"""Issue 13's float64 goal (the float64 path at >= 85% of copy bandwidth): the CUDA block Toeplitz
with float64 data (F̂ complex128), one right-hand side, matvec and rmatvec, time-major, at three
shapes; GPU ms per call (CUDA events, median of 20), the fraction of copy bandwidth over F̂'s
bytes (the operator's floor: F̂ is read once per call), and the error against the PyTorch recipe
in float64. Writes OUTDIR/toeplitz_f64.json.
    python bench/gpu_toeplitz_f64.py OUTDIR
"""
import json
import sys

import torch

from strux import _cuda, _cuda_toeplitz
from strux.bench.gpu import copy_bandwidth, rel, toeplitz_recipes
from strux.bench.timing import time_ms

out = sys.argv[1] if len(sys.argv) > 1 else "."
SHAPES = [(1000, 100, 2500), (500, 1024, 1024), (1001, 1767, 499)]  # (Nt, Nd, Nm): F̂ 1.0-2.1 GB
bw = copy_bandwidth()
res = dict(copy_TBps=bw / 1e12, device=torch.cuda.get_device_name(), cases={})
print(f"{res['device']}: copy bandwidth {bw / 1e12:.3f} TB/s", flush=True)
for Nt, Nd, Nm in SHAPES:
    op = _cuda_toeplitz.BlockToeplitzCUDA(torch.randn(Nt, Nd, Nm, device="cuda", dtype=torch.float64))
    fhat, nfft = op.fhat, _cuda_toeplitz.toeplitz_nfft(Nt)
    fb = fhat.numel() * fhat.element_size()
    m = torch.randn(Nt, Nm, device="cuda", dtype=torch.float64)
    d = torch.randn(Nt, Nd, device="cuda", dtype=torch.float64)
    recipe, recipe_adj = toeplitz_recipes(fhat, Nt, Nd, Nm, nfft)
    case = dict(fhat_GB=fb / 1e9)
    for name, f, x, r in (("matvec", op.matvec, m, recipe), ("rmatvec", op.rmatvec, d, recipe_adj)):
        err = rel(f(x), r(x)[..., 0])
        t = time_ms(lambda: f(x), warm=3, reps=20)[0]
        case[name] = dict(ms=t, err=err, bw_frac=fb / (t * 1e-3) / bw)
        print(f"({Nt}, {Nd}, {Nm}) float64 {name}: {t:.3f} ms, {fb / (t * 1e-3) / bw:.1%} of copy bw "
              f"over F̂ ({fb / 1e9:.2f} GB), err {err:.1e}", flush=True)
    res["cases"][f"{Nt}x{Nd}x{Nm}"] = case
    del op, fhat, m, d
    _cuda.clear_plan_cache()
    torch.cuda.empty_cache()
with open(f"{out}/toeplitz_f64.json", "w") as fh:
    json.dump(res, fh, indent=1)
