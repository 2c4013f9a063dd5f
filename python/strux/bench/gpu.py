"""GPU benchmark of strux's CUDA fftconv and block Toeplitz against the PyTorch recipes, in one
process: copy bandwidth first (the ceiling), then each case timed with CUDA events (warm-up,
median of repeats), with accuracy against float64. Writes JSON and a markdown table.

    python -m strux.bench.gpu --out DIR [--quick]
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import json
import os
import sys

import torch

from strux import _cuda, _cuda_toeplitz
from strux import _cuda_fftconv as _fc
from strux.bench import timing
from strux.bench.timing import time_ms


def rel(a, b):
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm())


def free():
    _cuda.clear_plan_cache()
    gc.collect()
    torch.cuda.empty_cache()


@contextlib.contextmanager
def fftconv_algo(algo):
    """fftconv plans made inside the block use plan algo `algo` (strux._cuda_fftconv.fftconv_algo,
    restored on the way out, exceptions included)."""
    old = _fc.fftconv_algo
    _fc.fftconv_algo = algo
    try:
        yield
    finally:
        _fc.fftconv_algo = old


def with_algo(algo, fn):
    """fn made to run under fftconv_algo(algo) on every call (plans are cached per algo)."""
    def call():
        with fftconv_algo(algo):
            return fn()
    return call


def copy_bandwidth():
    bw = timing.copy_bandwidth()
    free()
    return bw


def fftconv_cases(L_list, B, H, results):
    for L in L_list:
        u = torch.randn(B, H, L, device="cuda", dtype=torch.float16)
        k = (torch.randn(H, L, device="cuda") / L ** 0.5).half()
        dy = torch.randn(B, H, L, device="cuda", dtype=torch.float16)
        n = 2 * L

        def recipe(u, k):
            return torch.fft.irfft(torch.fft.rfft(u.float(), n=n) * torch.fft.rfft(k.float(), n=n), n=n)[..., :L].half()

        # accuracy on a few rows against float64
        y = _fc.fftconv(u, k)
        yr = recipe(u, k)
        u64, k64 = u[:2].double(), k.double()
        ref = torch.fft.irfft(torch.fft.rfft(u64, n=n) * torch.fft.rfft(k64, n=n), n=n)[..., :L]
        err_s, err_t = rel(y[:2], ref), rel(yr[:2], ref)
        du, dk = _fc.fftconv_vjp(dy, u, k)[:2]
        del y, yr, ref, u64
        t_s = time_ms(lambda: _fc.fftconv(u, k))
        fused = bool(_fc._fftconv_plan(u.device.index, B, H, L, L, "causal", "float16", False).fused)
        # the cuFFT path (algo 1) on the same inputs, for comparison
        y0 = _fc.fftconv(u, k)[:2].clone()
        free()
        try:
            with fftconv_algo(1):
                err_paths = rel(y0, _fc.fftconv(u, k)[:2])
                del y0
                t_c = time_ms(lambda: _fc.fftconv(u, k))
                free()
                t_cb = time_ms(lambda: _fc.fftconv_vjp(dy, u, k))
        finally:
            free()
        conv = _fc.FFTConvCUDA(k, B, L)
        t_obj = time_ms(lambda: conv(u))
        del conv
        free()
        t_t = time_ms(lambda: recipe(u, k))
        x32 = torch.empty(B, H, n, device="cuda")
        t_fft = time_ms(lambda: torch.fft.irfft(torch.fft.rfft(x32), n=n))  # cuFFT pair alone, fp32
        del x32
        free()
        # backward: strux vjp vs autograd of the recipe (backward only)
        free()
        t_sb = time_ms(lambda: _fc.fftconv_vjp(dy, u, k))
        free()
        ug, kg = u.clone().requires_grad_(True), k.clone().requires_grad_(True)
        yg = recipe(ug, kg)
        gu, gk = torch.autograd.grad(yg, (ug, kg), dy, retain_graph=True)
        err_du, err_dk = rel(du[:2], gu[:2]), rel(dk, gk)
        del du, dk, gu, gk
        t_tb = time_ms(lambda: torch.autograd.grad(yg, (ug, kg), dy, retain_graph=True))
        del yg, ug, kg
        free()
        floor_ms = 2 * u.numel() * 2 / results["copy_Bps"] * 1e3  # read u, write y (fp16)
        results["fftconv"].append(dict(
            B=B, H=H, L=L, dtype="float16", mode="causal",
            strux_fwd_ms=t_s[0], strux_fwd_cached_filter_ms=t_obj[0], torch_fwd_ms=t_t[0],
            speedup_fwd=t_t[0] / t_s[0], strux_bwd_ms=t_sb[0], torch_bwd_ms=t_tb[0], speedup_bwd=t_tb[0] / t_sb[0],
            hbm_floor_fwd_ms=floor_ms, cufft_pair_fp32_ms=t_fft[0], relerr_strux=err_s, relerr_torch=err_t,
            fused=fused, relerr_fused_vs_cufft=err_paths, strux_cufft_path_fwd_ms=t_c[0], strux_cufft_path_bwd_ms=t_cb[0],
            spread_bwd=[t_sb[1], t_sb[2]],
            relerr_du_vs_torch=err_du, relerr_dk_vs_torch=err_dk, spread_fwd=[t_s[1], t_s[2]]))
        print(f"fftconv L={L}: fused={fused} cuFFT path fwd {t_c[0]:.3f} bwd {t_cb[0]:.3f}", flush=True)
        print(f"fftconv L={L}: strux fwd {t_s[0]:.3f} ms (cached filter {t_obj[0]:.3f}), torch {t_t[0]:.3f} ms "
              f"-> {t_t[0] / t_s[0]:.2f}x; bwd strux {t_sb[0]:.3f} torch {t_tb[0]:.3f} -> {t_tb[0] / t_sb[0]:.2f}x; "
              f"err {err_s:.1e} vs torch {err_t:.1e}", flush=True)
        del u, k, dy
        free()


def toeplitz_recipes(fhat, Nt, Nd, Nm, nfft):
    """The PyTorch recipes the block Toeplitz is checked against, from its F̂ (nfreq, Nd, Nm):
    (matvec, rmatvec) of time-major x (Nt, n[, R]), each returning (Nt, n', R or 1)."""
    def recipe(x):
        X = torch.fft.rfft(x, n=nfft, dim=0)
        return torch.fft.irfft(torch.bmm(fhat, X.reshape(X.shape[0], Nm, -1)), n=nfft, dim=0)[:Nt]

    def recipe_adj(x):
        X = torch.fft.rfft(x, n=nfft, dim=0)
        return torch.fft.irfft(torch.bmm(fhat.conj().transpose(1, 2), X.reshape(X.shape[0], Nd, -1)),
                               n=nfft, dim=0)[:Nt]

    return recipe, recipe_adj


def toeplitz_cases(Nt, Nd, Nm, R, results):
    blocks = torch.randn(Nt, Nd, Nm, device="cuda")
    op = _cuda_toeplitz.BlockToeplitzCUDA(blocks)
    del blocks
    free()
    fhat = op.fhat
    nfft = _cuda_toeplitz.toeplitz_nfft(Nt)
    fbytes = fhat.numel() * fhat.element_size()
    bw = results["copy_Bps"]
    m = torch.randn(Nt, Nm, device="cuda")
    d = torch.randn(Nt, Nd, device="cuda")
    mR = torch.randn(Nt, Nm, R, device="cuda")
    dR = torch.randn(Nt, Nd, R, device="cuda")
    recipe, recipe_adj = toeplitz_recipes(fhat, Nt, Nd, Nm, nfft)

    row = dict(Nt=Nt, Nd=Nd, Nm=Nm, R=R, fhat_GB=fbytes / 1e9, fhat_floor_ms=fbytes / bw * 1e3)
    # accuracy: vs the torch recipe, adjoint dot product
    y = op.matvec(m)
    row["relerr_matvec_vs_torch"] = rel(y, recipe(m)[..., 0])
    x = op.rmatvec(d)
    row["relerr_rmatvec_vs_torch"] = rel(x, recipe_adj(d)[..., 0])
    row["adjoint_dot_relerr"] = abs(float((y.double() * d.double()).sum() - (m.double() * x.double()).sum())) / \
        float(y.double().norm() * d.double().norm())
    row["relerr_matvecR_vs_torch"] = rel(op.matvec(mR), recipe(mR))
    # What a user gets: the plan's own choice per direction and R (algo -1).
    op.algo = -1
    _cuda.clear_plan_cache()
    row["relerr_default_matvecR_vs_torch"] = rel(op.matvec(mR), recipe(mR))
    row["relerr_default_rmatvecR_vs_torch"] = rel(op.rmatvec(dR), recipe_adj(dR))
    dm = time_ms(lambda: op.matvec(m), reps=20)[0]
    dr = time_ms(lambda: op.rmatvec(d), reps=20)[0]
    dmR = time_ms(lambda: op.matvec(mR), reps=10)[0]
    drR = time_ms(lambda: op.rmatvec(dR), reps=10)[0]
    row.update(default_matvec_ms=dm, default_rmatvec_ms=dr, default_matvec_R_ms=dmR, default_rmatvec_R_ms=drR,
               default_matvec_bw_frac=fbytes / (dm * 1e-3) / bw, default_rmatvec_bw_frac=fbytes / (dr * 1e-3) / bw,
               default_matvec_R_per_rhs_over_single=dmR / R / dm, default_rmatvec_R_per_rhs_over_single=drR / R / dr)
    for algo in (0, 1, 2):
        op.algo = algo
        _cuda.clear_plan_cache()
        tm = time_ms(lambda: op.matvec(m), reps=20)[0]
        tr = time_ms(lambda: op.rmatvec(d), reps=20)[0]
        row[f"strux_matvec_ms_algo{algo}"] = tm
        row[f"strux_rmatvec_ms_algo{algo}"] = tr
        row[f"matvec_bw_frac_algo{algo}"] = fbytes / (tm * 1e-3) / bw
        row[f"rmatvec_bw_frac_algo{algo}"] = fbytes / (tr * 1e-3) / bw
    for algo in (0, 2):
        op.algo = algo
        _cuda.clear_plan_cache()
        if algo == 2:
            row["relerr_matvecR_algo2_vs_torch"] = rel(op.matvec(mR), recipe(mR))
            row["relerr_rmatvec_algo2_vs_torch"] = rel(op.rmatvec(d), recipe_adj(d)[..., 0])
        tmR = time_ms(lambda: op.matvec(mR), reps=10)[0]
        trR = time_ms(lambda: op.rmatvec(dR), reps=10)[0]
        sfx = "" if algo == 0 else "_algo2"
        best_m = min(row[f"strux_matvec_ms_algo{a}"] for a in (0, 1, 2))
        best_r = min(row[f"strux_rmatvec_ms_algo{a}"] for a in (0, 1, 2))
        row.update({f"strux_matvec_R_ms{sfx}": tmR, f"strux_rmatvec_R_ms{sfx}": trR,
                    f"matvec_R_per_rhs_over_single{sfx}": tmR / R / best_m,
                    f"rmatvec_R_per_rhs_over_single{sfx}": trR / R / best_r})
    op.algo = 0
    _cuda.clear_plan_cache()
    free()
    row["torch_matvec_ms"] = time_ms(lambda: recipe(m), reps=10)[0]
    free()
    row["torch_rmatvec_ms"] = time_ms(lambda: recipe_adj(d), reps=5)[0]
    free()
    row["torch_matvec_R_ms"] = time_ms(lambda: recipe(mR), reps=10)[0]
    row["torch_matvec_bw_frac"] = fbytes / (row["torch_matvec_ms"] * 1e-3) / bw
    row["torch_rmatvec_bw_frac"] = fbytes / (row["torch_rmatvec_ms"] * 1e-3) / bw
    results["toeplitz"].append(row)
    print("toeplitz", json.dumps(row), flush=True)
    del op, fhat, m, d, mR, dR
    free()


def markdown(res):
    lines = [f"# strux GPU benchmark — {res['device']}, {res['date']}", "",
             f"torch {res['torch']}, copy bandwidth {res['copy_Bps'] / 1e12:.2f} TB/s (read + write)", ""]
    if res["fftconv"]:
        lines += ["## fftconv, causal, float16 in/out, B=64, H=768 (ms, median)", "",
             "| L | path | strux fwd | strux fwd (cached K̂) | cuFFT path fwd | torch fwd | speedup | strux bwd | cuFFT path bwd | torch bwd | speedup | rel err strux / torch |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in res["fftconv"]:
        lines.append(f"| {r['L']} | {'fused' if r['fused'] else 'cuFFT'} | {r['strux_fwd_ms']:.3f} | {r['strux_fwd_cached_filter_ms']:.3f} | "
                     f"{r['strux_cufft_path_fwd_ms']:.3f} | {r['torch_fwd_ms']:.3f} | "
                     f"{r['speedup_fwd']:.2f}× | {r['strux_bwd_ms']:.3f} | {r['strux_cufft_path_bwd_ms']:.3f} | {r['torch_bwd_ms']:.3f} | {r['speedup_bwd']:.2f}× | "
                     f"{r['relerr_strux']:.1e} / {r['relerr_torch']:.1e} |")
    if res["fftconv"]:
        lines += ["", "errors: " + "; ".join(f"L={r['L']} fused vs cuFFT path {r.get('relerr_fused_vs_cufft', float('nan')):.1e}, "
                                       f"du {r['relerr_du_vs_torch']:.1e}, dk {r['relerr_dk_vs_torch']:.1e}"
                                       for r in res["fftconv"])]
    if res["toeplitz"]:
        lines += ["", "## toeplitz, complex64 F̂ (ms, median; fraction of copy bandwidth on F̂ bytes)", ""]
    for r in res["toeplitz"]:
        lines += [f"Nt={r['Nt']}, Nd={r['Nd']}, Nm={r['Nm']}: F̂ {r['fhat_GB']:.2f} GB, floor {r['fhat_floor_ms']:.3f} ms", "",
                  "**Default (the plan's own choice, what users get):** "
                  f"matvec {r['default_matvec_ms']:.3f} ms ({r['default_matvec_bw_frac']:.0%}), "
                  f"rmatvec {r['default_rmatvec_ms']:.3f} ms ({r['default_rmatvec_bw_frac']:.0%}), "
                  f"matvec R={r['R']} {r['default_matvec_R_ms']:.3f} ms (per RHS {r['default_matvec_R_per_rhs_over_single']:.3f} of a single), "
                  f"rmatvec R={r['R']} {r['default_rmatvec_R_ms']:.3f} ms (per RHS {r['default_rmatvec_R_per_rhs_over_single']:.3f}); "
                  f"errors vs torch R={r['R']}: {r['relerr_default_matvecR_vs_torch']:.1e} / {r['relerr_default_rmatvecR_vs_torch']:.1e}", "",
                  "Each product forced:", "",
                  "| op | strux cuBLAS gemv (algo 0) | strux cuBLAS gemm (algo 1) | strux own kernels (algo 2) | torch recipe |",
                  "|---|---|---|---|---|",
                  f"| matvec | {r['strux_matvec_ms_algo0']:.3f} ({r['matvec_bw_frac_algo0']:.0%}) | "
                  f"{r['strux_matvec_ms_algo1']:.3f} ({r['matvec_bw_frac_algo1']:.0%}) | "
                  f"{r['strux_matvec_ms_algo2']:.3f} ({r['matvec_bw_frac_algo2']:.0%}) | "
                  f"{r['torch_matvec_ms']:.3f} ({r['torch_matvec_bw_frac']:.0%}) |",
                  f"| rmatvec | {r['strux_rmatvec_ms_algo0']:.3f} ({r['rmatvec_bw_frac_algo0']:.0%}) | "
                  f"{r['strux_rmatvec_ms_algo1']:.3f} ({r['rmatvec_bw_frac_algo1']:.0%}) | "
                  f"{r['strux_rmatvec_ms_algo2']:.3f} ({r['rmatvec_bw_frac_algo2']:.0%}) | "
                  f"{r['torch_rmatvec_ms']:.3f} ({r['torch_rmatvec_bw_frac']:.0%}) |",
                  f"| matvec R={r['R']} (per RHS / best single) | {r['strux_matvec_R_ms']:.3f} ({r['matvec_R_per_rhs_over_single']:.3f}) | | "
                  f"{r['strux_matvec_R_ms_algo2']:.3f} ({r['matvec_R_per_rhs_over_single_algo2']:.3f}) | {r['torch_matvec_R_ms']:.3f} |",
                  f"| rmatvec R={r['R']} (per RHS / best single) | {r['strux_rmatvec_R_ms']:.3f} ({r['rmatvec_R_per_rhs_over_single']:.3f}) | | "
                  f"{r['strux_rmatvec_R_ms_algo2']:.3f} ({r['rmatvec_R_per_rhs_over_single_algo2']:.3f}) | |",
                  "", f"errors: matvec vs torch {r['relerr_matvec_vs_torch']:.1e}, rmatvec vs torch "
                  f"{r['relerr_rmatvec_vs_torch']:.1e}, adjoint dot test {r['adjoint_dot_relerr']:.1e}", ""]
    return "\n".join(lines) + "\n"


def run(quick: bool = False, out: str | None = None, only: str | None = None) -> dict:
    """All GPU cases; writes gpu_bench.json and gpu_bench.md under `out` when given."""
    torch.manual_seed(0)
    res = dict(device=torch.cuda.get_device_name(), date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
               torch=torch.__version__, fftconv=[], toeplitz=[])
    res["copy_Bps"] = copy_bandwidth()
    print(f"copy bandwidth {res['copy_Bps'] / 1e12:.2f} TB/s", file=sys.stderr, flush=True)
    try:
        if quick:
            fftconv_cases([1024], 4, 64, res)
            toeplitz_cases(100, 10, 500, 16, res)
        else:
            if only != "toeplitz":
                fftconv_cases([1024, 4096, 16384], 64, 768, res)
            if only != "fftconv":
                toeplitz_cases(1000, 100, 5000, 16, res)
    finally:
        if out:
            os.makedirs(out, exist_ok=True)
            with open(os.path.join(out, "gpu_bench.json"), "w") as f:
                json.dump(res, f, indent=1)
            with open(os.path.join(out, "gpu_bench.md"), "w") as f:
                f.write(markdown(res))
    return res


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    ap.add_argument("--only", choices=["fftconv", "toeplitz"], help="one family only")
    a = ap.parse_args(argv)
    print(markdown(run(a.quick, a.out, a.only)))


if __name__ == "__main__":
    sys.exit(main())
