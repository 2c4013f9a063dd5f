"""BlockToeplitz vs float64 loops (ref_toeplitz.py): products, layouts, R, LTI, vjp, scipy,
FFTMatvec files (written here independently with h5py), dtypes, strides and errors."""
import os

import h5py
import numpy as np
import pytest

import strux
from strux import BlockToeplitz, read_vector, write_vector
from ref_toeplitz import (ref_dense, ref_grad_blocks, ref_lti_blocks, ref_matvec, ref_rmatvec,
                          to_space_major)

TOL = {np.float32: 1e-5, np.float64: 1e-12}
LAYOUTS = ["time-major", "space-major"]
# (Nt, Nd, Nm, R); R None = no trailing axis. Sizes 1, odd and prime Nt, Nd > Nm and Nd < Nm.
SIZES = [(1, 1, 1, None), (1, 3, 2, 2), (7, 1, 1, None), (13, 3, 5, None), (13, 2, 3, 4),
         (7, 4, 1, 3), (5, 1, 6, None), (16, 3, 2, 1), (2, 2, 2, None)]


def rel(a, ref):
    a = np.asarray(a, dtype=np.float64)
    return np.linalg.norm(a - ref) / max(np.linalg.norm(ref), 1e-300)


def vec(rng, nt, n, R, dtype):
    shape = (nt, n) if R is None else (nt, n, R)
    return rng.standard_normal(shape).astype(dtype)


def lay(x, layout):
    """A time-major array in `layout`."""
    return x if layout == "time-major" else np.ascontiguousarray(to_space_major(x))


def unlay(x, layout):
    return x if layout == "time-major" else to_space_major(x)


# ---- products -----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("size", SIZES)
def test_matvec_rmatvec_match_loops(size, layout, dtype):
    nt, nd, nm, R = size
    rng = np.random.default_rng()
    blocks = rng.standard_normal((nt, nd, nm)).astype(dtype)
    m, d = vec(rng, nt, nm, R, dtype), vec(rng, nt, nd, R, dtype)
    op = BlockToeplitz(blocks, layout=layout)
    y = op.matvec(lay(m, layout))
    x = op.rmatvec(lay(d, layout))
    assert y.dtype == dtype and x.dtype == dtype
    assert y.shape == lay(ref_matvec(blocks, m), layout).shape
    assert x.shape == lay(m, layout).shape
    assert rel(unlay(y, layout), ref_matvec(blocks, m)) < TOL[dtype]
    assert rel(unlay(x, layout), ref_rmatvec(blocks, d)) < TOL[dtype]
    assert rel(unlay(op @ lay(m, layout), layout), ref_matvec(blocks, m)) < TOL[dtype]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_adjoint_identity(layout):
    rng = np.random.default_rng()
    for nt, nd, nm, R in [(11, 3, 4, None), (6, 2, 5, 3), (1, 1, 1, None)]:
        op = BlockToeplitz(rng.standard_normal((nt, nd, nm)), layout=layout)
        m = lay(vec(rng, nt, nm, R, np.float64), layout)
        d = lay(vec(rng, nt, nd, R, np.float64), layout)
        lhs, rhs = np.vdot(op.matvec(m), d), np.vdot(m, op.rmatvec(d))
        assert abs(lhs - rhs) <= 1e-12 * max(1.0, abs(lhs))


def test_matvec_sees_every_block_and_causality():
    # An impulse at time j in channel b reproduces column b of blocks[i - j] at times i >= j, 0 before.
    rng = np.random.default_rng()
    nt, nd, nm, j, b = 9, 2, 3, 4, 1
    blocks = rng.standard_normal((nt, nd, nm))
    m = np.zeros((nt, nm))
    m[j, b] = 1.0
    y = BlockToeplitz(blocks).matvec(m)
    assert np.all(np.abs(y[:j]) < 1e-14)
    assert np.allclose(y[j:], blocks[:nt - j, :, b], atol=1e-13)


