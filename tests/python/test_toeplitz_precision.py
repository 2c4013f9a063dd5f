"""BlockToeplitz with a precision per phase (precision=, tol=) against the float64 loops of
ref_toeplitz.py, with tolerances from the error model (strux.toeplitz.error_estimate): every
configuration must stay under its bound, and a configuration that lowers a precision must show
an error of that precision's size (so a path that silently ran in double would fail too).
Also from_lti with sparse matrices and operators."""
import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, aslinearoperator

from strux import BlockToeplitz
from strux import toeplitz as T
from ref_toeplitz import ref_lti_blocks, ref_matvec, ref_rmatvec, to_space_major

CANDIDATES = T.precision_candidates()
DOUBLE = {k: "double" for k in ("broadcast", "fft", "product", "ifft", "reduce")}


def rel(a, ref):
    a = np.asarray(a, dtype=np.float64)
    return np.linalg.norm(a - ref) / max(np.linalg.norm(ref), 1e-300)


def name(c):
    return "-".join(c[k][0] for k in ("fft", "product", "ifft")) + "-" + c["fhat"]


def bound(c, dtype, nt, nd, nm):
    # the model's bound, plus the float64 reference's own rounding (another double product)
    return T.error_estimate(c, dtype, nt, nd, nm) + T.error_estimate(DOUBLE, np.float64, nt, nd, nm)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("c", CANDIDATES, ids=name)
def test_every_configuration_within_its_bound(c, dtype):
    rng = np.random.default_rng(7)
    nt, nd, nm = 40, 6, 20
    b = rng.standard_normal((nt, nd, nm)).astype(dtype)
    op = BlockToeplitz(b, precision=c)
    for R in (None, 3):
        m = rng.standard_normal((nt, nm) if R is None else (nt, nm, R)).astype(dtype)
        d = rng.standard_normal((nt, nd) if R is None else (nt, nd, R)).astype(dtype)
        y, x = op.matvec(m), op.rmatvec(d)
        assert y.dtype == dtype and x.dtype == dtype
        e_mv, e_rmv = rel(y, ref_matvec(b, m)), rel(x, ref_rmatvec(b, d))
        tol = bound(c, dtype, nt, nd, nm)
        assert e_mv <= tol and e_rmv <= tol, (e_mv, e_rmv, tol)
        # a lowered precision shows: the error is of the model's size, not far below it
        rms = T.error_estimate(c, dtype, nt, nd, nm, rms=True)
        if rms > 1e-12:
            assert min(e_mv, e_rmv) >= rms / 8, (e_mv, e_rmv, rms)


@pytest.mark.parametrize("layout", ["time-major", "space-major"])
@pytest.mark.parametrize("fhat", ["bfloat16", "float16"])
def test_half_spectrum_layouts_and_odd_sizes(layout, fhat):
    rng = np.random.default_rng(3)
    for nt, nd, nm, R in [(1, 1, 1, None), (7, 3, 5, 2), (13, 5, 3, None), (33, 1, 9, 4)]:
        b = rng.standard_normal((nt, nd, nm))
        op = BlockToeplitz(b, layout=layout, precision={"fhat": fhat, "ifft": "double"})
        m = rng.standard_normal((nt, nm) if R is None else (nt, nm, R))
        d = rng.standard_normal((nt, nd) if R is None else (nt, nd, R))
        lay = (lambda v: v) if layout == "time-major" else (lambda v: np.ascontiguousarray(to_space_major(v)))
        tol = bound(op.precision, np.float64, nt, nd, nm)
        assert rel(op.matvec(lay(m)), lay(ref_matvec(b, m))) <= tol
        assert rel(op.rmatvec(lay(d)), lay(ref_rmatvec(b, d))) <= tol


def test_half_spectrum_scaling_keeps_small_blocks():
    # blocks of size 1e-9: a float16 F-hat without its power-of-two scale would underflow to 0
    rng = np.random.default_rng(4)
    b = 1e-9 * rng.standard_normal((20, 3, 4))
    m = rng.standard_normal((20, 4))
    op = BlockToeplitz(b, precision={"fhat": "float16"})
    assert rel(op.matvec(m), ref_matvec(b, m)) <= bound(op.precision, np.float64, 20, 3, 4)


def test_precision_attributes_and_spectrum():
    b = np.random.default_rng(0).standard_normal((8, 2, 3))
    plain = BlockToeplitz(b)
    assert plain.precision == {**DOUBLE, "fhat": "auto"}
    op = BlockToeplitz(b, precision="single")
    assert op.precision["fft"] == "single" and op.precision["fhat"] == "auto"
    half = BlockToeplitz(b.astype(np.float32), precision={"fhat": "bfloat16"})
    assert half.precision["product"] == "single"
    assert half._plan.spectrum_bytes * 2 == BlockToeplitz(b.astype(np.float32))._plan.spectrum_bytes
    with pytest.raises(ValueError, match="spectrum"):
        half._plan.spectrum()
    assert half.error_bound == T.error_estimate(half.precision, np.float32, 8, 2, 3)
    back = pickle.loads(pickle.dumps(half))
    assert back.precision == half.precision
    m = np.ones((8, 3), np.float32)
    np.testing.assert_array_equal(back.matvec(m), half.matvec(m))


