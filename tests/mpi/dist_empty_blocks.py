"""strux.dist under mpirun with grids that leave some ranks an empty block (r > Nd or c > Nm;
tests/python/test_dist.py starts it with 2 and 4 ranks): every rank's matvec and rmatvec against
a plain float64 numpy evaluation of the contract's sums (DESIGN.md "toeplitz, distributed"),

    d[i] = sum_{j <= i} blocks[i - j] @ m[j],    m[j] = sum_{i >= j} blocks[i - j]^T @ d[i],

on fresh random inputs (the seed comes from rank 0 and is printed with a failure), both layouts,
one and several right-hand sides, float64 and float32, replicated and distributed vectors, a few
row chunks; grid=None where no grid gives every rank work; an FFTMatvec directory read by ranks
some of which read nothing. Prints "rank R: N passed, 0 failed" and exits 1 on any failure."""
import sys
import tempfile

import numpy as np
from mpi4py import MPI

import strux
import strux.dist

comm = MPI.COMM_WORLD
rank, P = comm.Get_rank(), comm.Get_size()
passed = failed = 0
SEED = comm.bcast(int(np.random.SeedSequence().entropy % 2**63) if rank == 0 else None)
serial_no = 0


def report(ok, what):
    global passed, failed
    ok_all = comm.allreduce(bool(ok), op=MPI.LAND)
    if not ok:
        print(f"rank {rank}: FAILED {what} (seed {SEED})", flush=True)
    passed, failed = passed + ok_all, failed + (not ok_all)


def fresh_rng():
    """A new generator for each case, the same on every rank."""
    global serial_no
    serial_no += 1
    return np.random.default_rng([SEED, serial_no])


def ref_matvec(blocks, m):
    """d from m, time-major (Nt, Nm[, R]) -> (Nt, Nd[, R]), float64, straight from the sums."""
    Nt = blocks.shape[0]
    d = np.zeros((Nt, blocks.shape[1]) + m.shape[2:])
    for i in range(Nt):
        for j in range(i + 1):
            d[i] += blocks[i - j] @ m[j]
    return d


def ref_rmatvec(blocks, d):
    """m from d, time-major (Nt, Nd[, R]) -> (Nt, Nm[, R])."""
    Nt = blocks.shape[0]
    m = np.zeros((Nt, blocks.shape[2]) + d.shape[2:])
    for j in range(Nt):
        for i in range(j, Nt):
            m[j] += blocks[i - j].T @ d[i]
    return m


def rel(got, want):
    got = np.asarray(got, np.float64)
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-300))