def test_half_precision_computes_in_float32():
    rng = np.random.default_rng()
    blocks = rng.standard_normal((13, 3, 4)).astype(np.float16)
    m = rng.standard_normal((13, 4)).astype(np.float16)
    op = BlockToeplitz(blocks)
    y = op.matvec(m)
    assert y.dtype == np.float16 and op.dtype == np.float16
    assert rel(y, ref_matvec(blocks, m)) < 2e-3
    assert op.rmatvec(y).dtype == np.float16


@pytest.mark.parametrize("layout", LAYOUTS)
def test_non_contiguous_inputs(layout):
    rng = np.random.default_rng()
    nt, nd, nm = 7, 3, 4
    big = rng.standard_normal((2 * nt, nd, 2 * nm))
    blocks = big[::2, :, ::2]  # strided blocks
    assert not blocks.flags.c_contiguous
    op = BlockToeplitz(blocks, layout=layout)
    mt = rng.standard_normal((nm, nt)).T if layout == "time-major" else rng.standard_normal((nt, nm)).T
    assert not mt.flags.c_contiguous
    ref = ref_matvec(blocks, unlay(mt, layout))
    assert rel(unlay(op.matvec(mt), layout), ref) < 1e-12
    m3 = rng.standard_normal((nt, nm, 5))[:, :, ::2]  # strided trailing R axis
    m3v = m3 if layout == "time-major" else np.swapaxes(m3, 0, 1)  # a strided view either way
    assert not m3v.flags.c_contiguous
    assert rel(unlay(op.matvec(m3v), layout), ref_matvec(blocks, m3)) < 1e-12
    d = rng.standard_normal((3 * nt, nd))[::3]
    assert rel(unlay(op.rmatvec(lay(d, layout)), layout), ref_rmatvec(blocks, d)) < 1e-12


def test_nan_propagates():
    rng = np.random.default_rng()
    blocks = rng.standard_normal((6, 2, 3))
    m = rng.standard_normal((6, 3))
    m[5, 1] = np.nan  # the loop gives NaN at d[5] (FFT spreads it further: documented)
    assert np.isnan(BlockToeplitz(blocks).matvec(m)[5]).all()
    blocks[2, 0, 0] = np.nan
    m = rng.standard_normal((6, 3))
    assert np.isnan(BlockToeplitz(blocks).matvec(m)[2:, 0]).all()
    assert np.isnan(BlockToeplitz(blocks).rmatvec(rng.standard_normal((6, 2)))[:4, 0]).all()


# ---- dense, scipy ---------------------------------------------------------------------------------

def test_shape_dtype_and_to_dense():
    rng = np.random.default_rng()
    nt, nd, nm = 5, 2, 3
    blocks = rng.standard_normal((nt, nd, nm)).astype(np.float32)
    op = BlockToeplitz(blocks)
    assert op.shape == (nt * nd, nt * nm) and op.dtype == np.float32
    F = op.to_dense()
    assert F.shape == op.shape and F.dtype == np.float32
    assert np.array_equal(F, ref_dense(blocks).astype(np.float32))
    # space-major flattening: [a*Nt + i, b*Nt + j]
    Fs = op.to_dense(layout="space-major")
    m = rng.standard_normal((nm, nt))
    op64 = BlockToeplitz(blocks.astype(np.float64), layout="space-major")
    assert rel(Fs.astype(np.float64) @ m.ravel(), op64.matvec(m).ravel()) < 1e-12


@pytest.mark.parametrize("layout", LAYOUTS)
def test_linear_operator_matches_dense(layout):
    rng = np.random.default_rng()
    nt, nd, nm = 6, 2, 3
    op = BlockToeplitz(rng.standard_normal((nt, nd, nm)), layout=layout)
    L = op.as_linear_operator()
    F = op.to_dense(layout=layout)
    assert L.shape == F.shape
    x, y = rng.standard_normal(nt * nm), rng.standard_normal(nt * nd)
    assert rel(L.matvec(x), F @ x) < 1e-12
    assert rel(L.rmatvec(y), F.T @ y) < 1e-12
    X = rng.standard_normal((nt * nm, 4))
    assert rel(L.matmat(X), F @ X) < 1e-12
    assert rel(L @ np.eye(nt * nm), F) < 1e-12
    assert rel(L.H @ np.eye(nt * nd), F.T) < 1e-12


