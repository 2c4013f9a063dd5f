"""fftconv vs float64 direct sums (ref_fftconv.py): forward, vjp, dtypes, strides, errors."""
import numpy as np
import pytest

import strux
from ref_fftconv import ref_fftconv, ref_fftconv_jvp, ref_fftconv_vjp

TOL = {np.float32: 1e-5, np.float64: 1e-12}

# (B, H, L, Lk): sizes 1, Lk > L, Lk == 1, prime L, odd sizes
CAUSAL = [(1, 1, 1, 1), (1, 1, 1, 4), (2, 3, 97, 97), (2, 3, 97, 13), (3, 2, 16, 40), (1, 1, 50, 1),
          (2, 4, 31, 31), (3, 1, 9, 2)]
CIRCULAR = [(1, 1, 1, 1), (2, 3, 97, 97), (2, 3, 97, 13), (3, 2, 16, 1), (2, 4, 31, 30)]
CASES = [("causal", s) for s in CAUSAL] + [("circular", s) for s in CIRCULAR]
GATES = [(p, q, s) for p in (False, True) for q in (False, True) for s in (False, True)]


def rel(a, ref, scale=None):
    """|a - ref| / |scale| (scale defaults to ref). Pass the reference evaluated on the inputs'
    absolute values as scale where terms can cancel (k*u + skip*u with skip ~ -k): rounding
    errors are relative to the terms, not to their sum."""
    a = np.asarray(a, dtype=np.float64)
    return np.linalg.norm(a - ref) / max(np.linalg.norm(ref if scale is None else scale), 1e-300)


def _abs(*xs):
    return [None if x is None else np.abs(x) for x in xs]


def make(rng, shape, gates, dtype):
    B, H, L, Lk = shape
    u = rng.standard_normal((B, H, L)).astype(dtype)
    k = rng.standard_normal((H, Lk)).astype(dtype)
    pre = rng.standard_normal((B, H, L)).astype(dtype) if gates[0] else None
    post = rng.standard_normal((B, H, L)).astype(dtype) if gates[1] else None
    skip = rng.standard_normal(H).astype(dtype) if gates[2] else None
    return u, k, pre, post, skip


def gate_id(g):
    return "pre%d-post%d-skip%d" % g


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("gates", GATES, ids=gate_id)
@pytest.mark.parametrize("mode,shape", CASES)
def test_forward_matches_direct_sum(mode, shape, gates, dtype):
    rng = np.random.default_rng()
    u, k, pre, post, skip = make(rng, shape, gates, dtype)
    y = strux.fftconv(u, k, mode=mode, pregate=pre, postgate=post, skip=skip)
    assert y.dtype == dtype and y.shape == u.shape
    scale = ref_fftconv(*_abs(u, k), mode, *_abs(pre, post, skip))
    assert rel(y, ref_fftconv(u, k, mode, pre, post, skip), scale) < TOL[dtype]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("gates", GATES, ids=gate_id)
@pytest.mark.parametrize("mode,shape", CASES)
def test_vjp_matches_reference_adjoint(mode, shape, gates, dtype):
    rng = np.random.default_rng()
    u, k, pre, post, skip = make(rng, shape, gates, dtype)
    dy = rng.standard_normal(u.shape).astype(dtype)
    got = strux.fftconv_vjp(dy, u, k, mode=mode, pregate=pre, postgate=post, skip=skip)
    want = ref_fftconv_vjp(dy, u, k, mode, pre, post, skip)
    scales = ref_fftconv_vjp(*_abs(dy, u, k), mode, *_abs(pre, post, skip))
    inputs = (u, k, pre, post, skip)
    for name, g, w, sc, x in zip(("du", "dk", "dpregate", "dpostgate", "dskip"), got, want, scales, inputs):
        if x is None:
            assert g is None, name
            continue
        assert g.dtype == dtype and g.shape == x.shape, name
        assert rel(g, w, sc) < 3 * TOL[dtype], name
    if mode == "causal" and shape[3] > shape[2]:
        assert np.all(got[1][:, shape[2]:] == 0), "taps s >= L have zero gradient"


@pytest.mark.parametrize("gates", GATES, ids=gate_id)
@pytest.mark.parametrize("mode,shape", [("causal", (2, 3, 11, 15)), ("causal", (2, 2, 13, 5)),
                                        ("circular", (2, 3, 13, 7))])
def test_reference_adjoint_is_the_adjoint(mode, shape, gates):
    """<vjp(dy)_i, dx_i> == <dy, J_i dx_i> for each input i (checks the reference itself)."""
    rng = np.random.default_rng()
    x = make(rng, shape, gates, np.float64)
    dy = rng.standard_normal(x[0].shape)
    grads = ref_fftconv_vjp(dy, x[0], x[1], mode, *x[2:])
    for i, xi in enumerate(x):
        if xi is None:
            continue
        dx = [None if a is None else np.zeros_like(a) for a in x]
        dx[i] = rng.standard_normal(xi.shape)
        jv = ref_fftconv_jvp(x[0], x[1], mode, *x[2:], *dx)
        lhs, rhs = np.sum(grads[i] * dx[i]), np.sum(dy * jv)
        assert abs(lhs - rhs) <= 1e-10 * (abs(lhs) + abs(rhs) + 1), i


