"""A linear inverse problem end to end with strux's block Toeplitz operator.

Infer a spatiotemporal source s(x, t) of 2-D advection–diffusion (pde.py, >= 1e5 cells by
default) from noisy readings at Nd sensors. The parameter-to-observable map F is block
lower-triangular Toeplitz; strux builds it from (A, B, C) by Nd adjoint sweeps of the sparse
time stepper (BlockToeplitz.from_lti) and applies F and F* by FFTs. The MAP estimate solves

    (F* F / sigma^2 + alpha R) m = F* d / sigma^2

by conjugate gradients. The script times one Hessian product through strux against the same
product by time-stepping the PDE forward and adjoint (both measured here, in this run), checks
that the two agree, and reports the recovery error and a picture of the true and recovered
source.

    python examples/inverse_problem/run.py            # full size (about 10 minutes on 2 cores)
    python examples/inverse_problem/run.py --small    # under a minute (CI smoke run)
    python examples/inverse_problem/run.py --device cuda   # one GPU (torch)
    python examples/inverse_problem/run.py --device cuda --gpus 2   # F on two GPUs of this process

Needs strux importable (PYTHONPATH=python in a source checkout), numpy, scipy; matplotlib for the
picture (skipped without it); torch for --device cuda.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import strux  # noqa: E402
from pde import Backend, Grid  # noqa: E402


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--small", action="store_true", help="a small problem (CI smoke run, under a minute)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--gpus", type=int, default=1,
                   help="devices for F: more than 1 runs strux.dist.BlockToeplitzGroup in this process, one "
                        "rank per GPU (--device cuda, NCCL) or per CPU thread (--device cpu)")
    p.add_argument("--n", type=int, help="state grid n x n (default 320, --small 64)")
    p.add_argument("--nc", type=int, help="parameter grid nc x nc (default 32, --small 16)")
    p.add_argument("--sensors", type=int, help="sensors, a square number (default 64, --small 16)")
    p.add_argument("--nt", type=int, help="observation steps (default 100, --small 40)")
    p.add_argument("--noise", type=float, default=0.01, help="noise standard deviation relative to the data's rms")
    p.add_argument("--alpha", type=float, default=1.0, help="regularisation weight relative to the data term")
    p.add_argument("--gamma", type=float, default=2.0, help="spatial smoothing length of R (coarse cells squared)")
    p.add_argument("--beta", type=float, default=10.0, help="temporal smoothing weight of R")
    p.add_argument("--cg-tol", type=float, default=1e-6)
    p.add_argument("--cg-maxiter", type=int, default=500)
    p.add_argument("--tol", type=float, default=None,
                   help="relative error tolerance of F's products (strux picks the precision); default float64")
    p.add_argument("--out", default=os.path.join(HERE, "out"), help="folder for results.json and the picture")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    defaults = dict(n=64, nc=16, sensors=16, nt=40) if a.small else dict(n=320, nc=32, sensors=64, nt=100)
    for k, v in defaults.items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    return a


def median_time(f, sync, repeat: int) -> float:
    ts = []
    for _ in range(repeat):
        sync()
        t0 = time.perf_counter()
        f()
        sync()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def cg(H, b, tol: float, maxiter: int, dot):
    """Conjugate gradients from 0 on H x = b; returns (x, iterations, relative residual)."""
    x = b * 0
    r = b.clone() if hasattr(b, "clone") else b.copy()
    p = r.clone() if hasattr(r, "clone") else r.copy()
    rs = dot(r, r)
    bn = rs ** 0.5
    it = 0
    while it < maxiter and rs ** 0.5 > tol * bn:
        Hp = H(p)
        a = rs / dot(p, Hp)
        x = x + a * p
        r = r - a * Hp
        rs_new = dot(r, r)
        p = r + (rs_new / rs) * p
        rs = rs_new
        it += 1
    return x, it, rs ** 0.5 / bn


class GroupOperator:
    """F on several devices of this process: strux.dist.BlockToeplitzGroup, rank q of the grid on
    GPU q (NCCL between them) or on CPU thread q. Whole vectors live on the first device: matvec
    and rmatvec cut them into the ranks' parts (moved to each rank's GPU) and put the results
    together there, so a product here costs what a caller of whole vectors pays."""

    def __init__(self, blocks, devices):
        from strux import dist
        try:
            dist._module()
        except RuntimeError as e:
            raise SystemExit(f"--gpus {len(devices)}: {e}") from None
        self.G = dist.BlockToeplitzGroup(blocks, devices=devices, layout="time-major", vectors="replicated")
        self.gpu = devices[0] != "cpu"
        self.nt, self.nd, self.nm = (int(x) for x in blocks.shape)
        self.like = blocks
        self.precision = {"every phase": str(blocks.dtype).replace("torch.", "")}
        self.error_bound = None

    def _whole(self, parts, n, take, where):
        """The whole (nt, n) vector from the parts of the ranks `take` keeps, at their slices."""
        if self.gpu:
            out = self.like.new_empty((self.nt, n))
        else:
            out = np.empty((self.nt, n), dtype=self.like.dtype)
        for rk, x in zip(self.G.ranks, parts):
            if take(rk):
                out[:, where(rk)] = x.to(out.device) if self.gpu else x
        return out

    def matvec(self, m):
        d = self.G.matvec([rk.part_m(m) for rk in self.G.ranks])
        return self._whole(d, self.nd, lambda rk: rk.grid_pos[1] == 0, lambda rk: rk.rows)

    def rmatvec(self, d):
        m = self.G.rmatvec([rk.part_d(d) for rk in self.G.ranks])
        return self._whole(m, self.nm, lambda rk: rk.grid_pos[0] == 0, lambda rk: rk.cols)

    def __repr__(self):
        return (f"BlockToeplitzGroup on {len(self.G.ranks)} {'GPUs' if self.gpu else 'CPU threads'}, grid "
                f"{self.G.grid}; rank 0: {self.G.describe(0)}")


def make_operator(be, nt: int, gpus: int, tol, device: str):
    """F from the LTI system, on one device, or on `gpus` devices through the distributed operator
    (strux.dist.BlockToeplitzGroup, every phase in the blocks' dtype: --tol is one device's)."""
    A, B, C = be.lti()
    F = strux.BlockToeplitz.from_lti(A, B, C, nt, tol=tol if gpus == 1 else None)
    if gpus == 1:
        return F
    if tol is not None:
        raise SystemExit("--tol picks the precision of the one-device operator; --gpus > 1 runs in float64")
    if device == "cpu":
        devices = ["cpu"] * gpus
    else:
        import torch
        if torch.cuda.device_count() < gpus:
            raise SystemExit(f"--gpus {gpus}: this machine has {torch.cuda.device_count()} GPU(s)")
        devices = list(range(gpus))
    blocks = F.blocks
    del F  # the one-device F̂: its memory back before the ranks build theirs
    return GroupOperator(blocks, devices)


def git_commit() -> str:
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, text=True).strip()
    except Exception:
        return "unknown"


def picture(path, grid, m_true, m_map, times):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no picture")
        return None
    nc = grid.nc
    cols = len(times) + 1
    fig, ax = plt.subplots(2, cols, figsize=(3.2 * cols, 6.2), constrained_layout=True)
    panels = [(f"t = {t}", m_true[t], m_map[t]) for t in times]
    panels.append(("sum over time", m_true.sum(0), m_map.sum(0)))
    for j, (title, a, b) in enumerate(panels):
        vmax = max(np.abs(a).max(), np.abs(b).max())
        for i, (img, what) in enumerate(((a, "true"), (b, "MAP"))):
            h = ax[i, j].imshow(img.reshape(nc, nc), origin="lower", extent=(0, 1, 0, 1), cmap="RdBu_r",
                                vmin=-vmax, vmax=vmax)
            ax[i, j].plot(grid.sensor_xy[:, 0], grid.sensor_xy[:, 1], "k.", ms=3)
            ax[i, j].set_title(f"{what}, {title}", fontsize=9)
            ax[i, j].set_xticks([])
            ax[i, j].set_yticks([])
        fig.colorbar(h, ax=ax[:, j], shrink=0.6)
    fig.suptitle(f"source of 2-D advection–diffusion ({grid.n}x{grid.n} cells), {len(grid.sensor_xy)} sensors (dots)")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv=None):
    a = parse(argv)
    rng = np.random.default_rng(a.seed)
    grid = Grid(a.n, a.nc, a.sensors)
    be = Backend(grid, a.device)
    nt = a.nt
    print(f"grid {a.n}x{a.n} = {grid.ns} cells, parameter {a.nc}x{a.nc} = {grid.nm} per step, "
          f"{len(grid.sensor_xy)} sensors, Nt = {nt}, {grid.k} PDE steps of dt = {grid.dt:.3g} per observation, "
          f"device {a.device}")

    # F from (A, B, C): Nd adjoint sweeps of the sparse stepper, then F-hat.
    be.sync()
    t0 = time.perf_counter()
    F = make_operator(be, nt, a.gpus, a.tol, a.device)
    be.sync()
    t_build = time.perf_counter() - t0
    print(f"F built in {t_build:.2f} s: {F!r}")

    m_true = grid.true_source(nt)
    mt = be.array(m_true)
    d_clean = be.forward(mt)  # by time stepping, independent of F
    fwd_check = float(np.linalg.norm(be.numpy(F.matvec(mt)) - be.numpy(d_clean)) / np.linalg.norm(be.numpy(d_clean)))
    sigma = a.noise * float(np.sqrt(np.mean(be.numpy(d_clean) ** 2)))
    d = d_clean + be.array(sigma * rng.standard_normal(tuple(d_clean.shape)))

    # alpha relative to the data term: ||F*F v|| / sigma^2 against ||R v|| for a random v
    be.set_regulariser(grid.regulariser(a.gamma, a.beta))
    v = be.array(rng.standard_normal((nt, grid.nm)))
    scale = (float(np.linalg.norm(be.numpy(F.rmatvec(F.matvec(v))))) / sigma**2 /
             float(np.linalg.norm(be.numpy(be.apply_R(v)))))
    alpha = a.alpha * scale

    def H_fft(m):
        return F.rmatvec(F.matvec(m)) / sigma**2 + alpha * be.apply_R(m)

    def H_pde(m):
        return be.adjoint(be.forward(m)) / sigma**2 + alpha * be.apply_R(m)

    hess_check = float(np.linalg.norm(be.numpy(H_fft(v) - H_pde(v))) / np.linalg.norm(be.numpy(H_pde(v))))

    # time per Hessian product, both ways, in this run
    t_fft = median_time(lambda: H_fft(v), be.sync, 7)
    t_pde = median_time(lambda: H_pde(v), be.sync, 3)
    t_fmv = median_time(lambda: F.matvec(v), be.sync, 7)
    t_pde_fwd = median_time(lambda: be.forward(v), be.sync, 3)

    def dot(x, y):
        return float((x * y).sum())

    rhs = F.rmatvec(d) / sigma**2
    be.sync()
    t0 = time.perf_counter()
    m_map, iters, relres = cg(H_fft, rhs, a.cg_tol, a.cg_maxiter, dot)
    be.sync()
    t_cg = time.perf_counter() - t0
    m_map = be.numpy(m_map)
    rec_err = float(np.linalg.norm(m_map - m_true) / np.linalg.norm(m_true))
    misfit = float(np.linalg.norm(be.numpy(F.matvec(be.array(m_map)) - d)) /
                   (sigma * np.sqrt(np.prod(tuple(d.shape)))))

    os.makedirs(a.out, exist_ok=True)
    tag = ("small" if a.small else "full") + ("" if a.device == "cpu" else "-" + a.device) + \
        ("" if a.gpus == 1 else f"-x{a.gpus}")
    times = [int(np.argmax(np.abs(m_true).sum(1)[: nt // 2 + 1])), int(nt // 2)]
    pic = picture(os.path.join(a.out, f"fields-{tag}.png"), grid, m_true, m_map, times)
    res = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": git_commit(),
        "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} CPUs visible",
        "device": a.device, "devices_for_F": a.gpus,
        "size": {"n": a.n, "nc": a.nc, "sensors": a.sensors, "nt": nt},
        "cells": grid.ns, "Nm": grid.nm, "Nd": len(grid.sensor_xy), "Nt": nt, "pde_steps_per_obs": grid.k,
        "precision": F.precision, "error_bound": F.error_bound,
        "build_F_s": t_build,
        "forward_check_rel": fwd_check, "hessian_check_rel": hess_check,
        "hessian_fft_s": t_fft, "hessian_pde_s": t_pde, "speedup": t_pde / t_fft,
        "matvec_fft_s": t_fmv, "forward_pde_s": t_pde_fwd,
        "noise_sigma": sigma, "alpha": alpha, "cg_iterations": iters, "cg_relres": relres, "cg_s": t_cg,
        "recovery_rel_error": rec_err, "data_misfit_per_sigma": misfit, "picture": pic,
    }
    with open(os.path.join(a.out, f"results-{tag}.json"), "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps(res, indent=1))
    return res


if __name__ == "__main__":
    main()