def _well_conditioned(rng, nt, n, dtype=np.float64):
    blocks = 0.1 * rng.standard_normal((nt, n, n)) / np.sqrt(n * nt)
    blocks[0] += np.eye(n)
    return blocks.astype(dtype)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_scipy_lsqr_and_cg_converge(layout):
    from scipy.sparse.linalg import LinearOperator, cg, lsqr

    rng = np.random.default_rng()
    nt, n = 9, 4
    op = BlockToeplitz(_well_conditioned(rng, nt, n), layout=layout)
    L = op.as_linear_operator()
    F = op.to_dense(layout=layout)
    x_true = rng.standard_normal(nt * n)
    b = F @ x_true
    x, istop, itn = lsqr(L, b, atol=1e-14, btol=1e-14, iter_lim=500)[:3]
    assert istop in (1, 2) and rel(x, x_true) < 1e-9
    # CG on the normal equations F^T F x = F^T b
    N = LinearOperator((L.shape[1], L.shape[1]), matvec=lambda v: L.rmatvec(L.matvec(v)), dtype=L.dtype)
    x2, info = cg(N, L.rmatvec(b), rtol=1e-13, maxiter=500)
    assert info == 0 and rel(x2, x_true) < 1e-9


def test_linear_operator_float32_takes_float64_vectors():
    rng = np.random.default_rng()
    op = BlockToeplitz(rng.standard_normal((4, 2, 2)).astype(np.float32))
    L = op.as_linear_operator()
    assert L.dtype == np.float32
    x = rng.standard_normal(8)
    assert rel(L.matvec(x), ref_dense(op.blocks) @ x) < 1e-5
    z = L.matvec(x + 1j * x)
    assert np.iscomplexobj(z) and rel(z.imag, ref_dense(op.blocks) @ x) < 1e-5


# ---- LTI -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dims", [(3, 2, 4), (4, 5, 2), (1, 1, 1), (5, 3, 3)])
@pytest.mark.parametrize("with_d", [False, True])
def test_from_lti_matches_powers_and_recurrence(dims, with_d):
    ns, nd, nm = dims
    nt = 8
    rng = np.random.default_rng()
    A = rng.standard_normal((ns, ns))
    A *= 0.9 / max(1e-9, np.abs(np.linalg.eigvals(A)).max())  # stable, so powers stay O(1)
    B, C = rng.standard_normal((ns, nm)), rng.standard_normal((nd, ns))
    D = rng.standard_normal((nd, nm)) if with_d else None
    op = BlockToeplitz.from_lti(A, B, C, nt, D=D)
    assert rel(op.blocks, ref_lti_blocks(A, B, C, nt, D)) < 1e-13
    # The operator is the input-to-output map of the state-space recurrence.
    u = rng.standard_normal((nt, nm))
    x, y = np.zeros(ns), np.zeros((nt, nd))
    for t in range(nt):
        x = A @ x + B @ u[t]
        y[t] = C @ x + (D @ u[t] if with_d else 0)
    assert rel(op.matvec(u), y) < 1e-12


def test_from_lti_float32_and_layout():
    rng = np.random.default_rng()
    A = (0.5 * rng.standard_normal((3, 3))).astype(np.float32)
    B, C = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((2, 3)).astype(np.float32)
    op = BlockToeplitz.from_lti(A, B, C, 5, layout="space-major")
    assert op.dtype == np.float32 and op.layout == "space-major" and op.shape == (10, 20)
    assert rel(op.blocks, ref_lti_blocks(A, B, C, 5)) < 1e-5


