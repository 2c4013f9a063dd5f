"""strux.dist under mpirun (every rank runs this; tests/python/test_dist.py starts it):
the distributed operator against the serial strux.toeplitz.BlockToeplitz on random inputs, for
every grid of the ranks and the cost model's, both layouts, one and several right-hand sides, odd
sizes, float32 and float64, replicated and distributed vectors; FFTMatvec files read per rank;
bad arguments raising on every rank. `--device cuda`: torch tensors on GPU rank % count (NCCL).
Prints "rank R: N passed, 0 failed" and exits 1 on any failure."""
import argparse
import os
import sys
import tempfile

import numpy as np
from mpi4py import MPI

import strux
import strux.dist
from strux.toeplitz import BlockToeplitz as Serial

ap = argparse.ArgumentParser()
ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
ap.add_argument("--quick", action="store_true")
args = ap.parse_args()
comm = MPI.COMM_WORLD
rank, P = comm.Get_rank(), comm.Get_size()
passed = failed = 0

if args.device == "cuda":
    import torch
    dev = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    to_dev = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(dev)  # noqa: E731
    to_np = lambda a: None if a is None else a.cpu().numpy()  # noqa: E731
else:
    to_dev = lambda a: np.ascontiguousarray(a)  # noqa: E731
    to_np = lambda a: a  # noqa: E731


def report(ok, what):
    global passed, failed
    ok_all = comm.allreduce(bool(ok), op=MPI.LAND)
    if not ok:
        print(f"rank {rank}: FAILED {what}", flush=True)
    passed, failed = passed + ok_all, failed + (not ok_all)


def rel(a, b):
    return float(np.linalg.norm(np.asarray(a, np.float64) - b) / max(np.linalg.norm(b), 1e-300))


def case(Nt, Nd, Nm, R, layout, grid, vectors, dtype, chunks=0, comm32=False):
    rng = np.random.default_rng(7)
    blocks = rng.standard_normal((Nt, Nd, Nm))
    tail = () if R is None else (R,)
    tm = layout == "time-major"
    m = rng.standard_normal(((Nt, Nm) if tm else (Nm, Nt)) + tail)
    d = rng.standard_normal(((Nt, Nd) if tm else (Nd, Nt)) + tail)
    S = Serial(blocks, layout=layout)
    d_ref, m_ref = S.matvec(m), S.rmatvec(d)
    F = strux.dist.BlockToeplitz(to_dev(blocks.astype(dtype)), comm=comm, grid=grid, layout=layout,
                                 vectors=vectors, options={"chunks": chunks, "timing": True,
                                                           **({"broadcast_dtype": "float32", "reduce_dtype": "float32"}
                                                              if comm32 else {})})
    i, j = F.grid_pos
    dist = vectors == "distributed"
    mj = to_dev(F.part_m(m).astype(dtype)) if (not dist or i == 0) else None
    di = to_dev(F.part_d(d).astype(dtype)) if (not dist or j == 0) else None
    got_d, got_m = to_np(F.matvec(mj)), to_np(F.rmatvec(di))
    tol = 1e-5 if dtype == np.float32 or comm32 else 1e-11
    e1 = rel(got_d, F.part_d(d_ref)) if got_d is not None else 0.0
    e2 = rel(got_m, F.part_m(m_ref)) if got_m is not None else 0.0
    shapes_ok = (got_d is None) == (dist and j != 0) and (got_m is None) == (dist and i != 0)
    if got_d is not None:
        shapes_ok &= got_d.shape == F.part_d(d_ref).shape and str(got_d.dtype).endswith(np.dtype(dtype).name)
    if not comm32 and R is None:  # whole-vector helpers: inner products and gathers of the parts
        dm = F.dot_m(mj, mj)
        shapes_ok &= abs(dm - float(np.vdot(m.astype(dtype), m.astype(dtype)))) <= 1e-5 * dm
        full = F.gather_m(mj)
        shapes_ok &= full.shape == m.shape and np.allclose(full, m.astype(dtype))
        gd = F.gather_d(to_dev(got_d) if got_d is not None else None)
        shapes_ok &= gd.shape == d_ref.shape and rel(gd, d_ref) < tol
    report(e1 < tol and e2 < tol and shapes_ok and F.timings(1 if R is None else R)["total"] >= 0,
           f"{np.dtype(dtype).name} {(Nt, Nd, Nm)} R={R} {layout} grid={grid}->{F.grid} {vectors}: "
           f"errors {e1:.3g} {e2:.3g}, shapes ok {shapes_ok}")


def expect(kind, needle, fn, what):
    try:
        fn()
        report(False, f"{what}: no exception")
    except kind as e:
        report(needle in str(e), f"{what}: {e}")
    except Exception as e:  # noqa: BLE001
        report(False, f"{what}: {type(e).__name__}: {e}")


