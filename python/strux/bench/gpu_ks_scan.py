"""GPU benchmark of the CUDA ks and scan kernels against PyTorch baselines in the same process.

Run: python -m strux.bench.gpu_ks_scan --out DIR [--quick]. Measures the device's copy bandwidth
and fp32 matrix rate first (the ceilings), then times with CUDA events (warm-up, median of
repeats). Writes DIR/gpu_ks_scan.json and DIR/gpu_ks_scan.md and prints the table.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

from strux import _cuda_ks as K
from strux import _cuda_scan as S
from strux.bench.timing import copy_bandwidth, median_ms


def ceilings():
    bw = copy_bandwidth(1 << 29, reps=10)  # 2 GiB of float32
    m = 8192
    A, B = torch.randn(m, m, device="cuda"), torch.randn(m, m, device="cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    t = median_ms(lambda: A @ B, reps=5, warm=2)
    return bw, 2 * m ** 3 / (t * 1e-3)


def rel(x, ref):
    return ((x.double() - ref.double()).norm() / ref.double().norm()).item()


def bmm_recipe(x, wl, wf, p, layout):
    """The ks baseline: bmm with permutations. wf = w.permute(0, 3, 2, 1).reshape(a*d, c, b) for
    batch-first, wl = w.permute(0, 3, 1, 2).reshape(a*d, b, c) for batch-last (the other may be
    None)."""
    a, b, c, d = p
    if layout == "bsf":
        batch = x.shape[0]
        xp = x.view(batch, a, c, d).permute(1, 3, 0, 2).reshape(a * d, batch, c)
        return torch.bmm(xp, wf).view(a, d, batch, b).permute(2, 0, 3, 1).reshape(batch, a * b * d)
    batch = x.shape[1]
    xp = x.view(a, c, d, batch).permute(0, 2, 1, 3).reshape(a * d, c, batch)
    return torch.bmm(wl, xp).view(a, d, b, batch).permute(0, 2, 1, 3).reshape(a * b * d, batch)


def bmm_operands(w, p, contiguous=True):
    """(wl, wf) of bmm_recipe from w (a, b, c, d) of pattern p: copies laid out for bmm, or with
    contiguous=False the permuted views (autograd then reaches w through them)."""
    a, b, c, d = p
    wl = w.permute(0, 3, 1, 2).reshape(a * d, b, c)
    wf = w.permute(0, 3, 2, 1).reshape(a * d, c, b)
    return (wl.contiguous(), wf.contiguous()) if contiguous else (wl, wf)


def ks_cases(bw, fl, batch, quick):
    pats = [(1, 48, 48, 16), (2, 96, 384, 4), (2, 192, 48, 4), (1, 768, 768, 1), (6, 64, 64, 1),
            (1, 768, 192, 2), (4, 64, 64, 4), (1, 256, 256, 4), (4, 96, 96, 2), (16, 64, 64, 1)]
    if quick:
        pats = pats[:3]
    rows = []
    for p in pats:
        a, b, c, d = p
        N, M = a * c * d, a * b * d
        w = torch.randn(*p, device="cuda") / math.sqrt(c)
        Kd = torch.zeros(M, N, device="cuda")
        ii, kk, ll, jj = torch.meshgrid(*[torch.arange(s, device="cuda") for s in p], indexing="ij")
        Kd[ii * b * d + kk * d + jj, ii * c * d + ll * d + jj] = w
        wl, wf = bmm_operands(w, p)
        for layout in ("bsf", "bsl"):
            x = torch.randn(batch, N, device="cuda") if layout == "bsf" else torch.randn(N, batch, device="cuda")
            bmm = lambda: bmm_recipe(x, wl, wf, p, layout)
            dense = (lambda: F.linear(x, Kd)) if layout == "bsf" else (lambda: Kd @ x)
            ours = lambda: K.ks_matmul(x, w, p, layout=layout)
            err = rel(ours(), dense())
            t_ours, t_bmm, t_dense = median_ms(ours), median_ms(bmm), median_ms(dense)
            by = 4 * batch * (N + M) + 4 * w.numel()
            flops = 2.0 * batch * a * b * c * d
            floor = max(by / bw, flops / fl) * 1e3
            dy = torch.randn(batch, M, device="cuda") if layout == "bsf" else torch.randn(M, batch, device="cuda")
            t_bwd = median_ms(lambda: K.ks_matmul_vjp(dy, x, w, p, layout=layout), reps=10)
            rows.append(dict(op="ks", pattern=p, layout=layout, batch=batch, dtype="float32",
                             ms=t_ours, bmm_ms=t_bmm, dense_ms=t_dense, bwd_ms=t_bwd, floor_ms=floor,
                             bytes=by, flops=flops, rel_err_vs_dense=err,
                             speedup_vs_bmm=t_bmm / t_ours, speedup_vs_dense=t_dense / t_ours,
                             frac_of_floor=floor / t_ours))
            print(f"ks {p} {layout}: ours {t_ours:.3f} ms, bmm {t_bmm:.3f}, dense {t_dense:.3f}, "
                  f"floor {floor:.3f}, bwd {t_bwd:.3f}, err {err:.1e}", flush=True)
        del Kd, x
    # half types on two patterns (batch-size-last), for the record
    for p in pats[:2]:
        for dt in (torch.bfloat16, torch.float16):
            a, b, c, d = p
            N, M = a * c * d, a * b * d
            w = (torch.randn(*p, device="cuda") / math.sqrt(c)).to(dt)
            x = torch.randn(N, batch, device="cuda").to(dt)
            t = median_ms(lambda: K.ks_matmul(x, w, p, layout="bsl"))
            by = 2 * batch * (N + M)
            rows.append(dict(op="ks", pattern=p, layout="bsl", batch=batch, dtype=str(dt)[6:], ms=t,
                             floor_ms=max(by / bw, 2.0 * batch * a * b * c * d / fl) * 1e3, bytes=by))
            print(f"ks {p} bsl {dt}: {t:.3f} ms", flush=True)
    return rows


def logcumsum_scan(a, b):
    la = torch.cumsum(torch.log(a), dim=1)
    return torch.exp(la) * torch.cumsum(b * torch.exp(-la), dim=1)


def loop_scan(a, b):
    h = torch.zeros_like(b[:, 0])
    out = torch.empty_like(b)
    for t in range(a.shape[1]):
        h = a[:, t] * h + b[:, t]
        out[:, t] = h
    return out


def scan_cases(bw, quick):
    rows = []
    B, T, n = (16, 2048, 4096) if not quick else (4, 2048, 1024)
    mag = 0.9 + 0.1 * torch.rand(B, T, n, device="cuda")
    a = torch.polar(mag, torch.rand_like(mag))
    del mag
    b = torch.randn(B, T, n, device="cuda", dtype=torch.complex64)
    el = B * T * n
    h = S.diag_scan(a, b)
    ref = loop_scan(a.to(torch.complex128), b.to(torch.complex128)) if quick else None
    err = rel(torch.view_as_real(h), torch.view_as_real(ref)) if ref is not None else float("nan")
    del ref
    t_f = median_ms(lambda: S.diag_scan(a, b), reps=20)
    dh = torch.randn_like(b)
    t_b = median_ms(lambda: S._diag_bwd(dh, a, h, None), reps=20)
    t_log = median_ms(lambda: logcumsum_scan(a, b), reps=5)
    t_loop = median_ms(lambda: loop_scan(a, b), reps=2, warm=1)
    fb, bb = 3 * 8 * el, 5 * 8 * el
    rows.append(dict(op="diag_scan fwd", shape=(B, T, n), dtype="complex64", ms=t_f, bytes=fb,
                     floor_ms=fb / bw * 1e3, frac_of_copy_bw=fb / bw * 1e3 / t_f,
                     logcumsum_ms=t_log, loop_ms=t_loop, rel_err_vs_c128_loop=err))
    rows.append(dict(op="diag_scan bwd", shape=(B, T, n), dtype="complex64", ms=t_b, bytes=bb,
                     floor_ms=bb / bw * 1e3, frac_of_copy_bw=bb / bw * 1e3 / t_b))
    print(f"diag_scan c64 {B,T,n}: fwd {t_f:.3f} ms ({fb / bw * 1e3 / t_f:.0%} of copy bw), bwd {t_b:.3f} ms "
          f"({bb / bw * 1e3 / t_b:.0%}), logcumsum {t_log:.3f}, loop {t_loop:.3f}", flush=True)
    del a, b, h, dh
    # real float32 and bf16 forward, same shape
    for dt in (torch.float32, torch.bfloat16):
        a = (0.9 + 0.1 * torch.rand(B, T, n, device="cuda")).to(dt)
        b = torch.randn(B, T, n, device="cuda").to(dt)
        t = median_ms(lambda: S.diag_scan(a, b))
        by = 3 * a.element_size() * el
        rows.append(dict(op="diag_scan fwd", shape=(B, T, n), dtype=str(dt)[6:], ms=t, bytes=by,
                         floor_ms=by / bw * 1e3, frac_of_copy_bw=by / bw * 1e3 / t))
        print(f"diag_scan {dt} fwd {t:.3f} ms ({by / bw * 1e3 / t:.0%})", flush=True)
        del a, b
    # circulant: B=16, T=2048, n=256 float32 vs a float32 diag_scan moving the same bytes
    B, T, n = 16, 2048, 256
    a = torch.randn(B, T, n, device="cuda") * (0.9 / n)
    u = torch.randn(B, T, n, device="cuda")
    t_c = median_ms(lambda: S.circulant_scan(a, u))
    t_d = median_ms(lambda: S.diag_scan(a, u))

    def torch_recipe():
        A, U = torch.fft.rfft(a, dim=-1), torch.fft.rfft(u, dim=-1)
        return torch.fft.irfft(logcumsum_scan(A, U), n=n, dim=-1)
    t_tr = median_ms(torch_recipe)
    ar, ur = a[:2, :64].double().cpu(), u[:2, :64].double().cpu()
    idx = (torch.arange(n)[:, None] - torch.arange(n)[None, :]) % n
    hh = torch.zeros(2, n, dtype=torch.float64)
    for t in range(64):
        hh = (ar[:, t][:, idx] @ hh[..., None])[..., 0] + ur[:, t]
    err = rel(S.circulant_scan(a[:2, :64].contiguous(), u[:2, :64].contiguous())[:, -1].cpu(), hh)
    by = 3 * 4 * B * T * n
    rows.append(dict(op="circulant_scan fwd", shape=(B, T, n), dtype="float32", ms=t_c, bytes=by,
                     floor_ms=by / bw * 1e3, same_bytes_diag_scan_ms=t_d, ratio_to_diag=t_c / t_d,
                     torch_rfft_logcumsum_ms=t_tr, rel_err_vs_dense_f64=err))
    print(f"circulant_scan {B,T,n}: {t_c:.3f} ms, diag same bytes {t_d:.3f} ms (ratio {t_c / t_d:.2f}), "
          f"torch rfft+logcumsum {t_tr:.3f}, err {err:.1e}", flush=True)
    return rows


def diag_cases(bw, shapes=((16, 2048, 4096), (4, 8192, 4096), (64, 512, 4096)), options=None):
    """diag_scan forward and backward for each dtype at the given shapes (the plan's own kernel, or
    the one forced by options={"path": ...}), with the error of 64 channels against a complex128/float64 loop.
    Bytes: forward reads a, b and writes h; backward reads dh, a, h and writes da, db."""
    rows = []
    for B, T, n in shapes:
        for dt in ((torch.complex64, torch.float32, torch.bfloat16) if (B, T, n) == shapes[0] else (torch.complex64,)):
            mag = 0.9 + 0.1 * torch.rand(B, T, n, device="cuda")
            a = (torch.polar(mag, torch.rand_like(mag)) if dt == torch.complex64 else mag).to(dt)
            b = torch.randn(B, T, n, device="cuda", dtype=torch.complex64 if dt == torch.complex64 else torch.float32).to(dt)
            del mag
            h = S.diag_scan(a, b, options=options)
            wide = torch.complex128 if dt == torch.complex64 else torch.float64
            ref = loop_scan(a[:, :, :64].to(wide), b[:, :, :64].to(wide))
            err = rel(torch.view_as_real(h[:, :, :64].to(wide)), torch.view_as_real(ref)) if dt == torch.complex64 \
                else rel(h[:, :, :64], ref)
            dh = torch.randn_like(b)
            t_f = median_ms(lambda: S.diag_scan(a, b, options=options))
            algo = S._O.diag_scan_code(options)
            t_b = median_ms(lambda: S._diag_bwd(dh, a, h, None, algo))
            el, es = B * T * n, a.element_size()
            fb, bb = 3 * es * el, 5 * es * el
            for op, t, by in (("fwd", t_f, fb), ("bwd", t_b, bb)):
                rows.append(dict(op=f"diag_scan {op}", shape=(B, T, n), dtype=str(dt)[6:], ms=t, bytes=by,
                                 floor_ms=by / bw * 1e3, frac_of_copy_bw=by / bw * 1e3 / t, rel_err=err))
            print(f"diag_scan {str(dt)[6:]} {B, T, n}: fwd {t_f:.3f} ms ({fb / bw * 1e3 / t_f:.0%}), "
                  f"bwd {t_b:.3f} ms ({bb / bw * 1e3 / t_b:.0%}), err {err:.1e}", flush=True)
            del a, b, h, dh, ref
    return rows


def table(meta, rows):
    out = [f"# GPU ks/scan bench: {meta['device']}",
           f"copy bandwidth {meta['copy_bw'] / 1e12:.2f} TB/s, fp32 matmul {meta['fp32_flops'] / 1e12:.1f} TFLOP/s", "",
           "| op | case | dtype | ours ms | floor ms | % floor | baselines |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        case = f"{r.get('pattern', r.get('shape'))} {r.get('layout', '')}"
        base = ", ".join(f"{k[:-3]} {r[k]:.3f}" for k in r if k.endswith("_ms") and k not in ("ms", "floor_ms"))
        out.append(f"| {r['op']} | {case} | {r['dtype']} | {r['ms']:.3f} | {r['floor_ms']:.3f} | "
                   f"{100 * r['floor_ms'] / r['ms']:.0f}% | {base} |")
    return "\n".join(out)


def run(quick: bool = False, out: str | None = None, families=("ks", "scan")) -> dict:
    """The ks and/or scan GPU cases; writes gpu_ks_scan.json/.md under `out` when given."""
    torch.manual_seed(0)
    bw, fl = ceilings()
    meta = dict(device=torch.cuda.get_device_name(), copy_bw=bw, fp32_flops=fl, torch=torch.__version__)
    print(f"device {meta['device']}: copy {bw / 1e12:.2f} TB/s, fp32 {fl / 1e12:.1f} TFLOP/s", file=sys.stderr, flush=True)
    rows = []
    if "scan" in families:
        rows += scan_cases(bw, quick)
    if "ks" in families:
        rows += ks_cases(bw, fl, 25088 if not quick else 4096, quick)
    res = dict(meta=meta, rows=rows)
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "gpu_ks_scan.json"), "w") as f:
            json.dump(res, f, indent=1, default=str)
        with open(os.path.join(out, "gpu_ks_scan.md"), "w") as f:
            f.write(table(meta, rows) + "\n")
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    res = run(args.quick, args.out)
    print(table(res["meta"], res["rows"]))


if __name__ == "__main__":
    main()