# ---- gradients ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("size", [(1, 1, 1, None), (7, 2, 3, None), (13, 3, 2, 3), (5, 1, 4, 1)])
def test_vjp(size, layout, dtype):
    nt, nd, nm, R = size
    rng = np.random.default_rng()
    blocks = rng.standard_normal((nt, nd, nm)).astype(dtype)
    m, dd = vec(rng, nt, nm, R, dtype), vec(rng, nt, nd, R, dtype)
    op = BlockToeplitz(blocks, layout=layout)
    dm, dblocks = op.vjp(lay(m, layout), lay(dd, layout))
    assert dm.dtype == dtype and dblocks.dtype == dtype
    assert dm.shape == lay(m, layout).shape and dblocks.shape == blocks.shape
    assert rel(unlay(dm, layout), ref_rmatvec(blocks, dd)) < TOL[dtype]
    assert rel(dblocks, ref_grad_blocks(m, dd)) < TOL[dtype]
    # dot-product test: d is linear in blocks, so <dblocks, db> = <dd, F(db) m> exactly.
    db = rng.standard_normal(blocks.shape)
    lhs = np.vdot(dblocks.astype(np.float64), db)
    rhs = np.vdot(dd.astype(np.float64), ref_matvec(db, m))
    assert abs(lhs - rhs) <= 10 * TOL[dtype] * (np.linalg.norm(dblocks) * np.linalg.norm(db) + 1e-30)


# ---- files ---------------------------------------------------------------------------------------------

def _write_meta(path, nd, nm, nt, prefix, lines=None):
    with open(path, "w") as f:
        f.write(lines if lines is not None else f"{nd}\n{nm}\n{nt}\n{prefix}\n.h5\n1\n0\n1\n0\n")


def _write_row(path, vec, nm, nt, **extra_attrs):
    with h5py.File(path, "w") as f:
        ds = f.create_dataset("vec", data=vec)
        ds.attrs["reindex"] = np.int32(1)
        ds.attrs["n_param"] = np.int32(nm)
        ds.attrs["param_steps"] = np.int32(nt)
        for k, v in extra_attrs.items():
            ds.attrs[k] = v


def _write_matrix_h5py(base, blocks, prefix, meta_lines=None, row_dir=None):
    """FFTMatvec layout with h5py: vec[m*Nt + t] = blocks[t, row, m]."""
    nt, nd, nm = blocks.shape
    os.makedirs(base, exist_ok=True)
    _write_meta(os.path.join(base, "meta_adj"), nd, nm, nt, prefix, meta_lines)
    rows = row_dir or base
    os.makedirs(os.path.join(rows, os.path.dirname(prefix)), exist_ok=True)
    for r in range(nd):
        _write_row(os.path.join(rows, f"{prefix}{r:06d}.h5"), blocks[:, r, :].T.reshape(-1), nm, nt)


def test_fftmatvec_round_trip(tmp_path):
    rng = np.random.default_rng()
    blocks = rng.standard_normal((7, 3, 4))
    op = BlockToeplitz(blocks, layout="space-major")
    op.save_fftmatvec(tmp_path / "a")
    assert (tmp_path / "a" / "adj" / "vec_000002.h5").exists()
    back = BlockToeplitz.from_fftmatvec(tmp_path / "a")
    assert back.layout == "space-major" and back.dtype == np.float64
    assert np.array_equal(back.blocks, blocks)
    op.save_fftmatvec(str(tmp_path / "b"), prefix="F_")
    back = BlockToeplitz.from_fftmatvec(str(tmp_path / "b"), layout="time-major", dtype=np.float32)
    assert back.dtype == np.float32 and np.array_equal(back.blocks, blocks.astype(np.float32))


def test_written_files_follow_the_format(tmp_path):
    rng = np.random.default_rng()
    blocks = rng.standard_normal((5, 2, 3)).astype(np.float32)  # written as float64
    BlockToeplitz(blocks).save_fftmatvec(tmp_path, prefix="P_")
    lines = (tmp_path / "meta_adj").read_text().split("\n")
    assert lines[:9] == ["2", "3", "5", "P_", ".h5", "1", "0", "1", "0"]
    for r in range(2):
        with h5py.File(tmp_path / f"P_{r:06d}.h5", "r") as f:
            ds = f["vec"]
            assert ds.dtype == np.float64 and ds.shape == (15,)
            assert (ds.attrs["reindex"], ds.attrs["n_param"], ds.attrs["param_steps"]) == (1, 3, 5)
            v = ds[...]
        for m in range(3):
            for t in range(5):
                assert v[m * 5 + t] == blocks[t, r, m]


