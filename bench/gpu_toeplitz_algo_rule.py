"""The toeplitz product rule on the GPU, side by side in one process (float32, R = 1, time-major):
matvec and rmatvec with cuBLAS (algo 0) against the own kernels (algo 2) and the automatic choice
(-1), complex64 F̂, and the 16-bit F̂ (bfloat16 pairs, own kernels) at each shape, all with events
(back_to_back_ms: GPU time per call). Shapes: the rule's (1000, 100, 5000), square even and odd,
few columns, few rows. One JSON line per shape; NOTES: bench/NOTES-toeplitz-precision.md.
    python bench/gpu_toeplitz_algo_rule.py [OUT.jsonl]
"""
import json
import sys

import torch

from strux import _cuda, _cuda_toeplitz
from strux.bench.gpu import copy_bandwidth
from strux.bench.timing import back_to_back_ms

SHAPES = [(1000, 100, 5000), (500, 1024, 1024), (1000, 1767, 1767), (1000, 2499, 64), (1000, 64, 2499),
          (200, 4096, 512), (1000, 100, 4999)]
out = open(sys.argv[1], "w") if len(sys.argv) > 1 else None
bw = copy_bandwidth()
print(f"copy bandwidth {bw / 1e12:.3f} TB/s ({torch.cuda.get_device_name()})", flush=True)
for Nt, Nd, Nm in SHAPES:
    torch.manual_seed(0)
    blocks = torch.randn(Nt, Nd, Nm, device="cuda") / (Nm * Nt) ** 0.5
    m, d = torch.randn(Nt, Nm, device="cuda"), torch.randn(Nt, Nd, device="cuda")
    row = {"shape": [Nt, Nd, Nm]}
    ref = None
    for name, kw in (("c64 auto", {}), ("c64 algo0", {"algo": 0}), ("c64 algo2", {"algo": 2}),
                     ("bf16", {"precision": {"fhat": "bfloat16"}})):
        try:
            op = _cuda_toeplitz.BlockToeplitzCUDA(blocks, **kw)
        except TypeError as e:  # an option this build does not take
            row[name] = str(e)
            continue
        fb = op.fhat.numel() * op.fhat.element_size()
        ym, yd = op.matvec(m), op.rmatvec(d)
        if ref is None:
            ref = (ym.double(), yd.double())
        err = max(float((ym.double() - ref[0]).norm() / ref[0].norm()), float((yd.double() - ref[1]).norm() / ref[1].norm()))
        tm = back_to_back_ms(lambda: op.matvec(m))
        ta = back_to_back_ms(lambda: op.rmatvec(d))
        row[name] = {"matvec_ms": tm, "rmatvec_ms": ta, "fhat_GB": fb / 1e9, "err_vs_c64auto": err,
                     "matvec_of_copy": fb / (tm * 1e-3) / bw, "rmatvec_of_copy": fb / (ta * 1e-3) / bw,
                     "algo": [op._plan(1).algo, op._plan(1).rmatvec_algo]}
        del op
        _cuda.clear_plan_cache()
        torch.cuda.empty_cache()
    base = row.get("c64 auto")
    if isinstance(base, dict) and isinstance(row.get("bf16"), dict):
        row["bf16_speedup"] = [base["matvec_ms"] / row["bf16"]["matvec_ms"], base["rmatvec_ms"] / row["bf16"]["rmatvec_ms"]]
    print(json.dumps(row), flush=True)
    if out:
        out.write(json.dumps(row) + "\n")
    del blocks
    torch.cuda.empty_cache()
