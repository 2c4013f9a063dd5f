"""toeplitz-dist benchmark: strux.dist.BlockToeplitz matvec and rmatvec on the ranks of mpirun.

    mpirun -np 2 strux bench --family toeplitz-dist [--device cuda] [--fhat-gb 50] [--json out.json]

Every rank builds its part of a random F̂ (no rank ever holds the whole matrix), then times
matvec and rmatvec: the median over --reps calls of the wall time between barriers (the device
synchronized), and of each phase as the operator records it (broadcast, local, reduce: CUDA
events, or the host clock on the CPU; with chunks the communication overlaps the local work, so
phases add up to more than the total). The local phase's FFT, product and IFFT: on CUDA the
operator times each step with events ("phase_split": "measured"); on the CPU, where the local
product is one call, by timing transforms of the same sizes alone (numpy.fft): "fft" and "ifft"
are those estimates and "product" is local − fft − ifft ("phase_split": "estimated").

Checked: the adjoint identity <F m, d> = <m, Fᵀ d> on the whole distributed vectors (any size;
the tests compare against the serial operator).
Sizes: --fhat-gb G sets Nd = Nm so that this run's F̂ per rank is about G GB (--scale weak: each
rank G; strong: G in all), else --shape Nt Nd Nm. Rank 0 prints a table and writes --json.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import time

import numpy as np


def parser():
    p = argparse.ArgumentParser(prog="strux bench --family toeplitz-dist", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--shape", type=int, nargs=3, metavar=("NT", "ND", "NM"), default=None)
    p.add_argument("--nt", type=int, default=1000, help="time steps with --fhat-gb (default 1000)")
    p.add_argument("--fhat-gb", type=float, default=None, help="GB of F̂ per rank (weak) or in all (strong)")
    p.add_argument("--scale", choices=("weak", "strong"), default="weak")
    p.add_argument("--rhs", type=int, default=1)
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    p.add_argument("--layout", choices=("time-major", "space-major"), default="space-major")
    p.add_argument("--vectors", choices=("replicated", "distributed"), default="distributed")
    p.add_argument("--grid", type=int, nargs=2, default=None, metavar=("R", "C"))
    p.add_argument("--chunks", type=int, default=0, help="row chunks per rank (0: automatic)")
    p.add_argument("--solver", default="", help="the local operator's solver")
    p.add_argument("--comm-dtype", choices=("float32", "float64"), default=None,
                   help="broadcasts and sums of a float64 run sent as float32")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--warm", type=int, default=3)
    p.add_argument("--json", default=None)
    p.add_argument("--quick", action="store_true", help="a small smoke run")
    return p


def _shape(a, P):
    if a.quick:
        return (64, 48, 40)
    if a.shape:
        return tuple(a.shape)
    if a.fhat_gb is None:
        return (a.nt, 1024, 1024)
    nfreq = a.nt + 1
    total = a.fhat_gb * 1e9 * (P if a.scale == "weak" else 1)
    csize = 8 if a.dtype == "float32" else 16
    n = int(math.sqrt(total / (nfreq * csize)))
    return (a.nt, n, n)


class _Dev:
    """Arrays, synchronization and the FFT estimates on the CPU (numpy) or this rank's GPU (torch)."""

    def __init__(self, cuda, rank, dtype):
        self.cuda, self.dtype = cuda, dtype
        if cuda:
            import torch
            self.torch = torch
            self.dev = torch.device("cuda", rank % torch.cuda.device_count())
            torch.cuda.set_device(self.dev)

    def randn(self, shape, seed):
        if self.cuda:
            g = self.torch.Generator(device=self.dev).manual_seed(seed)
            return self.torch.randn(shape, generator=g, device=self.dev, dtype=getattr(self.torch, self.dtype))
        return np.random.default_rng(seed).standard_normal(shape).astype(self.dtype)

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def dot(self, a, b):
        if a is None or b is None:
            return 0.0
        if self.cuda:
            return float((a.double() * b.double()).sum())
        return float(np.vdot(a.astype(np.float64), b.astype(np.float64)))

    def fft_pair_s(self, n_series, nt, reps):
        """Seconds of the forward (rfft of n_series zero-padded series) and inverse transforms alone."""
        nfft = 2 * nt
        if self.cuda:
            t = self.torch
            x = t.randn((n_series, nt), device=self.dev, dtype=getattr(t, self.dtype))
            X = t.fft.rfft(x, n=nfft)
            f = lambda: t.fft.rfft(x, n=nfft)  # noqa: E731
            g = lambda: t.fft.irfft(X, n=nfft)  # noqa: E731
        else:
            x = np.random.default_rng(0).standard_normal((n_series, nt)).astype(self.dtype)
            X = np.fft.rfft(x, n=nfft)
            f = lambda: np.fft.rfft(x, n=nfft)  # noqa: E731
            g = lambda: np.fft.irfft(X, n=nfft)  # noqa: E731
        return self._time(f, reps), self._time(g, reps)

    def _time(self, fn, reps):
        fn()
        self.sync()
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            self.sync()
            ts.append(time.perf_counter() - t0)
        return statistics.median(ts)