@pytest.mark.parametrize("case", ["beside", "adj-subfolder", "matrix-root"])
def test_reads_files_written_by_h5py(tmp_path, case):
    rng = np.random.default_rng()
    blocks = rng.standard_normal((6, 3, 4))
    if case == "beside":  # nine lines, prefix beside meta_adj
        _write_matrix_h5py(tmp_path, blocks, "F_")
        where = tmp_path
    elif case == "adj-subfolder":  # bare prefix, rows in adj/, whitespace, no checksum line
        meta = "  3 \n4\r\n\n6\n  vec_  \n.h5\n1\n0\n1\n"
        _write_matrix_h5py(tmp_path, blocks, "vec_", meta_lines=meta, row_dir=tmp_path / "adj")
        where = str(tmp_path)
    else:  # FFTMatvec's own tree: <root>/binary/meta_adj with prefix adj/vec_
        _write_matrix_h5py(tmp_path / "binary", blocks, "adj/vec_",
                           meta_lines="3\n4\n6\nadj/vec_\n.h5\n1\n0\n1\n")
        where = tmp_path
    op = BlockToeplitz.from_fftmatvec(where)
    assert np.array_equal(op.blocks, blocks)
    m = rng.standard_normal((4, 6))  # space-major (Nm, Nt)
    assert rel(op.matvec(m), to_space_major(ref_matvec(blocks, m.T))) < 1e-12


def test_matvec_of_vector_files(tmp_path):
    rng = np.random.default_rng()
    blocks = rng.standard_normal((5, 2, 3))
    _write_matrix_h5py(tmp_path / "F", blocks, "F_")
    x = rng.standard_normal((3, 5))
    with h5py.File(tmp_path / "x.h5", "w") as f:
        ds = f.create_dataset("vec", data=x.reshape(-1))
        ds.attrs["n_param"], ds.attrs["param_steps"], ds.attrs["reindex"] = 3, 5, 1
    xr, space = read_vector(tmp_path / "x.h5")
    assert space == "param" and np.array_equal(xr, x)
    y = BlockToeplitz.from_fftmatvec(tmp_path / "F").matvec(xr)
    write_vector(tmp_path / "out" / "y.h5", y, space="obs")
    with h5py.File(tmp_path / "out" / "y.h5", "r") as f:
        ds = f["vec"]
        assert (ds.attrs["n_obs"], ds.attrs["obs_steps"], ds.attrs["reindex"]) == (2, 5, 1)
        assert "n_param" not in ds.attrs
        assert rel(ds[...].reshape(2, 5), to_space_major(ref_matvec(blocks, x.T))) < 1e-12
    yr, space = read_vector(str(tmp_path / "out" / "y.h5"))
    assert space == "obs" and np.array_equal(yr, y)
    write_vector(tmp_path / "p.h5", x.astype(np.float32))  # default space="param"
    assert read_vector(tmp_path / "p.h5")[1] == "param"


