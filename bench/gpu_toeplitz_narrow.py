"""Issue 13's narrow shapes: whole toeplitz calls, complex64 F̂ (automatic product) against bfloat16
F̂, matvec and rmatvec, float32, R = 1, time-major, in one process (GPU ms per call, back to back),
and at the narrow shapes each call's CUDA kernels (torch.profiler: device us per call), so the
transforms' share S = whole − product can be read off. NOTES: bench/NOTES-toeplitz-precision.md
#narrow-shapes.
    python bench/gpu_toeplitz_narrow.py [OUT.jsonl]
"""
import json
import sys

import torch

from strux import _cuda, _cuda_toeplitz
from strux.bench.gpu import copy_bandwidth
from strux.bench.timing import back_to_back_ms, kernel_us

# The narrow shapes first (a time limit then cuts the square ones), each row printed and written as
# soon as it is measured.
SHAPES = [(1000, 100, 5000), (1000, 64, 2499), (1000, 2499, 64), (1000, 100, 4999), (500, 1024, 1024),
          (200, 4096, 512), (1000, 1767, 1767)]
NARROW = {(1000, 100, 5000), (1000, 64, 2499), (1000, 2499, 64)}
CONFIGS = (("c64", {}), ("bf16", {"precision": {"fhat": "bfloat16"}}))


def short(name):
    """A kernel's name without namespaces and template arguments, for the one-line table."""
    n = name.replace("(anonymous namespace)::", "").split("<")[0].split("(")[0]
    return n.split("::")[-1].split(" ")[-1][:26]


def kernel_lines(row):
    """Per-kernel lines of a narrow shape: the product (the largest kernel) and the rest, S."""
    for name, _ in CONFIGS:
        for dname in ("matvec", "rmatvec"):
            ks = row[name].get(dname + "_kernels_us")
            if not isinstance(ks, list) or not ks:
                continue
            whole = row[name][dname + "_ms"] * 1e3
            rest = sum(k[2] for k in ks[1:])
            parts = ", ".join(f"{short(k[0])} {k[2]:.1f}" for k in ks[1:8])
            print(f"    {name} {dname} (us): whole {whole:.1f}, product {ks[0][2]:.1f}, S kernels {rest:.1f} "
                  f"({sum(k[1] for k in ks) - ks[0][1]:.0f} launches), gaps {whole - ks[0][2] - rest:.1f} | {parts}",
                  flush=True)


bw = copy_bandwidth()
print(f"copy bandwidth {bw / 1e12:.3f} TB/s ({torch.cuda.get_device_name()})", flush=True)
out = open(sys.argv[1], "w") if len(sys.argv) > 1 else None
print("| (Nt, Nd, Nm) | complex64 m / r ms | bfloat16 m / r ms | speedup m / r | bf16 err vs c64 |", flush=True)
for Nt, Nd, Nm in SHAPES:
    torch.manual_seed(0)
    blocks = torch.randn(Nt, Nd, Nm, device="cuda") / (Nm * Nt) ** 0.5
    m, d = torch.randn(Nt, Nm, device="cuda"), torch.randn(Nt, Nd, device="cuda")
    row = {"shape": [Nt, Nd, Nm], "copy_bandwidth": bw, "device": torch.cuda.get_device_name()}
    ref = None
    for name, kw in CONFIGS:
        op = _cuda_toeplitz.BlockToeplitzCUDA(blocks, **kw)
        fb = op.fhat.numel() * op.fhat.element_size()
        ym, yd = op.matvec(m), op.rmatvec(d)
        if ref is None:
            ref = (ym.double(), yd.double())
        err = max(float((ym.double() - ref[0]).norm() / ref[0].norm()),
                  float((yd.double() - ref[1]).norm() / ref[1].norm()))
        tm, ta = back_to_back_ms(lambda: op.matvec(m)), back_to_back_ms(lambda: op.rmatvec(d))
        r = {"matvec_ms": tm, "rmatvec_ms": ta, "fhat_GB": fb / 1e9, "err_vs_c64": err,
             "matvec_of_copy": fb / (tm * 1e-3) / bw, "rmatvec_of_copy": fb / (ta * 1e-3) / bw,
             "algo": [op._plan(1).algo, op._plan(1).rmatvec_algo], "describe": op.describe(1)}
        if (Nt, Nd, Nm) in NARROW:
            for dname, fn in (("matvec", lambda: op.matvec(m)), ("rmatvec", lambda: op.rmatvec(d))):
                try:
                    r[dname + "_kernels_us"] = kernel_us(fn, calls=10, width=120)
                except Exception as e:  # noqa: BLE001  (no profiler: the timings above stand)
                    r[dname + "_kernels_us"] = str(e)
        row[name] = r
        del op
        _cuda.clear_plan_cache()
        torch.cuda.empty_cache()
    c, b = row["c64"], row["bf16"]
    row["bf16_speedup"] = [c["matvec_ms"] / b["matvec_ms"], c["rmatvec_ms"] / b["rmatvec_ms"]]
    print(f"| {Nt}, {Nd}, {Nm} | {c['matvec_ms']:.3f} / {c['rmatvec_ms']:.3f} | {b['matvec_ms']:.3f} / "
          f"{b['rmatvec_ms']:.3f} | {row['bf16_speedup'][0]:.2f} / {row['bf16_speedup'][1]:.2f} | {b['err_vs_c64']:.2e} |",
          flush=True)
    if (Nt, Nd, Nm) in NARROW:
        kernel_lines(row)
    if out:
        out.write(json.dumps(row) + "\n")
        out.flush()
    del blocks
    torch.cuda.empty_cache()