def test_precision_errors():
    b = np.zeros((4, 2, 2))
    with pytest.raises(ValueError, match="'precision.fft'"):
        BlockToeplitz(b, precision={"fft": "half"})
    with pytest.raises(ValueError, match="'precision'"):
        BlockToeplitz(b, precision={"ffts": "single"})
    with pytest.raises(ValueError, match="'precision.fhat'"):
        BlockToeplitz(b, precision={"fhat": "float8"})
    with pytest.raises(ValueError, match="'precision.product'"):
        BlockToeplitz(b, precision={"fhat": "float16", "product": "double"})
    with pytest.raises(TypeError, match="'precision'"):
        BlockToeplitz(b, precision=3)
    with pytest.raises(ValueError, match="'tol'"):
        BlockToeplitz(b, precision="single", tol=1e-3)
    with pytest.raises(ValueError, match="'tol'"):
        BlockToeplitz(b, tol=1e-30)
    with pytest.raises(ValueError, match="'tol'"):
        BlockToeplitz(b, tol=-1.0)


@pytest.mark.parametrize("tol", [1e-2, 1e-3, 1e-5, 1e-7, 1e-12])
def test_tol_picks_the_cheapest_configuration_that_meets_it(tol):
    rng = np.random.default_rng(11)
    nt, nd, nm = 50, 5, 30
    b = rng.standard_normal((nt, nd, nm))
    op = BlockToeplitz(b, tol=tol)
    c = op.precision
    assert op.error_bound <= tol
    m, d = rng.standard_normal((nt, nm)), rng.standard_normal((nt, nd))
    assert rel(op.matvec(m), ref_matvec(b, m)) <= tol
    assert rel(op.rmatvec(d), ref_rmatvec(b, d)) <= tol
    # no candidate that meets tol moves fewer bytes
    cost = T.product_bytes(c, np.float64, nt, nd, nm)
    for other in CANDIDATES:
        if T.error_estimate(other, np.float64, nt, nd, nm) <= tol:
            assert T.product_bytes(other, np.float64, nt, nd, nm) >= cost
    if tol >= 1e-3:
        assert c["fhat"] != "auto"  # a 16-bit F-hat is predicted to be enough and is cheapest
    if tol <= 1e-12:
        assert c["product"] == "double"


def test_cost_model_orders_storage():
    args = (np.float32, 100, 50, 400)
    f16 = T.product_bytes({"fhat": "float16"}, *args)
    c64 = T.product_bytes({}, *args)
    c128 = T.product_bytes("double", *args)
    assert f16 < c64 < c128
    assert T.choose_precision(1e-3, *args, cuda=True)["fhat"] == "float16"
    # the GPU's 16-bit kernels stream F-hat per right-hand side: complex64 for R >= 2
    assert T.choose_precision(1e-3, *args, 2, cuda=True)["fhat"] == "auto"
    assert T.choose_precision(1e-3, *args, 2)["fhat"] == "float16"
    # on CUDA a phase in another precision than the product costs a conversion of the spectra
    mixed = {"fft": "double", "product": "single", "ifft": "double"}
    assert T.product_bytes(mixed, *args) > T.product_bytes("single", *args)


# ---- from_lti with sparse matrices and operators --------------------------------------------------

def _system(rng, ns, nd, nm):
    A = sp.random(ns, ns, density=0.2, random_state=1, format="csr") * 0.4 + sp.eye(ns) * 0.3
    B = sp.random(ns, nm, density=0.5, random_state=2, format="csr")
    C = rng.standard_normal((nd, ns))
    return A, B, C


@pytest.mark.parametrize("nd,nm", [(2, 5), (5, 2)])  # adjoint sweeps (Nd <= Nm) and forward sweeps
def test_from_lti_sparse(nd, nm):
    rng = np.random.default_rng(5)
    A, B, C = _system(rng, 12, nd, nm)
    D = rng.standard_normal((nd, nm))
    op = BlockToeplitz.from_lti(A, B, sp.csr_matrix(C), 9, D=D)
    ref = ref_lti_blocks(A.toarray(), B.toarray(), C, 9, D=D)
    np.testing.assert_allclose(op.blocks, ref, rtol=1e-12, atol=1e-12)
    # A as an operator (e.g. several time steps of a PDE), precision passed through
    Aop = aslinearoperator(A)
    op2 = BlockToeplitz.from_lti(Aop, B, C, 9, precision={"fft": "single"})
    np.testing.assert_allclose(op2.blocks, ref_lti_blocks(A.toarray(), B.toarray(), C, 9), rtol=1e-12, atol=1e-12)
    assert op2.precision["fft"] == "single"


def test_from_lti_sparse_dtype_and_errors():
    rng = np.random.default_rng(6)
    A, B, C = _system(rng, 6, 2, 3)
    op = BlockToeplitz.from_lti(A.astype(np.float32), B.astype(np.float32), C.astype(np.float32), 4)
    assert op.dtype == np.float32
    with pytest.raises(ValueError, match="'B'"):
        BlockToeplitz.from_lti(A, sp.eye(5, format="csr"), C, 4)
    with pytest.raises(ValueError, match="'A'"):
        BlockToeplitz.from_lti(sp.random(6, 5, format="csr"), B, C, 4)
    with pytest.raises(TypeError, match="'A'"):
        BlockToeplitz.from_lti(sp.eye(6, dtype=np.int64, format="csr"), B, C, 4)
    with pytest.raises(ValueError, match="'nt'"):
        BlockToeplitz.from_lti(A, B, C, 0)


def test_from_lti_torch_sparse():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    A, B, C = _system(rng, 10, 3, 4)
    At = torch.from_numpy(A.toarray()).to_sparse_csr()
    op = BlockToeplitz.from_lti(At, B, C, 6)
    np.testing.assert_allclose(op.blocks, ref_lti_blocks(A.toarray(), B.toarray(), C, 6), rtol=1e-12, atol=1e-12)


def test_linear_operator_type_is_accepted():
    assert issubclass(BlockToeplitz, LinearOperator)
