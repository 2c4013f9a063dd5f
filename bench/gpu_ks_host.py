"""Host overhead per call of the GPU paths (scripts/gpu_focus.sh ks host).

Small calls with cached plans, one per family (fftconv B=1 H=1 L=256, ks (1,16,16,1) batch 8,
diag_scan (1,16,8); float32 torch tensors), through the public functions and strux.torch: the
host microseconds per call (the spine's bound: 10 us). Then, for float32 batch 25088 patterns
(6,64,64,1) and (16,64,64,1), both layouts, and each entry (strux.ks_matmul,
strux._cuda_ks.ks_matmul, strux.torch.ks_matmul, the registered op torch.ops.strux.ks_matmul,
the full checks (_checked + one checked factor), the native entry alone, and the bmm recipe
of strux.bench.gpu_ks_scan):
  - per call: CUDA events around one call (host time before the launch + GPU time), median;
  - back to back: 20 calls between two events (GPU time when the host keeps ahead), median;
  - host: time.perf_counter over 100 calls queued behind a GPU sleep (nothing waits on the
    GPU, so this is the host's own cost per call), median of 9, in microseconds.
Then the same three for forward + backward (torch.autograd.grad) of strux.torch.ks_matmul vs
the registered op vs bmm, and for KSLinear (two (6,64,64,1) factors) and the chain entries.

Run: python bench/gpu_ks_host.py --out DIR (PYTHONPATH=python, as scripts/gpu_build.sh sets)
"""
from __future__ import annotations

import argparse
import json
import os

import torch

from strux.bench.gpu_ks_scan import bmm_operands, bmm_recipe
from strux.bench.timing import back_to_back_ms, host_us, time_ms

from gpu_host import small_cases  # bench/ is the script's directory, first on sys.path

BATCH = 25088
PATS = [(6, 64, 64, 1), (16, 64, 64, 1)]


def measure(fn):
    return {"per_call_ms": time_ms(fn, warm=5, reps=50)[0], "b2b_ms": back_to_back_ms(fn),
            "host_us": host_us(fn)}


def forward_cases():
    import strux
    from strux import _cuda_ks as K
    from strux import _ext
    from strux.torch import _ks as T
    out = {}
    for p in PATS:
        a, b, c, d = p
        w = torch.randn(*p, device="cuda") / c ** 0.5
        wl, wf = bmm_operands(w, p)
        for layout in ("bsf", "bsl"):
            bl = layout == "bsl"
            x = torch.randn(a * c * d, BATCH, device="cuda") if bl else torch.randn(BATCH, a * c * d, device="cuda")
            y = K.ks_matmul(x, w, p, layout=layout)
            ref = bmm_recipe(x, wl, wf, p, layout)
            err = ((y - ref).norm() / ref.norm()).item()
            xp, wp, yp = x.data_ptr(), w.data_ptr(), y.data_ptr()
            fns = {
                "strux.ks_matmul": lambda: strux.ks_matmul(x, w, p, layout=layout),
                "_cuda_ks.ks_matmul": lambda: K.ks_matmul(x, w, p, layout=layout),
                "strux.torch.ks_matmul": lambda: T.ks_matmul(x, w, p, layout=layout),
                "op strux::ks_matmul": lambda: torch.ops.strux.ks_matmul(x, w, list(p), bl),
                "full checks": lambda: K._ks_fwd(*K._checked(x, w, p, layout)[:4]),
                "native entry only": lambda: _ext.cuda_ks_forward(
                    xp, wp, yp, a, b, c, d, BATCH, bl, 0, 0, 0, torch._C._cuda_getCurrentRawStream(0)),
                "bmm_f32": lambda: bmm_recipe(x, wl, wf, p, layout),
                "part: cheap checks (ks_ok)": lambda: K.ks_ok(x, w, p, bl),
                "part: output new_empty": lambda: x.new_empty(y.shape),
            }
            out[f"{p} {layout}"] = {"err_vs_bmm": err, **{k: measure(f) for k, f in fns.items()}}
    return out