def test_file_errors_name_the_file(tmp_path):
    rng = np.random.default_rng()
    blocks = rng.standard_normal((4, 2, 3))
    with pytest.raises(FileNotFoundError, match="directory"):
        BlockToeplitz.from_fftmatvec(tmp_path / "absent")
    with pytest.raises(ValueError, match="meta_adj"):
        BlockToeplitz.from_fftmatvec(tmp_path)  # exists, no meta_adj
    # missing block row
    _write_matrix_h5py(tmp_path / "m1", blocks, "F_")
    os.remove(tmp_path / "m1" / "F_000001.h5")
    with pytest.raises(ValueError, match="F_000001.h5"):
        BlockToeplitz.from_fftmatvec(tmp_path / "m1")
    # dataset of the wrong length
    _write_matrix_h5py(tmp_path / "m2", blocks, "F_")
    _write_row(tmp_path / "m2" / "F_000000.h5", np.zeros(11), 3, 4)
    with pytest.raises(ValueError, match=r"F_000000.h5.*11 values"):
        BlockToeplitz.from_fftmatvec(tmp_path / "m2")
    # attributes that disagree with meta_adj
    _write_matrix_h5py(tmp_path / "m3", blocks, "F_")
    _write_row(tmp_path / "m3" / "F_000001.h5", np.zeros(12), 4, 3)
    with pytest.raises(ValueError, match=r"F_000001.h5.*n_param"):
        BlockToeplitz.from_fftmatvec(tmp_path / "m3")
    # a bad meta line
    _write_matrix_h5py(tmp_path / "m4", blocks, "F_", meta_lines="2\nthree\n4\nF_\n.h5\n1\n0\n1\n0\n")
    with pytest.raises(ValueError, match=r"meta_adj.*Nm"):
        BlockToeplitz.from_fftmatvec(tmp_path / "m4")
    _write_matrix_h5py(tmp_path / "m5", blocks, "F_", meta_lines="2\n3\n4\nF_\n.h5\n")
    with pytest.raises(ValueError, match="nine lines"):
        BlockToeplitz.from_fftmatvec(tmp_path / "m5")
    # vectors
    with pytest.raises(FileNotFoundError, match="path"):
        read_vector(tmp_path / "nope.h5")
    with h5py.File(tmp_path / "bare.h5", "w") as f:
        f.create_dataset("vec", data=np.zeros(6))
    with pytest.raises(ValueError, match=r"bare.h5.*n_param"):
        read_vector(tmp_path / "bare.h5")
    with h5py.File(tmp_path / "short.h5", "w") as f:
        ds = f.create_dataset("vec", data=np.zeros(5))
        ds.attrs["n_obs"], ds.attrs["obs_steps"] = 2, 3
    with pytest.raises(ValueError, match=r"short.h5.*5 values"):
        read_vector(tmp_path / "short.h5")
    with h5py.File(tmp_path / "novec.h5", "w") as f:
        f.create_dataset("other", data=np.zeros(6))
    with pytest.raises(ValueError, match=r"novec.h5.*'vec'"):
        read_vector(tmp_path / "novec.h5")
    (tmp_path / "text.h5").write_text("not hdf5")
    with pytest.raises(ValueError, match="text.h5"):
        read_vector(tmp_path / "text.h5")


# ---- bad input -----------------------------------------------------------------------------------------

def test_bad_construction():
    rng = np.random.default_rng()
    with pytest.raises(ValueError, match="'blocks'"):
        BlockToeplitz(rng.standard_normal((3, 2)))
    with pytest.raises(ValueError, match="'blocks'"):
        BlockToeplitz(np.zeros((0, 2, 2)))
    with pytest.raises(ValueError, match="'blocks'"):
        BlockToeplitz(np.zeros((3, 2, 0)))
    with pytest.raises(TypeError, match="'blocks'"):
        BlockToeplitz(np.zeros((3, 2, 2), dtype=np.int64))
    with pytest.raises(TypeError, match="'blocks'"):
        BlockToeplitz(np.zeros((3, 2, 2), dtype=np.complex128))
    with pytest.raises(ValueError, match="'layout'"):
        BlockToeplitz(np.zeros((3, 2, 2)), layout="tosi")
    with pytest.raises(ValueError, match="'layout'"):
        BlockToeplitz(np.zeros((3, 2, 2))).to_dense(layout="soti")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_bad_vectors(layout):
    rng = np.random.default_rng()
    nt, nd, nm = 5, 2, 3
    op = BlockToeplitz(rng.standard_normal((nt, nd, nm)), layout=layout)
    good_m = lay(rng.standard_normal((nt, nm)), layout)
    good_d = lay(rng.standard_normal((nt, nd)), layout)
    for bad in [rng.standard_normal(nt * nm + 1), rng.standard_normal((nt, nm, 2, 2)),
                lay(rng.standard_normal((nt + 1, nm)), layout), lay(rng.standard_normal((nt, nd)), layout),
                good_m.T, np.zeros(good_m.shape + (0,))]:
        with pytest.raises(ValueError, match="'m'"):
            op.matvec(bad)
    with pytest.raises(ValueError, match="'d'"):
        op.rmatvec(good_m)
    with pytest.raises(TypeError, match="'m'"):
        op.matvec(good_m.astype(np.float32))
    with pytest.raises(TypeError, match="'m'"):
        op.matvec(good_m.astype(np.int32))
    with pytest.raises(TypeError, match="'d'"):
        op.rmatvec(good_d.astype(np.complex128))
    with pytest.raises(TypeError, match="'m'"):
        op.matvec(None)
    with pytest.raises(ValueError, match="'dd'"):
        op.vjp(good_m, good_m)
    with pytest.raises(ValueError, match="'dd'"):
        op.vjp(good_m[..., None].repeat(2, axis=-1), good_d[..., None].repeat(3, axis=-1))
    with pytest.raises(ValueError, match="'dd'"):
        op.vjp(good_m, good_d[..., None])


