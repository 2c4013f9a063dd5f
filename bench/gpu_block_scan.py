"""GPU timing of block_circulant_scan forward and backward against the PyTorch time loop.

Run: python bench/gpu_block_scan.py --out DIR (scripts/gpu_focus.sh block-scan). For each shape:
the native forward and backward with the plan's own kernels and each forced family (options path
"registers": register kernels in one chunk, "generic": the any-p shared-memory kernels), the
strux.torch op through autograd, and in the same process the PyTorch time loop (the op's
reference path, which was strux.torch's block_circulant_scan before the native backward) forward
and forward + backward through autograd. Float32, timed by strux.bench.timing (CUDA events, warm-up, medians). Writes
DIR/gpu_block_scan.json.
"""
from __future__ import annotations

import argparse
import json
import os

import torch

from strux import _cuda_scan as K
from strux.torch import _scan as TS
from strux.bench.timing import copy_bandwidth, median_ms


def traffic(B, T, p, k, chunked):
    """Bytes of the minimal formulation (read a, u [, dh], write h [or da, du]) and of the
    pipeline as built (each FFT reads and writes its arrays; the recurrences read spectra of A
    and the state-like arrays once per pass, chunked passes twice)."""
    kf = k // 2 + 1
    na, nu = B * T * p * p * k, B * T * p * k          # real elements
    sa, su = B * T * p * p * kf * 8, B * T * p * kf * 8  # spectrum bytes
    passes = 2 if chunked else 1
    fwd_min = 4 * (na + 2 * nu)
    bwd_min = 4 * (2 * na + 3 * nu)
    fwd = (4 * na + sa) + (4 * nu + su) + passes * (sa + su) + su + (su + 4 * nu)
    bwd = ((4 * na + sa) + 2 * (4 * nu + su) + passes * (sa + su) + su
           + passes * (sa + 2 * su) + (sa + su) + (sa + 4 * na) + (su + 4 * nu))
    return dict(fwd_min=fwd_min, bwd_min=bwd_min, fwd_pipe=fwd, bwd_pipe=bwd)


def case(B, T, p, k, bw, loops=True):
    torch.manual_seed(0)
    a = torch.randn(B, T, p, p, k, device="cuda") * (0.8 / (p * k))
    u = torch.randn(B, T, p * k, device="cuda")
    dh = torch.randn_like(u)
    row = dict(shape=(B, T, p, k))
    for path in ("", "seq", "generic"):
        opts = {"path": "registers" if path == "seq" else path} if path else None
        name = path or "auto"
        if path == "":
            row["plan"] = K.block_circulant_scan_path(B, T, p, k)
        if path == "seq" and p > 4:  # the register kernels exist for p <= 4
            continue
        row[f"fwd_{name}"] = median_ms(lambda: K.block_circulant_scan(a, u, options=opts))
        row[f"bwd_{name}"] = median_ms(lambda: K.block_circulant_scan_vjp(dh, a, u, options=opts))
    # agreement of the three families (float32 vs float32)
    ref = K.block_circulant_scan(a, u)
    row["rfft_a"] = median_ms(lambda: torch.fft.rfft(a, dim=-1))
    ag, ug = a.clone().requires_grad_(), u.clone().requires_grad_()

    def op_fwd_bwd():
        torch.autograd.grad(TS.block_circulant_scan(ag, ug), [ag, ug], dh)
    try:
        row["op_fwd_bwd"] = median_ms(op_fwd_bwd)
    except RuntimeError as e:  # keep the other numbers of the run
        row["op_error"] = str(e)[-200:]
        print("op_fwd_bwd failed:", row["op_error"], flush=True)
    if loops:
        loop = lambda: TS._ref_block_scan(a, u, None)
        row["loop_fwd"] = median_ms(loop, reps=3, warm=1)
        row["loop_err"] = float((loop() - ref).norm() / ref.norm())

        def loop_fwd_bwd():
            torch.autograd.grad(TS._ref_block_scan(ag, ug, None), [ag, ug], dh)
        row["loop_fwd_bwd"] = median_ms(loop_fwd_bwd, reps=3, warm=1)
        row["loop_bwd"] = row["loop_fwd_bwd"] - row["loop_fwd"]
        da, du, _ = K.block_circulant_scan_vjp(dh, a, u)
        lda, ldu = torch.autograd.grad(TS._ref_block_scan(ag, ug, None), [ag, ug], dh)
        row["loop_grad_err"] = max(float((da - lda).norm() / lda.norm()), float((du - ldu).norm() / ldu.norm()))
    tr = traffic(B, T, p, k, row["plan"][1] < T)
    row["traffic"] = tr
    row["fwd_pct_copy_min"] = 100 * tr["fwd_min"] / (row["fwd_auto"] * 1e-3) / bw
    row["fwd_pct_copy_pipe"] = 100 * tr["fwd_pipe"] / (row["fwd_auto"] * 1e-3) / bw
    row["bwd_pct_copy_pipe"] = 100 * tr["bwd_pipe"] / (row["bwd_auto"] * 1e-3) / bw
    keys = [k_ for k_ in row if isinstance(row[k_], float)]
    print(f"{row['shape']} plan {row['plan']}: " + ", ".join(f"{k_} {row[k_]:.4g}" for k_ in keys), flush=True)
    del a, u, dh, ag, ug
    torch.cuda.empty_cache()
    return row


def diagnose():
    """The torch op's backward (autograd's device thread) and the vjp from a plain Python thread,
    before any other FFT work in the process."""
    import threading
    from strux import _ext
    a = torch.randn(8, 1024, 4, 4, 64, device="cuda") * (0.8 / 256)
    u = torch.randn(8, 1024, 256, device="cuda")
    dh = torch.randn_like(u)
    out = {}
    try:
        ag, ug = a.clone().requires_grad_(), u.clone().requires_grad_()
        g = torch.autograd.grad(TS.block_circulant_scan(ag, ug), [ag, ug], dh)
        ref = K.block_circulant_scan_vjp(dh, a, u)
        out["op"] = max(float((x - r).norm() / r.norm()) for x, r in zip(g, ref[:2]))
    except RuntimeError as e:
        out["op"] = "error: " + str(e)[-160:]

    def in_thread():
        try:
            torch.cuda.synchronize()
            out["thread"] = float(K.block_circulant_scan_vjp(dh, a, u)[0].norm())
        except RuntimeError as e:
            out["thread"] = "error: " + str(e)[-160:]
    th = threading.Thread(target=in_thread)
    th.start()
    th.join()
    print("diagnose:", out, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    diagnose()
    bw = copy_bandwidth(1 << 29, reps=10)
    print(f"{torch.cuda.get_device_name()}: copy {bw / 1e12:.2f} TB/s", flush=True)
    res = dict(device=torch.cuda.get_device_name(), copy_bw=bw, rows=[])
    res["rows"].append(case(8, 1024, 4, 64, bw))
    res["rows"].append(case(64, 1024, 4, 64, bw, loops=False))
    res["rows"].append(case(8, 1024, 2, 256, bw, loops=False))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "gpu_block_scan.json"), "w") as f:
        json.dump(res, f, indent=1, default=str)


if __name__ == "__main__":
    main()
