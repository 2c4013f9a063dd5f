"""Contract audit (DESIGN.md fftconv, toeplitz): cases found where the CPU path deviated."""
import numpy as np
import pytest

import strux
from ref_fftconv import ref_fftconv, ref_fftconv_vjp
from ref_toeplitz import ref_matvec, ref_rmatvec


def rel(a, ref):
    a = np.asarray(a, dtype=np.float64)
    return np.linalg.norm(a - ref) / max(np.linalg.norm(ref), 1e-300)


# ---- fftconv: "a float32 k with float16/bfloat16 u is allowed" (DESIGN.md fftconv) ------------------

@pytest.mark.parametrize("mode", ["causal", "circular"])
@pytest.mark.parametrize("gated", [False, True])
def test_fftconv_float16_u_with_float32_k(mode, gated):
    rng = np.random.default_rng()
    B, H, L, Lk = 2, 3, 31, 7
    u = rng.standard_normal((B, H, L)).astype(np.float16)
    k = rng.standard_normal((H, Lk)).astype(np.float32)
    pre = rng.standard_normal((B, H, L)).astype(np.float16) if gated else None
    post = rng.standard_normal((B, H, L)).astype(np.float16) if gated else None
    skip = rng.standard_normal(H).astype(np.float16) if gated else None
    y = strux.fftconv(u, k, mode=mode, pregate=pre, postgate=post, skip=skip)
    assert y.dtype == np.float16 and y.shape == u.shape
    ref = ref_fftconv(u, k, mode, pre, post, skip)
    assert rel(y, ref) < 2e-3
    # the arithmetic is float32: the same as the all-float32 call, rounded once to float16
    f32 = [None if a is None else a.astype(np.float32) for a in (u, pre, post, skip)]
    y32 = strux.fftconv(f32[0], k, mode=mode, pregate=f32[1], postgate=f32[2], skip=f32[3])
    np.testing.assert_array_equal(y, y32.astype(np.float16))


@pytest.mark.parametrize("mode", ["causal", "circular"])
def test_fftconv_vjp_float16_u_with_float32_k(mode):
    rng = np.random.default_rng()
    B, H, L, Lk = 2, 3, 17, 5
    u = rng.standard_normal((B, H, L)).astype(np.float16)
    k = rng.standard_normal((H, Lk)).astype(np.float32)
    skip = rng.standard_normal(H).astype(np.float16)
    dy = rng.standard_normal((B, H, L)).astype(np.float16)
    du, dk, dpre, dpost, dskip = strux.fftconv_vjp(dy, u, k, mode=mode, skip=skip)
    assert du.dtype == np.float16 and dskip.dtype == np.float16
    assert dk.dtype == np.float32 and dk.shape == k.shape  # each gradient in its input's dtype
    assert dpre is None and dpost is None
    rdu, rdk, _, _, rdskip = ref_fftconv_vjp(dy, u, k, mode, None, None, skip)
    assert rel(du, rdu) < 2e-3 and rel(dk, rdk) < 1e-5 and rel(dskip, rdskip) < 2e-3


def test_fftconv_mixed_dtypes_still_rejected():
    rng = np.random.default_rng()
    u = rng.standard_normal((1, 2, 8))
    k = rng.standard_normal((2, 3))
    with pytest.raises(TypeError, match="'k'"):
        strux.fftconv(u, k.astype(np.float32))          # float64 u: k must be float64
    with pytest.raises(TypeError, match="'k'"):
        strux.fftconv(u.astype(np.float16), k)          # float64 k with float16 u
    with pytest.raises(TypeError, match="'k'"):
        strux.fftconv(u.astype(np.float32), k.astype(np.float16))
    with pytest.raises(TypeError, match="'pregate'"):
        strux.fftconv(u.astype(np.float16), k.astype(np.float32), pregate=u)


# ---- toeplitz: "the result dtype stays the dtype of the vectors" -----------------------------------

@pytest.mark.parametrize("layout", ["time-major", "space-major"])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_toeplitz_flat_vectors_keep_their_dtype(layout, dtype):
    rng = np.random.default_rng()
    nt, nd, nm = 5, 2, 3
    blocks = rng.standard_normal((nt, nd, nm)).astype(dtype)
    op = strux.BlockToeplitz(blocks, layout=layout)
    m = rng.standard_normal((nt, nm)).astype(dtype)
    d = rng.standard_normal((nt, nd)).astype(dtype)
    mf = (m if layout == "time-major" else m.T).ravel()
    df = (d if layout == "time-major" else d.T).ravel()
    tol = 2e-3 if dtype == np.float16 else 1e-5 if dtype == np.float32 else 1e-12
    for y, ref in ((op.matvec(mf), ref_matvec(blocks, m)), (op @ mf, ref_matvec(blocks, m)),
                   (op.rmatvec(df), ref_rmatvec(blocks, d))):
        assert y.dtype == dtype and y.ndim == 1
        assert rel(y, (ref if layout == "time-major" else ref.T).ravel()) < tol
    # the shaped and the flat forms agree exactly
    shaped = op.matvec(m if layout == "time-major" else m.T)
    np.testing.assert_array_equal(op.matvec(mf), shaped.ravel())


def test_toeplitz_float32_operator_float64_flat_vector():
    rng = np.random.default_rng()
    blocks = rng.standard_normal((4, 2, 3)).astype(np.float32)
    op = strux.BlockToeplitz(blocks)
    m = rng.standard_normal((4, 3))
    y = op.matvec(m.ravel())
    assert y.dtype == np.float64
    assert rel(y, ref_matvec(blocks, m).ravel()) < 1e-5


def test_toeplitz_flat_python_list():
    """scipy's flat form as a Python list, like any LinearOperator takes it."""
    rng = np.random.default_rng()
    blocks = rng.standard_normal((4, 2, 3))
    op = strux.BlockToeplitz(blocks)
    m, d = rng.standard_normal((4, 3)), rng.standard_normal((4, 2))
    assert rel(op.matvec(m.ravel().tolist()), ref_matvec(blocks, m).ravel()) < 1e-12
    assert rel(op.rmatvec(d.ravel().tolist()), ref_rmatvec(blocks, d).ravel()) < 1e-12


def test_toeplitz_flat_bfloat16_vectors_keep_their_dtype():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng()
    blocks = rng.standard_normal((4, 2, 3)).astype(ml_dtypes.bfloat16)
    op = strux.BlockToeplitz(blocks)
    m = rng.standard_normal((4, 3)).astype(ml_dtypes.bfloat16)
    y = op.matvec(m.ravel())
    assert y.dtype == m.dtype
    assert rel(y.astype(np.float64), ref_matvec(blocks.astype(np.float64), m.astype(np.float64)).ravel()) < 2e-2


def test_fftconv_bfloat16_u_with_float32_k():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng()
    u = rng.standard_normal((2, 3, 11)).astype(ml_dtypes.bfloat16)
    k = rng.standard_normal((3, 4)).astype(np.float32)
    y = strux.fftconv(u, k)
    assert y.dtype == u.dtype
    assert rel(y.astype(np.float64), ref_fftconv(u.astype(np.float64), k)) < 1e-2