def test_strux_vjp_dot_product_against_jvp():
    """Independent of ref_fftconv_vjp: strux gradients vs the directional derivative."""
    rng = np.random.default_rng()
    for mode, shape in (("causal", (2, 3, 37, 50)), ("circular", (2, 3, 37, 20))):
        x = make(rng, shape, (True, True, True), np.float64)
        dy = rng.standard_normal(x[0].shape)
        grads = strux.fftconv_vjp(dy, x[0], x[1], mode=mode, pregate=x[2], postgate=x[3], skip=x[4])
        for i, xi in enumerate(x):
            dx = [np.zeros_like(a) for a in x]
            dx[i] = rng.standard_normal(xi.shape)
            jv = ref_fftconv_jvp(x[0], x[1], mode, *x[2:], *dx)
            lhs, rhs = np.sum(grads[i] * dx[i]), np.sum(dy * jv)
            assert abs(lhs - rhs) <= 1e-11 * (abs(lhs) + abs(rhs)), (mode, i)


def test_long_sequence():
    rng = np.random.default_rng()
    for mode, Lk in (("causal", 1000), ("causal", 77), ("circular", 1000)):
        u, k, pre, post, skip = make(rng, (2, 3, 1000, Lk), (True, True, True), np.float32)
        y = strux.fftconv(u, k, mode=mode, pregate=pre, postgate=post, skip=skip)
        scale = ref_fftconv(*_abs(u, k), mode, *_abs(pre, post, skip))
        assert rel(y, ref_fftconv(u, k, mode, pre, post, skip), scale) < 1e-5


@pytest.mark.parametrize("mode", ["causal", "circular"])
def test_non_contiguous_inputs(mode):
    rng = np.random.default_rng()
    B, H, L, Lk = 3, 4, 23, 9
    u = rng.standard_normal((2 * B, H, 3 * L))[::2, :, ::3]          # stepped slices
    k = rng.standard_normal((Lk, H)).T                                # transpose
    pre = np.transpose(rng.standard_normal((L, H, B)), (2, 1, 0))    # reversed axes
    post = rng.standard_normal((B, H, L))[:, ::-1, :]                 # negative stride
    skip = rng.standard_normal(2 * H)[::2]
    dy = rng.standard_normal((B, L, H)).transpose(0, 2, 1)
    for a in (u, k, pre, post, skip, dy):
        assert not a.flags.c_contiguous
    y = strux.fftconv(u, k, mode=mode, pregate=pre, postgate=post, skip=skip)
    assert rel(y, ref_fftconv(u, k, mode, pre, post, skip)) < 1e-12
    got = strux.fftconv_vjp(dy, u, k, mode=mode, pregate=pre, postgate=post, skip=skip)
    for g, w in zip(got, ref_fftconv_vjp(dy, u, k, mode, pre, post, skip)):
        assert rel(g, w) < 1e-12


@pytest.mark.parametrize("mode", ["causal", "circular"])
def test_float16_computed_in_float32(mode):
    rng = np.random.default_rng()
    u, k, pre, post, skip = make(rng, (2, 3, 40, 12), (True, True, True), np.float16)
    y = strux.fftconv(u, k, mode=mode, pregate=pre, postgate=post, skip=skip)
    assert y.dtype == np.float16
    ref = ref_fftconv(u, k, mode, pre, post, skip)
    # only the final rounding to float16 (2^-11 relative) separates it from the float64 sum
    assert rel(y, ref) < 2e-3
    y32 = strux.fftconv(*(a.astype(np.float32) for a in (u, k)), mode=mode,
                        pregate=pre.astype(np.float32), postgate=post.astype(np.float32),
                        skip=skip.astype(np.float32))
    np.testing.assert_array_equal(y, y32.astype(np.float16))
    dy = rng.standard_normal(u.shape).astype(np.float16)
    got = strux.fftconv_vjp(dy, u, k, mode=mode, pregate=pre, postgate=post, skip=skip)
    for g, w in zip(got, ref_fftconv_vjp(dy, u, k, mode, pre, post, skip)):
        assert g.dtype == np.float16
        assert rel(g, w) < 2e-3