grids = [None] + [(r, P // r) for r in range(1, P + 1) if P % r == 0]
dtypes = (np.float64, np.float32)
for grid in grids:
    for layout in ("time-major", "space-major"):
        for vectors in ("replicated", "distributed"):
            for n, dtype in enumerate(dtypes):
                case(7, 5, 6, None if n == 0 else 3, layout, grid, vectors, dtype)
            if not args.quick:
                case(5, 9, 4, 2, layout, grid, vectors, np.float64, chunks=3)
                case(6, 7, 5, None, layout, grid, vectors, np.float64, chunks=2, comm32=True)

# CG on (FᵀF + I) x = b with the parts (replicated vectors), against a dense solve.
def cg_case(layout):
    rng = np.random.default_rng(11)
    Nt, Nd, Nm = 6, 5, 4
    blocks = rng.standard_normal((Nt, Nd, Nm))
    S = Serial(blocks, layout=layout)
    shape = (Nt, Nm) if layout == "time-major" else (Nm, Nt)
    b = rng.standard_normal(shape)
    n = Nt * Nm
    H = np.stack([(S.rmatvec(S.matvec(e.reshape(shape))) + e.reshape(shape)).ravel() for e in np.eye(n)], axis=1)
    x_ref = np.linalg.solve(H, b.ravel()).reshape(shape)
    F = strux.dist.BlockToeplitz(to_dev(blocks), comm=comm, layout=layout)
    apply = lambda v: F.rmatvec(F.matvec(v)) + v  # noqa: E731
    x = to_dev(np.zeros_like(F.part_m(b)))
    r = to_dev(np.ascontiguousarray(F.part_m(b)))
    p_ = r.clone() if hasattr(r, "clone") else r.copy()
    rr = F.dot_m(r, r)
    for _ in range(2 * n):
        Ap = apply(p_)
        alpha = rr / F.dot_m(p_, Ap)
        x, r = x + alpha * p_, r - alpha * Ap
        rr_new = F.dot_m(r, r)
        if rr_new < 1e-26:
            break
        p_, rr = r + (rr_new / rr) * p_, rr_new
    err = rel(F.gather_m(x), x_ref)  # gather_m returns numpy
    report(err < 1e-9, f"CG {layout}: error {err:.3g}")


for layout in ("time-major", "space-major"):
    cg_case(layout)

# FFTMatvec files, each rank reading its part.
if strux._ext.has_hdf5:
    rng = np.random.default_rng(3)
    blocks = rng.standard_normal((6, 5, 7))
    tmp = comm.bcast(tempfile.mkdtemp() if rank == 0 else None)
    if rank == 0:
        Serial(blocks, layout="space-major").save_fftmatvec(tmp)
    comm.Barrier()
    F = strux.dist.BlockToeplitz.from_fftmatvec(tmp, comm=comm)
    m = rng.standard_normal((7, 6))
    got = F.matvec(np.ascontiguousarray(F.part_m(m)))  # read into numpy: the CPU operator
    report(rel(got, F.part_d(Serial(blocks, layout="space-major").matvec(m))) < 1e-12, "from_fftmatvec")
    expect(FileNotFoundError, "does not exist",
           lambda: strux.dist.BlockToeplitz.from_fftmatvec(tmp + "/missing", comm=comm), "missing directory")
    comm.Barrier()
    if rank == 0:
        import shutil
        shutil.rmtree(tmp)

# Bad arguments: the same error on every rank, nobody left waiting.
b = np.zeros((4, 5, 6))
expect(ValueError, "grid", lambda: strux.dist.BlockToeplitz(to_dev(b), comm=comm, grid=(P + 1, 1)), "grid size")
expect(ValueError, "grid", lambda: strux.dist.BlockToeplitz(to_dev(b), comm=comm, grid=(1, 7 * P)), "grid too wide")
if P > 1:
    bad = np.zeros((4, 5 + (rank == P - 1), 6))
    expect(ValueError, "problem.Nd", lambda: strux.dist.BlockToeplitz(to_dev(bad), comm=comm, grid=(P, 1)),
           "blocks shape on one rank")
F = strux.dist.BlockToeplitz(to_dev(b), comm=comm)
nm = F.cols.stop - F.cols.start + (rank == P - 1)
expect(ValueError, "argument 'm'", lambda: F.matvec(to_dev(np.zeros((4, nm)))), "vector shape on one rank")
expect(TypeError, "dtype", lambda: F.matvec(to_dev(np.zeros((4, F.cols.stop - F.cols.start), np.float32))),
       "vector dtype")
expect(TypeError, "comm", lambda: strux.dist.BlockToeplitz(b, comm=None), "no communicator")

print(f"rank {rank}: {passed} passed, {failed} failed", flush=True)
sys.exit(1 if failed else 0)