def run(argv=None) -> int:
    from mpi4py import MPI

    import strux
    import strux.dist
    a = parser().parse_args(argv)
    comm = MPI.COMM_WORLD
    rank, P = comm.Get_rank(), comm.Get_size()
    cuda = a.device == "cuda" or (a.device == "auto" and strux._ext.has_cuda and strux._ext.cuda_device_count() > 0)
    D = _Dev(cuda, rank, a.dtype)
    Nt, Nd, Nm = _shape(a, P)
    R = a.rhs
    if a.quick:
        a.reps, a.warm = 3, 1

    def part(rows, cols):  # this rank's random blocks, scaled so that F has entries of size ~1
        b = D.randn((Nt, rows.stop - rows.start, cols.stop - cols.start), 1000 + rank)
        return b * (1.0 / math.sqrt(Nm * Nt))

    opts = {"chunks": a.chunks, "solver": a.solver, "timing": True, "check_ranks": False,
            "device": "cuda" if cuda else "cpu"}
    if a.comm_dtype:
        opts.update(broadcast_dtype=a.comm_dtype, reduce_dtype=a.comm_dtype)
    F = strux.dist.BlockToeplitz.from_parts((Nt, Nd, Nm), part, comm=comm, grid=a.grid, layout=a.layout,
                                            vectors=a.vectors, rhs=R, options=opts)
    i, j = F.grid_pos
    nm, nd = F.cols.stop - F.cols.start, F.rows.stop - F.rows.start
    dist = a.vectors == "distributed"
    tail = () if R == 1 else (R,)
    vshape = (lambda n: ((Nt, n) if a.layout == "time-major" else (n, Nt)) + tail)
    m = D.randn(vshape(nm), 7 + j) if (not dist or i == 0) else None
    d = D.randn(vshape(nd), 11 + i) if (not dist or j == 0) else None

    def timed(fn):
        walls, phases = [], []
        for k in range(a.warm + a.reps):
            comm.Barrier()
            t0 = time.perf_counter()
            out = fn()
            D.sync()
            comm.Barrier()
            if k >= a.warm:
                walls.append(time.perf_counter() - t0)
                phases.append(F.timings(R))
        med = {k: statistics.median(p[k] for p in phases) for k in phases[0]}
        # The slowest rank sets the pace: the max over ranks of each median.
        med = {k: comm.allreduce(v, op=MPI.MAX) for k, v in med.items()}
        return out, {"wall_s": statistics.median(walls), **{f"{k}_s": v for k, v in med.items()}}

    d_out, mv = timed(lambda: F.matvec(m))
    m_out, rmv = timed(lambda: F.rmatvec(d))
    # FFT / IFFT estimates of the local phase: matvec transforms nm·R series in, nd·R out.
    fm, im = D.fft_pair_s(nm * R, Nt, max(3, a.reps // 2))
    fd, idd = D.fft_pair_s(nd * R, Nt, max(3, a.reps // 2))
    for res, (f, g) in ((mv, (fm, idd)), (rmv, (fd, im))):
        f, g = comm.allreduce(f, op=MPI.MAX), comm.allreduce(g, op=MPI.MAX)
        if res.get("product_s", 0.0) > 0:  # the operator timed its steps
            res["phase_split"] = "measured"
            continue
        res.update(fft_s=f, ifft_s=g, phase_split="estimated")
        res["product_s"] = max(res["local_s"] - res["fft_s"] - res["ifft_s"], 0.0)
    # The adjoint identity on the whole vectors: <F m, d> = <m, Fᵀ d>; each piece counted once
    # (replicated parts are on every rank of their row or column: only grid column 0 / row 0 adds).
    lhs = comm.allreduce(D.dot(d_out, d) if j == 0 else 0.0)
    rhs_ = comm.allreduce(D.dot(m, m_out) if i == 0 else 0.0)
    adj_err = abs(lhs - rhs_) / max(abs(lhs), abs(rhs_), 1e-300)
    csize = 8 if a.dtype == "float32" else 16
    fhat_gb_rank = (Nt + 1) * nd * nm * csize / 1e9  # nfft ≥ 2Nt − 1 rounded: about Nt + 1 frequencies
    result = {
        "family": "toeplitz-dist", "ranks": P, "grid": list(F.grid), "device": "cuda" if cuda else "cpu",
        "shape": [Nt, Nd, Nm], "R": R, "dtype": a.dtype, "layout": a.layout, "vectors": a.vectors,
        "chunks": a.chunks, "solver": a.solver, "scale": a.scale, "comm_dtype": a.comm_dtype or a.dtype,
        "fhat_gb_per_rank_max": comm.allreduce(fhat_gb_rank, op=MPI.MAX),
        "matvec": mv, "rmatvec": rmv, "adjoint_rel_error": adj_err,
        "describe": F.describe(R),
    }
    ok = adj_err < (1e-3 if "float32" in (a.dtype, a.comm_dtype) else 1e-10)
    # The cost model's seconds of one matvec + rmatvec on this grid (bench/NOTES-dist.md).
    result["modelled_matvec_rmatvec_s"] = strux.dist._module().modelled_seconds(
        tuple(F.grid), Nt, Nd, Nm, R, a.dtype, 0 if cuda else -1, a.vectors, "auto")
    if rank == 0:
        print(f"toeplitz-dist {P} rank(s), grid {F.grid}, (Nt, Nd, Nm) = {(Nt, Nd, Nm)}, R = {R}, {a.dtype}, "
              f"{a.layout}, {a.vectors}, F̂ {result['fhat_gb_per_rank_max']:.3g} GB per rank")
        print(f"{'':8} {'wall ms':>9} {'bcast':>8} {'fft':>8} {'product':>8} {'ifft':>8} {'reduce':>8} {'total':>8}")
        for name in ("matvec", "rmatvec"):
            r = result[name]
            print(f"{name:8} {r['wall_s'] * 1e3:9.3f} " + " ".join(
                f"{r[k + '_s'] * 1e3:8.3f}" for k in ("broadcast", "fft", "product", "ifft", "reduce", "total")))
        print(f"fft / product / ifft: {result['matvec']['phase_split']}")
        print(f"adjoint identity relative error {adj_err:.2e} ({'ok' if ok else 'FAILED'})")
        if a.json:
            with open(a.json, "w") as f:
                json.dump(result, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    import sys
    sys.exit(run())