def test_bfloat16_if_available():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng()
    u, k, _, _, _ = make(rng, (2, 3, 20, 5), (False, False, False), np.float32)
    ub, kb = u.astype(ml_dtypes.bfloat16), k.astype(ml_dtypes.bfloat16)
    y = strux.fftconv(ub, kb)
    assert y.dtype == ub.dtype
    assert rel(y.astype(np.float64), ref_fftconv(ub.astype(np.float64), kb.astype(np.float64))) < 1e-2


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nan_propagates(dtype):
    FFT = {"solver": "fft"}  # the FFT solver spreads a non-finite sample over its row; direct: where taps reach
    rng = np.random.default_rng()
    u, k, pre, post, skip = make(rng, (2, 3, 30, 8), (False, False, False), dtype)
    u[1, 2, 7] = np.nan
    y = strux.fftconv(u, k, options=FFT)
    assert np.all(np.isnan(y[1, 2, 7:]))
    assert np.all(np.isfinite(y[0])) and np.all(np.isfinite(y[1, :2]))  # other rows unaffected
    yc = strux.fftconv(u, k, mode="circular", options=FFT)
    assert np.all(np.isnan(yc[1, 2]))
    u[1, 2, 7] = 1.0
    k2 = k.copy()
    k2[0, 3] = np.nan
    assert np.all(np.isnan(strux.fftconv(u, k2, options=FFT)[:, 0, 3:]))
    skip = np.ones(3, dtype)
    skip[1] = np.nan
    assert np.all(np.isnan(strux.fftconv(u, k, skip=skip, options=FFT)[:, 1]))
    post = np.ones_like(u)
    post[0, 0, 0] = np.nan
    assert np.isnan(strux.fftconv(u, k, postgate=post, options=FFT)[0, 0, 0])
    dy = np.zeros_like(u)
    dy[0, 1, 5] = np.nan
    du, dk, *_ = strux.fftconv_vjp(dy, u, k, options=FFT)
    assert np.all(np.isnan(du[0, 1, :6])) and np.all(np.isnan(dk[1]))


def test_object_api_matches_function():
    rng = np.random.default_rng()
    u, k, pre, post, skip = make(rng, (3, 4, 29, 10), (True, True, True), np.float64)
    for mode in ("causal", "circular"):
        op = strux.FFTConv(k, 29, mode=mode)
        assert op.nfft == (0 if op.solver == "direct" else 29 if mode == "circular" else 40)
        assert "FFTConv(" in repr(op)
        np.testing.assert_allclose(op(u, pregate=pre, postgate=post, skip=skip),
                                   ref_fftconv(u, k, mode, pre, post, skip), rtol=0, atol=1e-12)
        # other batch sizes reuse the plan
        np.testing.assert_allclose(op(u[:1]), ref_fftconv(u[:1], k, mode), rtol=0, atol=1e-12)
        dy = rng.standard_normal(u.shape)
        for g, w in zip(op.vjp(dy, u, skip=skip), strux.fftconv_vjp(dy, u, k, mode=mode, skip=skip)):
            if w is None:
                assert g is None
            else:
                np.testing.assert_array_equal(g, w)
    with pytest.raises(TypeError, match="'u'"):
        strux.FFTConv(k, 29)(u.astype(np.float32))
    with pytest.raises(ValueError, match="'u'"):
        strux.FFTConv(k, 28)(u)
    with pytest.raises(ValueError, match="'L'"):
        strux.FFTConv(k, 0)
    with pytest.raises(ValueError, match="'k'"):
        strux.FFTConv(k, 5, mode="circular")


def _bad(exc, name, fn, *a, **kw):
    with pytest.raises(exc, match=f"'{name}'"):
        fn(*a, **kw)


def test_bad_inputs():
    rng = np.random.default_rng()
    u = rng.standard_normal((2, 3, 10))
    k = rng.standard_normal((3, 4))
    f, vjp = strux.fftconv, strux.fftconv_vjp
    _bad(ValueError, "u", f, u[0], k)                                   # rank
    _bad(ValueError, "k", f, u, k[0])
    _bad(ValueError, "k", f, u, k[None])
    _bad(ValueError, "k", f, u, rng.standard_normal((4, 4)))            # H mismatch
    _bad(ValueError, "pregate", f, u, k, pregate=u[:, :, :9])
    _bad(ValueError, "postgate", f, u, k, postgate=u[0])
    _bad(ValueError, "skip", f, u, k, skip=np.ones(4))
    _bad(ValueError, "skip", f, u, k, skip=np.ones((3, 1)))
    _bad(ValueError, "k", f, u, rng.standard_normal((3, 11)), mode="circular")
    _bad(ValueError, "mode", f, u, k, mode="full")
    _bad(ValueError, "mode", f, u, k, mode=None)
    _bad(ValueError, "u", f, np.zeros((0, 3, 10)), k)                   # empty sizes
    _bad(ValueError, "u", f, np.zeros((2, 3, 0)), k)
    _bad(ValueError, "k", f, u, np.zeros((3, 0)))
    _bad(TypeError, "u", f, u.astype(np.int64), k)                      # dtypes
    _bad(TypeError, "u", f, u.astype(np.complex128), k)
    _bad(TypeError, "k", f, u, k.astype(np.float32))
    _bad(TypeError, "k", f, u, k.astype(np.int32))
    _bad(TypeError, "pregate", f, u, k, pregate=u.astype(np.float32))
    _bad(TypeError, "postgate", f, u, k, postgate=u.astype(np.float32))
    _bad(TypeError, "skip", f, u, k, skip=np.ones(3, np.float32))
    _bad(TypeError, "u", f, "abc", k)
    _bad(TypeError, "dy", vjp, u.astype(np.float32), u, k)
    _bad(ValueError, "dy", vjp, u[:, :, :5], u, k)
    _bad(ValueError, "mode", vjp, u, u, k, mode="Causal")
    _bad(ValueError, "k", vjp, u, u, rng.standard_normal((3, 11)), mode="circular")