def case(Nt, Nd, Nm, R, layout, grid, vectors, dtype, chunks=0, want_grid=None):
    rng = fresh_rng()
    blocks = rng.standard_normal((Nt, Nd, Nm))
    tail = () if R is None else (R,)
    m = rng.standard_normal((Nt, Nm) + tail)  # time-major here; space-major vectors are transposed
    d = rng.standard_normal((Nt, Nd) + tail)
    d_ref, m_ref = ref_matvec(blocks, m), ref_rmatvec(blocks, d)
    tm = layout == "time-major"
    lay = (lambda x: x) if tm else (lambda x: np.ascontiguousarray(np.swapaxes(x, 0, 1)))
    F = strux.dist.BlockToeplitz(blocks.astype(dtype), comm=comm, grid=grid, layout=layout, vectors=vectors,
                                 options={"chunks": chunks})
    i, j = F.grid_pos
    dist = vectors == "distributed"
    has_m, has_d = not dist or i == 0, not dist or j == 0
    rows, cols = F.rows, F.cols
    # The contract's blocks: block q of n items over k parts is [q·n // k, (q+1)·n // k).
    r, c = F.grid
    ok = (r * c == P and (want_grid is None or (r, c) == want_grid) and (i, j) == divmod(rank, c)
          and rows == slice(i * Nd // r, (i + 1) * Nd // r) and cols == slice(j * Nm // c, (j + 1) * Nm // c))
    got_d = F.matvec(F.part_m(lay(m)).astype(dtype) if has_m else None)
    got_m = F.rmatvec(F.part_d(lay(d)).astype(dtype) if has_d else None)
    want_d, want_m = F.part_d(lay(d_ref)), F.part_m(lay(m_ref))
    ok &= (got_d is None) == (not has_d) and (got_m is None) == (not has_m)
    e1 = e2 = 0.0
    if got_d is not None:
        ok &= got_d.shape == want_d.shape and got_d.dtype == dtype
        e1 = rel(got_d, want_d)
    if got_m is not None:
        ok &= got_m.shape == want_m.shape and got_m.dtype == dtype
        e2 = rel(got_m, want_m)
    # float64: the FFT's rounding, about 1e-15 relative times a small factor; float32: 1e-7 times it.
    tol = 1e-12 if dtype == np.float64 else 1e-5
    report(ok and e1 < tol and e2 < tol,
           f"{np.dtype(dtype).name} (Nt, Nd, Nm) = {(Nt, Nd, Nm)} R={R} {layout} grid={grid}->{F.grid} {vectors} "
           f"chunks {chunks}: rank at {(i, j)} rows {rows} cols {cols}, d part {None if got_d is None else got_d.shape}"
           f", m part {None if got_m is None else got_m.shape}, errors {e1:.3g} {e2:.3g}, ok {ok}")
    return F


# The grids of the task: every one leaves some rank without rows or columns.
grids = []  # (Nd, Nm, grid)
grids += [(1, 5, (P, 1)), (4, 1, (1, P)), (1, 1, (P, 1)), (1, 1, (1, P))]
if P == 4:
    grids += [(1, 1, (2, 2)), (3, 6, (4, 1)), (1, 3, (2, 2)), (3, 1, (2, 2)), (2, 7, (4, 1))]
for Nd, Nm, grid in grids:
    for layout in ("time-major", "space-major"):
        for vectors in ("replicated", "distributed"):
            case(6, Nd, Nm, None, layout, grid, vectors, np.float64)
            case(5, Nd, Nm, 3, layout, grid, vectors, np.float64, chunks=2)
            case(7, Nd, Nm, 2, layout, grid, vectors, np.float32)

# grid=None where no grid of P ranks gives every rank a row and a column: a grid, not an error.
for layout in ("time-major", "space-major"):
    for vectors in ("replicated", "distributed"):
        case(6, 1, 1, 2, layout, None, vectors, np.float64)
# ... and where one does, the model still takes one of those (Nd = 1: only (1, P)).
case(6, 1, 2 * P, None, "time-major", None, "replicated", np.float64, want_grid=(1, P))

# The matrix of the whole vectors from the parts (gathers and inner products with empty parts).
rng = fresh_rng()
blocks, m = rng.standard_normal((5, 1, 3)), rng.standard_normal((5, 3))
F = strux.dist.BlockToeplitz(blocks, comm=comm, grid=(P, 1))
d = F.gather_d(F.matvec(F.part_m(m)))
want = ref_matvec(blocks, m)
report(d.shape == want.shape and rel(d, want) < 1e-12 and abs(F.dot_d(F.part_d(want), F.part_d(want))
                                                              - float(np.vdot(want, want))) < 1e-12 * np.vdot(want, want),
       f"gather_d / dot_d with empty parts: {d.shape}")
report("empty" in F.describe() or F.rows.stop > F.rows.start, f"describe: {F.describe()}")

# An FFTMatvec directory: the ranks with an empty block read nothing.
if strux._ext.has_hdf5:
    from strux.toeplitz import BlockToeplitz as Serial
    rng = fresh_rng()
    blocks = rng.standard_normal((6, 2, 3))
    tmp = comm.bcast(tempfile.mkdtemp() if rank == 0 else None)
    if rank == 0:
        Serial(blocks, layout="space-major").save_fftmatvec(tmp)
    comm.Barrier()
    for grid in ((P, 1), (1, P)) + (((2, 2),) if P == 4 else ()):
        F = strux.dist.BlockToeplitz.from_fftmatvec(tmp, comm=comm, grid=grid)
        m, d = rng.standard_normal((3, 6, 2)), rng.standard_normal((2, 6, 2))  # space-major, R = 2
        sm = lambda x: np.swapaxes(x, 0, 1)  # noqa: E731
        got_d, got_m = F.matvec(F.part_m(m)), F.rmatvec(F.part_d(d))
        want_d, want_m = F.part_d(sm(ref_matvec(blocks, sm(m)))), F.part_m(sm(ref_rmatvec(blocks, sm(d))))
        report(got_d.shape == want_d.shape and got_m.shape == want_m.shape and rel(got_d, want_d) < 1e-12
               and rel(got_m, want_m) < 1e-12,
               f"from_fftmatvec grid {grid}: rows {F.rows} cols {F.cols}, shapes {got_d.shape} {got_m.shape}")
    comm.Barrier()
    if rank == 0:
        import shutil
        shutil.rmtree(tmp)

print(f"rank {rank}: {passed} passed, {failed} failed", flush=True)
sys.exit(1 if failed else 0)
