"""Host overhead of one small GPU call with a cached plan, per family (issue 9's bound: 10 us).

fftconv B=1 H=1 L=256, ks (1,16,16,1) batch 8, diag_scan (1,16,8); float32 torch tensors, through
the public functions and strux.torch, with torch.add on the same tensor as the floor of any
framework call. Then the pieces of one strux.fftconv call, each timed alone the same way (the
argument checks, the output allocation, the current-stream query, the native entry with
pointers prepared beforehand), to show where the microseconds go.

Host time: time.perf_counter over calls queued behind a GPU sleep (strux.bench.timing.host_us),
so nothing waits on the GPU.
Run: python bench/gpu_host.py [--out DIR] (PYTHONPATH=python, as scripts/gpu_build.sh sets)
"""
from __future__ import annotations

import argparse
import json
import os

import torch

from strux.bench.timing import host_us


def small_cases():
    """Host microseconds of one small call per family (cached plans, float32 torch tensors)."""
    import strux
    import strux.torch as ST
    u, k = torch.randn(1, 1, 256, device="cuda"), torch.randn(1, 256, device="cuda")
    p = (1, 16, 16, 1)
    x, w = torch.randn(8, 16, device="cuda"), torch.randn(*p, device="cuda")
    a, b = torch.rand(1, 16, 8, device="cuda"), torch.randn(1, 16, 8, device="cuda")
    fns = {
        "torch.add (floor)": lambda: torch.add(u, u),
        "strux.fftconv (1,1,256)": lambda: strux.fftconv(u, k),
        "strux.torch.fftconv (1,1,256)": lambda: ST.fftconv(u, k),
        "strux.ks_matmul (1,16,16,1) batch 8": lambda: strux.ks_matmul(x, w, p),
        "strux.torch.ks_matmul (1,16,16,1) batch 8": lambda: ST.ks_matmul(x, w, p),
        "strux.diag_scan (1,16,8)": lambda: strux.diag_scan(a, b),
        "strux.torch.diag_scan (1,16,8)": lambda: ST.diag_scan(a, b),
    }
    with torch.no_grad():
        return {k_: {"host_us": host_us(f)} for k_, f in fns.items()}


def fftconv_pieces():
    """Host microseconds of each step of strux.fftconv (1,1,256) float32, alone."""
    from strux import _cuda as D
    from strux import _cuda_fftconv as F
    u, k = torch.randn(1, 1, 256, device="cuda"), torch.randn(1, 256, device="cuda")
    r = F._fast(u, k, "causal", None, None, None)
    y = u.new_empty(u.shape)
    up, kp, yp, s = u.data_ptr(), k.data_ptr(), y.data_ptr(), D._torch_stream(0)
    fns = {
        "checks (_fast)": lambda: F._fast(u, k, "causal", None, None, None),
        "output (new_empty)": lambda: u.new_empty(u.shape),
        "output (torch.empty_like)": lambda: torch.empty_like(u),
        "output (torch.empty with dtype and device)": lambda: torch.empty((1, 1, 256), dtype=u.dtype, device=u.device),
        "stream query": lambda: D._torch_stream(0),
        "data_ptr x3": lambda: (u.data_ptr(), k.data_ptr(), y.data_ptr()),
        "native entry (plan lookup + launch)": lambda: F._FORWARD(up, kp, 0, 0, 0, yp, *r, F.fftconv_algo, s),
        "whole call": lambda: F.fftconv(u, k),
    }
    return {k_: {"host_us": host_us(f)} for k_, f in fns.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    res = {"device": torch.cuda.get_device_name(), "small": small_cases(), "fftconv_pieces": fftconv_pieces()}
    for part in ("small", "fftconv_pieces"):
        for name, v in res[part].items():
            print(f"{part:15s} {name:45s} {v['host_us']:7.2f} us", flush=True)
    with open(os.path.join(args.out, "gpu_host.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