def grad_cases():
    """Forward + backward (dx and dw) through autograd."""
    from strux import _cuda_ks as K
    from strux.torch import _ks as T
    out = {}
    for p in PATS[:1]:
        a, b, c, d = p
        for layout in ("bsf", "bsl"):
            bl = layout == "bsl"
            w = (torch.randn(*p, device="cuda") / c ** 0.5).requires_grad_()
            x = (torch.randn(a * c * d, BATCH, device="cuda") if bl else
                 torch.randn(BATCH, a * c * d, device="cuda")).requires_grad_()
            dy = torch.randn(a * b * d, BATCH, device="cuda") if bl else torch.randn(BATCH, a * b * d, device="cuda")
            wl, wf = (t.requires_grad_() for t in bmm_operands(w.detach(), p))
            g1 = torch.autograd.grad(T.ks_matmul(x, w, p, layout=layout), [x, w], dy)
            g2 = torch.autograd.grad(T._ks_matmul(x, w, list(p), bl), [x, w], dy)
            same = max(((u - v).norm() / v.norm()).item() for u, v in zip(g1, g2))
            fns = {
                "strux.torch.ks_matmul fwd+bwd": lambda: torch.autograd.grad(
                    T.ks_matmul(x, w, p, layout=layout), [x, w], dy),
                "op strux::ks_matmul fwd+bwd": lambda: torch.autograd.grad(
                    T._ks_matmul(x, w, list(p), bl), [x, w], dy),
                "_cuda_ks.ks_matmul_vjp": lambda: K.ks_matmul_vjp(dy, x.detach(), w.detach(), p, layout=layout),
                "bmm_f32 fwd+bwd": lambda: torch.autograd.grad(
                    bmm_recipe(x, wl if bl else None, None if bl else wf, p, layout), [x, wl if bl else wf], dy),
            }
            out[f"{p} {layout}"] = {"grad_rel_diff_lean_vs_op": same, **{k: measure(f) for k, f in fns.items()}}
    return out


def chain_cases():
    """KSLinear with two (6,64,64,1) factors (no bias) and the chain entries, batch-first."""
    from strux import _cuda_ks as K
    from strux.torch import _ks as T
    ps = [(6, 64, 64, 1), (6, 64, 64, 1)]
    m = T.KSLinear(ps, bias=False).cuda()
    ws = [w.detach() for w in m.weights]
    flat = [v for p in ps for v in p]
    x = torch.randn(BATCH, 384, device="cuda")
    xg = x.clone().requires_grad_()
    dy = torch.randn(BATCH, 384, device="cuda")
    lin = torch.nn.Linear(384, 384, bias=False).cuda()
    params = list(m.parameters())
    fns = {
        "_cuda_ks.ks_chain": lambda: K.ks_chain(x, ws, ps),
        "_cuda_ks.ks_chain_vjp": lambda: K.ks_chain_vjp(dy, x, ws, ps),
        "KSLinear no grad": lambda: m(x),
        "op strux::ks_chain no grad": lambda: torch.ops.strux.ks_chain(x, ws, flat, False),
        "KSLinear fwd+bwd": lambda: torch.autograd.grad(m(xg), [xg] + params, dy),
        "op strux::ks_chain fwd+bwd": lambda: torch.autograd.grad(
            T._ks_chain(xg, list(m.weights), flat, False), [xg] + params, dy),
        "nn.Linear(384, 384) no grad": lambda: lin(x),
    }
    with torch.no_grad():
        res = {k: measure(f) for k, f in fns.items() if "fwd+bwd" not in k}
    res.update({k: measure(f) for k, f in fns.items() if "fwd+bwd" in k})
    return {"KSLinear [(6,64,64,1)]*2 bsf": res}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    torch.manual_seed(0)
    from strux.torch import _ks as T
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"torch eager fast path {'on' if T._LEAN else 'OFF'}", flush=True)
    small = small_cases()
    print("small calls, host us per call (bound 10): " +
          ", ".join(f"{k} {v['host_us']:.1f}" for k, v in small.items()), flush=True)
    with torch.no_grad():
        fwd = forward_cases()
    res = {"small": small, "forward": fwd, "grad": grad_cases(), "chain": chain_cases()}
    lines = []
    for group, cases in res.items():
        for case, row in cases.items():
            lines.append(f"{group} {case}" + "".join(f" {k}={v:.1e}" for k, v in row.items() if not isinstance(v, dict)))
            lines.append("  entry | per call ms | back to back ms | host us")
            for k, v in row.items():
                if isinstance(v, dict):
                    lines.append(f"  {k} | {v['per_call_ms']:.4f} | {v['b2b_ms']:.4f} | {v['host_us']:.1f}")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "gpu_ks_host.json"), "w") as fh:
        json.dump(res, fh, indent=1)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