def test_bad_lti():
    rng = np.random.default_rng()
    A, B, C, D = (rng.standard_normal(s) for s in [(3, 3), (3, 4), (2, 3), (2, 4)])
    BlockToeplitz.from_lti(A, B, C, 4, D=D)  # fine
    with pytest.raises(ValueError, match="'A'"):
        BlockToeplitz.from_lti(A[:2], B, C, 4)
    with pytest.raises(ValueError, match="'A'"):
        BlockToeplitz.from_lti(A[0], B, C, 4)
    with pytest.raises(ValueError, match="'B'"):
        BlockToeplitz.from_lti(A, B[:2], C, 4)
    with pytest.raises(ValueError, match="'C'"):
        BlockToeplitz.from_lti(A, B, C[:, :2], 4)
    with pytest.raises(ValueError, match="'D'"):
        BlockToeplitz.from_lti(A, B, C, 4, D=D.T)
    with pytest.raises(ValueError, match="'nt'"):
        BlockToeplitz.from_lti(A, B, C, 0)
    with pytest.raises(TypeError, match="'nt'"):
        BlockToeplitz.from_lti(A, B, C, 2.5)
    with pytest.raises(TypeError, match="'B'"):
        BlockToeplitz.from_lti(A, B.astype(np.float32), C, 4)
    with pytest.raises(TypeError, match="'C'"):
        BlockToeplitz.from_lti(A, B, C.astype(np.int64), 4)
    with pytest.raises(ValueError, match="'layout'"):
        BlockToeplitz.from_lti(A, B, C, 4, layout="x")


def test_bad_file_arguments(tmp_path):
    op = BlockToeplitz(np.ones((2, 1, 1)))
    with pytest.raises(ValueError, match="'prefix'"):
        op.save_fftmatvec(tmp_path, prefix="")
    with pytest.raises(TypeError, match="'directory'"):
        op.save_fftmatvec(3)
    with pytest.raises(ValueError, match="'layout'"):
        BlockToeplitz.from_fftmatvec(tmp_path, layout="soti")
    with pytest.raises(ValueError, match="'space'"):
        write_vector(tmp_path / "v.h5", np.zeros((2, 3)), space="params")
    with pytest.raises(ValueError, match="'x'"):
        write_vector(tmp_path / "v.h5", np.zeros(6))
    with pytest.raises(TypeError, match="'x'"):
        write_vector(tmp_path / "v.h5", np.zeros((2, 3), dtype=np.int64))
    with pytest.raises(TypeError, match="'path'"):
        read_vector(None)


def test_info_reports_hdf5():
    assert strux.info()["hdf5"] is True


def test_thread_counts_and_concurrent_calls_agree():
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng()
    blocks = rng.standard_normal((13, 3, 40))
    op = BlockToeplitz(blocks)
    ms = [rng.standard_normal((13, 40, r)) for r in (1, 2, 3, 1, 5, 2)]
    refs = [ref_matvec(blocks, m) for m in ms]
    try:
        for n in (1, 2, 3):
            strux.set_num_threads(n)
            assert all(rel(op.matvec(m), r) < 1e-12 for m, r in zip(ms, refs))
    finally:
        strux.set_num_threads(0)
    # The plan is shared by threads (the GIL is released): results must not mix.
    with ThreadPoolExecutor(4) as ex:
        outs = list(ex.map(op.matvec, ms * 4))
    assert all(rel(o, r) < 1e-12 for o, r in zip(outs, refs * 4))
