"""scan family against float64 time loops over dense matrices (ref_scan.py); gradients by the
dot-product test against the exact forward-mode derivative, and central finite differences
for the Fourier form."""
import numpy as np
import pytest

import strux
from ref_scan import (block_matrix, circ_matrix, dense_jvp, diag_matrix, naive_irfft, rand, re_dot,
                      ref_block_circulant_scan, ref_circulant_scan, ref_diag_scan, relerr)

TOL = {np.float32: 2e-5, np.float64: 1e-12, np.complex64: 2e-5, np.complex128: 1e-12, np.float16: 2e-2}


def rng():
    return np.random.default_rng()


@pytest.fixture(params=[(0, 64, True), (2, 64, True), (0, 64, False), (2, 64, False), (0, 0, True), (2, 0, True)],
                ids=["auto_block", "time_block_2", "auto_block_gemm", "time_block_2_gemm", "auto_block_fftw",
                     "time_block_2_fftw"])
def time_block(request):
    """Circulant pipelines run in blocks of time steps; 2 splits these small T into several
    blocks (carried state, checkpointed backward sweep); 0 = automatic (one block here).
    Short transforms go through the radix-2 FFT across rows (powers of two) or a GEMM with the
    DFT matrix by default; *_gemm turns the radix-2 kernel off, *_fftw forces FFTW."""
    steps, dft_max, radix2 = request.param
    strux._ext.scan_set_time_block(steps)
    strux._ext.scan_set_dft_gemm_max(dft_max)
    strux._ext.scan_set_dft_radix2(radix2)
    yield steps
    strux._ext.scan_set_time_block(0)
    strux._ext.scan_set_dft_gemm_max(64)
    strux._ext.scan_set_dft_radix2(True)


SHAPES = [(1, 1, 1), (2, 7, 13), (3, 5, 33), (1, 1, 4), (2, 9, 1)]


# ---- diag_scan ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("with_h0", [False, True])
def test_diag_scan_matches_loop(dtype, shape, with_h0):
    r = rng()
    a, b = rand(r, shape, dtype, 0.6), rand(r, shape, dtype)
    h0 = rand(r, (shape[0], shape[2]), dtype) if with_h0 else None
    h = strux.diag_scan(a, b, h0=h0)
    assert h.dtype == dtype and h.shape == shape
    assert relerr(h, ref_diag_scan(a, b, h0)) < TOL[dtype]


_SFX = {np.dtype(np.float32): "f", np.dtype(np.float64): "d", np.dtype(np.complex64): "cf",
        np.dtype(np.complex128): "cd"}


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("shape", [(1, 3001, 1), (1, 1024, 5), (1, 4099, 16), (2, 2053, 3)])
def test_diag_scan_few_channels_long_time(dtype, shape, threads):
    """Fewer (batch, channel chunk) tasks than threads and a long T: the solver "time-split"
    (chunked scan over time with carries; odd and prime T, segments of unequal length) and
    the default."""
    r = rng()
    a = r.uniform(0.5, 0.999, shape) * (np.exp(1j * r.uniform(-np.pi, np.pi, shape)) if np.dtype(dtype).kind == "c"
                                        else r.choice([-1.0, 1.0], shape))
    a, b = a.astype(dtype), rand(r, shape, dtype)
    h0 = rand(r, (shape[0], shape[2]), dtype)
    fwd = getattr(strux._ext, "scan_diag_fwd_" + _SFX[np.dtype(dtype)])
    old = strux.get_num_threads()
    strux.set_num_threads(threads)
    try:
        for solver in ("time-split", "rows", ""):
            for hh in (None, h0):
                h = np.empty_like(b)
                fwd(a, b, hh, h, solver)
                assert relerr(h, ref_diag_scan(a, b, hh)) < TOL[dtype]
        a[0, shape[1] // 2 + 1, 0] = np.nan  # a later segment: NaN from there on, only there
        h = np.empty_like(b)
        fwd(a, b, None, h, "time-split")
        assert np.isnan(h[0, shape[1] // 2 + 1:, 0]).all() and not np.isnan(h[0, :shape[1] // 2 + 1]).any()
        with pytest.raises(ValueError, match="'solver'"):
            fwd(a, b, None, h, "segments")
    finally:
        strux.set_num_threads(old)


def test_diag_scan_is_not_trivially_right():
    # a guard that the reference comparison can fail: a wrong h0 changes the result
    r = rng()
    a, b, h0 = rand(r, (2, 4, 3), np.float64, 0.8), rand(r, (2, 4, 3), np.float64), rand(r, (2, 3), np.float64)
    assert relerr(strux.diag_scan(a, b), ref_diag_scan(a, b, h0)) > 1e-3


def test_diag_scan_return_final():
    r = rng()
    a, b, h0 = rand(r, (2, 6, 5), np.complex128, 0.5), rand(r, (2, 6, 5), np.complex128), rand(r, (2, 5), np.complex128)
    h, last = strux.diag_scan(a, b, h0=h0, return_final=True)
    assert last.shape == (2, 5)
    np.testing.assert_array_equal(last, h[:, -1])
    assert relerr(last, ref_diag_scan(a, b, h0)[:, -1]) < 1e-12


def test_diag_scan_noncontiguous():
    r = rng()
    big = rand(r, (2, 14, 9), np.float64, 0.5)
    a = big[:, ::2, :]                                     # step in time
    b = rand(r, (9, 7, 2), np.float64).transpose(2, 1, 0)  # fully transposed view
    h0 = rand(r, (9, 2), np.float64).T
    assert not a.flags.c_contiguous and not b.flags.c_contiguous and not h0.flags.c_contiguous
    assert relerr(strux.diag_scan(a, b, h0=h0), ref_diag_scan(a, b, h0)) < 1e-12


def test_diag_scan_nan_propagates():
    a = np.full((1, 4, 3), 0.5)
    b = np.ones((1, 4, 3))
    b[0, 1, 2] = np.nan
    h = strux.diag_scan(a, b)
    assert np.isnan(h[0, 1:, 2]).all() and not np.isnan(h[0, 0]).any() and not np.isnan(h[0, :, :2]).any()
    ac = a.astype(np.complex64)
    ac[0, 2, 0] = np.nan
    hc = strux.diag_scan(ac, b.astype(np.complex64))
    assert np.isnan(hc[0, 2:, 0]).all() and not np.isnan(hc[0, :2, 0]).any()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_nan_or_inf_in_the_first_transition_gives_nan(dtype):
    """h_0 = a_0 h_{-1} + b_0 with h_{-1} = 0: IEEE makes NaN * 0 and Inf * 0 NaN, so a
    non-finite a_0 gives NaN even without h0 (as the plain loop of the formula does)."""
    for bad in (np.nan, np.inf):
        a = np.full((2, 4, 3), 0.5, dtype)
        b = np.ones((2, 4, 3), dtype)
        a[0, 0, 1] = bad
        h = strux.diag_scan(a, b)
        assert np.isnan(h[0, :, 1]).all() and not np.isnan(h[0, :, [0, 2]]).any() and not np.isnan(h[1]).any()
        if np.iscomplexobj(a):
            continue
        h = strux.circulant_scan(a, b)   # circ(a_0) has the bad value in every row
        assert np.isnan(h[0]).all() and not np.isnan(h[1]).any()
        ab = np.full((2, 4, 1, 1, 3), 0.2, dtype)
        ab[0, 0, 0, 0, 1] = bad
        h = strux.block_circulant_scan(ab, b)
        assert np.isnan(h[0]).all() and not np.isnan(h[1]).any()


def test_diag_scan_float16():
    r = rng()
    a, b = rand(r, (2, 5, 6), np.float16, 0.5), rand(r, (2, 5, 6), np.float16)
    h = strux.diag_scan(a, b)
    assert h.dtype == np.float16
    ref = ref_diag_scan(a.astype(np.float64), b.astype(np.float64))
    assert relerr(h, ref) < 2e-3
    da, db, dh0 = strux.diag_scan_vjp(np.ones_like(b), a, b)
    assert da.dtype == np.float16 and db.dtype == np.float16 and dh0 is None


def test_diag_scan_real_a_complex_b_is_promoted():
    r = rng()
    a, b = rand(r, (2, 5, 4), np.float64, 0.7), rand(r, (2, 5, 4), np.complex128)
    h = strux.diag_scan(a, b)
    assert h.dtype == np.complex128
    assert relerr(h, ref_diag_scan(a, b)) < 1e-12
    h32 = strux.diag_scan(a.astype(np.float32), b.astype(np.complex64))
    assert h32.dtype == np.complex64
    with pytest.raises(TypeError, match="'a'"):
        strux.diag_scan(a.astype(np.float32), b)


def _diag_dot_test(a, b, h0, dh, dh_last, tol):
    r = rng()
    cdt = np.result_type(a, b)
    xa, xb = rand(r, a.shape, a.dtype), rand(r, b.shape, b.dtype)
    xh0 = None if h0 is None else rand(r, h0.shape, h0.dtype)
    da, db, dh0 = strux.diag_scan_vjp(dh, a, b, h0=h0, dh_last=dh_last)
    assert da.dtype == a.dtype and db.dtype == b.dtype
    assert (dh0 is None) == (h0 is None)
    j = dense_jvp(diag_matrix(a.astype(cdt)), diag_matrix(xa.astype(cdt)), b, xb, h0, xh0)
    lhs = re_dot(dh, j) + (0.0 if dh_last is None else re_dot(dh_last, j[:, -1]))
    rhs = re_dot(da, xa) + re_dot(db, xb) + (0.0 if h0 is None else re_dot(dh0, xh0))
    assert abs(lhs - rhs) <= tol * (abs(lhs) + 1), (lhs, rhs)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("with_h0", [False, True])
@pytest.mark.parametrize("with_last", [False, True])
def test_diag_scan_vjp_dot_product(dtype, shape, with_h0, with_last):
    r = rng()
    a, b = rand(r, shape, dtype, 0.6), rand(r, shape, dtype)
    h0 = rand(r, (shape[0], shape[2]), dtype) if with_h0 else None
    dh = rand(r, shape, dtype)
    dl = rand(r, (shape[0], shape[2]), dtype) if with_last else None
    _diag_dot_test(a, b, h0, dh, dl, 1e-10)


def test_diag_scan_vjp_mixed_real_complex():
    r = rng()
    a, b = rand(r, (2, 6, 3), np.float64, 0.6), rand(r, (2, 6, 3), np.complex128)
    h0, dh = rand(r, (2, 3), np.complex128), rand(r, (2, 6, 3), np.complex128)
    _diag_dot_test(a, b, h0, dh, None, 1e-10)  # da is the real part of the complex gradient


def test_diag_scan_vjp_float32_close_to_float64():
    r = rng()
    a, b, h0, dh = (rand(r, (2, 8, 5), np.complex128, 0.6), rand(r, (2, 8, 5), np.complex128),
                    rand(r, (2, 5), np.complex128), rand(r, (2, 8, 5), np.complex128))
    g64 = strux.diag_scan_vjp(dh, a, b, h0=h0)
    g32 = strux.diag_scan_vjp(*(x.astype(np.complex64) for x in (dh, a, b)), h0=h0.astype(np.complex64))
    for x, y in zip(g32, g64):
        assert x.dtype == np.complex64 and relerr(x, y) < 2e-5


# ---- circulant_scan ----------------------------------------------------------------------------

CIRC_N = [1, 2, 7, 8, 13, 16, 64]  # 16, 64: the radix-2 kernel with whole vectors of 16 floats


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", CIRC_N)
@pytest.mark.parametrize("with_h0", [False, True])
@pytest.mark.parametrize("fourier", [False, True])
def test_circulant_scan_matches_dense_loop(dtype, n, with_h0, fourier, time_block):
    r = rng()
    B, T = 2, 6
    u = rand(r, (B, T, n), dtype)
    cdt = np.complex64 if dtype == np.float32 else np.complex128
    a = rand(r, (B, T, n // 2 + 1), cdt, 0.5) if fourier else rand(r, (B, T, n), dtype, 0.4)
    h0 = rand(r, (B, n), dtype) if with_h0 else None
    h = strux.circulant_scan(a, u, h0=h0, fourier=fourier)
    assert h.dtype == dtype and h.shape == (B, T, n)
    assert relerr(h, ref_circulant_scan(a, u, h0, fourier)) < TOL[dtype]


@pytest.mark.parametrize("n", [7, 16])
def test_circulant_fourier_form_equals_spatial(n):
    r = rng()
    a, u, h0 = rand(r, (2, 5, n), np.float64, 0.4), rand(r, (2, 5, n), np.float64), rand(r, (2, n), np.float64)
    h1 = strux.circulant_scan(a, u, h0=h0)
    h2 = strux.circulant_scan(np.fft.rfft(a), u, h0=h0, fourier=True)
    assert relerr(h2, h1) < 1e-12


def test_circulant_fourier_ignores_imaginary_dc_and_nyquist():
    r = rng()
    n = 8
    ah, u = rand(r, (1, 4, n // 2 + 1), np.complex128, 0.4), rand(r, (1, 4, n), np.float64)
    h1 = strux.circulant_scan(ah, u, fourier=True)
    ah2 = ah.copy()
    ah2[..., 0] += 0.3j
    ah2[..., -1] -= 0.2j
    h2 = strux.circulant_scan(ah2, u, fourier=True)
    np.testing.assert_allclose(h2, h1, rtol=0, atol=1e-13)
    ah3 = ah.copy()
    ah3[..., 1] += 0.3j  # an interior frequency does matter
    assert relerr(strux.circulant_scan(ah3, u, fourier=True), h1) > 1e-3


def test_circulant_scan_return_final_t1_and_float16():
    r = rng()
    a, u = rand(r, (3, 1, 7), np.float64, 0.5), rand(r, (3, 1, 7), np.float64)
    h, last = strux.circulant_scan(a, u, return_final=True)
    np.testing.assert_array_equal(last, h[:, 0])
    np.testing.assert_allclose(h, u, rtol=0, atol=1e-14)  # T = 1, h0 = 0: h_0 = u_0
    h0 = rand(r, (3, 7), np.float64)
    assert relerr(strux.circulant_scan(a, u, h0=h0), ref_circulant_scan(a, u, h0)) < 1e-12
    a16, u16 = rand(r, (2, 4, 6), np.float16, 0.3), rand(r, (2, 4, 6), np.float16)
    h16 = strux.circulant_scan(a16, u16)
    assert h16.dtype == np.float16
    assert relerr(h16, ref_circulant_scan(a16.astype(np.float64), u16.astype(np.float64))) < 2e-3
    hf = strux.circulant_scan(np.fft.rfft(a16.astype(np.float32)).astype(np.complex64), u16, fourier=True)
    assert hf.dtype == np.float16


def test_circulant_scan_noncontiguous_and_nan():
    r = rng()
    a = rand(r, (2, 10, 13), np.float64, 0.3)[:, ::2]
    u = rand(r, (13, 5, 2), np.float64).transpose(2, 1, 0)
    h0 = rand(r, (13, 2), np.float64).T
    assert relerr(strux.circulant_scan(a, u, h0=h0), ref_circulant_scan(a, u, h0)) < 1e-12
    ah = np.fft.rfft(rand(r, (2, 10, 13), np.float64, 0.3))[:, ::2]
    assert not ah.flags.c_contiguous
    assert relerr(strux.circulant_scan(ah, u, h0=h0, fourier=True), ref_circulant_scan(ah, u, h0, True)) < 1e-12
    u2 = np.ascontiguousarray(u)
    u2[0, 2, 4] = np.nan
    h = strux.circulant_scan(np.ascontiguousarray(a), u2)
    assert np.isnan(h[0, 2:]).all() and not np.isnan(h[0, :2]).any() and not np.isnan(h[1]).any()


@pytest.mark.parametrize("n", CIRC_N)
@pytest.mark.parametrize("with_h0", [False, True])
@pytest.mark.parametrize("fourier", [False, True])
def test_circulant_scan_vjp_dot_product(n, with_h0, fourier, time_block):
    r = rng()
    B, T = 2, 5
    u, dh, xu = (rand(r, (B, T, n), np.float64) for _ in range(3))
    h0, xh0, dl = (rand(r, (B, n), np.float64) for _ in range(3))
    h0 = h0 if with_h0 else None
    if fourier:
        a, xa = rand(r, (B, T, n // 2 + 1), np.complex128, 0.5), rand(r, (B, T, n // 2 + 1), np.complex128)
        A, XA = naive_irfft(a, n), naive_irfft(xa, n)
    else:
        a, xa = rand(r, (B, T, n), np.float64, 0.4), rand(r, (B, T, n), np.float64)
        A, XA = a, xa
    da, du, dh0 = strux.circulant_scan_vjp(dh, a, u, h0=h0, fourier=fourier, dh_last=dl)
    assert da.dtype == a.dtype and da.shape == a.shape and (dh0 is None) == (h0 is None)
    j = dense_jvp(circ_matrix(A), circ_matrix(XA), u, xu, h0, xh0 if with_h0 else None)
    lhs = re_dot(dh, j) + re_dot(dl, j[:, -1])
    rhs = re_dot(da, xa) + re_dot(du, xu) + (re_dot(dh0, xh0) if with_h0 else 0.0)
    assert abs(lhs - rhs) <= 1e-10 * (abs(lhs) + 1), (lhs, rhs)


@pytest.mark.parametrize("n", [1, 6, 7])
def test_circulant_scan_vjp_fourier_finite_differences(n, time_block):
    """Central differences on every real and imaginary part of a_hat (and on u, h0)."""
    r = rng()
    B, T, nf = 1, 3, n // 2 + 1
    ah, u, h0 = rand(r, (B, T, nf), np.complex128, 0.5), rand(r, (B, T, n), np.float64), rand(r, (B, n), np.float64)
    w = rand(r, (B, T, n), np.float64)

    def loss(ah_, u_, h0_):
        return float(np.sum(w * strux.circulant_scan(ah_, u_, h0=h0_, fourier=True)))

    da, du, dh0 = strux.circulant_scan_vjp(w, ah, u, h0=h0, fourier=True)
    eps = 1e-6
    fd = np.zeros_like(ah)
    for idx in np.ndindex(ah.shape):
        for part in (1.0, 1j):
            p, m = ah.copy(), ah.copy()
            p[idx] += eps * part
            m[idx] -= eps * part
            fd[idx] += part * (loss(p, u, h0) - loss(m, u, h0)) / (2 * eps)
    np.testing.assert_allclose(da, fd, rtol=1e-6, atol=1e-7)
    fdu = np.zeros_like(u)
    for idx in np.ndindex(u.shape):
        p, m = u.copy(), u.copy()
        p[idx] += eps
        m[idx] -= eps
        fdu[idx] = (loss(ah, p, h0) - loss(ah, m, h0)) / (2 * eps)
    np.testing.assert_allclose(du, fdu, rtol=1e-6, atol=1e-7)
    fdh = np.zeros_like(h0)
    for idx in np.ndindex(h0.shape):
        p, m = h0.copy(), h0.copy()
        p[idx] += eps
        m[idx] -= eps
        fdh[idx] = (loss(ah, u, p) - loss(ah, u, m)) / (2 * eps)
    np.testing.assert_allclose(dh0, fdh, rtol=1e-6, atol=1e-7)


def test_circulant_scan_vjp_float32():
    r = rng()
    a, u, dh = rand(r, (2, 6, 9), np.float64, 0.3), rand(r, (2, 6, 9), np.float64), rand(r, (2, 6, 9), np.float64)
    g64 = strux.circulant_scan_vjp(dh, a, u)
    g32 = strux.circulant_scan_vjp(dh.astype(np.float32), a.astype(np.float32), u.astype(np.float32))
    for x, y in zip(g32[:2], g64[:2]):
        assert x.dtype == np.float32 and relerr(x, y) < 2e-5
    gf = strux.circulant_scan_vjp(dh.astype(np.float32), np.fft.rfft(a).astype(np.complex64),
                                  u.astype(np.float32), fourier=True)
    assert gf[0].dtype == np.complex64


# ---- block_circulant_scan ----------------------------------------------------------------------

BLOCKS = [(1, 1), (1, 7), (3, 1), (2, 5), (3, 4), (2, 13), (2, 16), (3, 32), (1, 64)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("pk", BLOCKS)
@pytest.mark.parametrize("with_h0", [False, True])
def test_block_circulant_scan_matches_dense_loop(dtype, pk, with_h0, time_block):
    r = rng()
    p, k = pk
    B, T, n = 2, 5, p * k
    a, u = rand(r, (B, T, p, p, k), dtype, 0.3), rand(r, (B, T, n), dtype)
    h0 = rand(r, (B, n), dtype) if with_h0 else None
    h = strux.block_circulant_scan(a, u, h0=h0)
    assert h.dtype == dtype and h.shape == (B, T, n)
    assert relerr(h, ref_block_circulant_scan(a, u, h0)) < TOL[dtype]


def test_block_matrix_reference_layout():
    # the reference itself, entry by entry from the DESIGN.md formula
    r = rng()
    p, k = 2, 3
    a = r.standard_normal((p, p, k))
    M = block_matrix(a)
    for i in range(p):
        for j in range(p):
            for rr in range(k):
                for c in range(k):
                    assert M[i * k + rr, j * k + c] == a[i, j, (rr - c) % k]


def test_block_circulant_scan_misc():
    r = rng()
    a, u = rand(r, (2, 1, 2, 2, 3), np.float64, 0.3), rand(r, (2, 1, 6), np.float64)
    h, last = strux.block_circulant_scan(a, u, return_final=True)
    np.testing.assert_array_equal(last, h[:, -1])
    # non-contiguous
    a = rand(r, (2, 8, 2, 2, 3), np.float64, 0.3)[:, ::2]
    u = rand(r, (6, 4, 2), np.float64).transpose(2, 1, 0)
    h0 = rand(r, (6, 2), np.float64).T
    assert relerr(strux.block_circulant_scan(a, u, h0=h0), ref_block_circulant_scan(a, u, h0)) < 1e-12
    # float16
    a16, u16 = rand(r, (1, 3, 2, 2, 4), np.float16, 0.2), rand(r, (1, 3, 8), np.float16)
    h16 = strux.block_circulant_scan(a16, u16)
    assert h16.dtype == np.float16
    assert relerr(h16, ref_block_circulant_scan(a16.astype(np.float64), u16.astype(np.float64))) < 2e-3
    # NaN in block (0, 1) of step 1: block row 0 of h_1, then every state from step 2 on
    a = np.ascontiguousarray(a)
    a[0, 1, 0, 1, 2] = np.nan
    h = strux.block_circulant_scan(a, np.ascontiguousarray(u))
    assert np.isnan(h[0, 1, :3]).all() and not np.isnan(h[0, 1, 3:]).any()
    assert np.isnan(h[0, 2:]).all() and not np.isnan(h[0, 0]).any() and not np.isnan(h[1]).any()


@pytest.mark.parametrize("pk", BLOCKS)
@pytest.mark.parametrize("with_h0", [False, True])
def test_block_circulant_scan_vjp_dot_product(pk, with_h0, time_block):
    r = rng()
    p, k = pk
    B, T, n = 2, 4, p * k
    a, xa = rand(r, (B, T, p, p, k), np.float64, 0.3), rand(r, (B, T, p, p, k), np.float64)
    u, dh, xu = (rand(r, (B, T, n), np.float64) for _ in range(3))
    h0, xh0, dl = (rand(r, (B, n), np.float64) for _ in range(3))
    h0 = h0 if with_h0 else None
    da, du, dh0 = strux.block_circulant_scan_vjp(dh, a, u, h0=h0, dh_last=dl)
    assert da.shape == a.shape and (dh0 is None) == (h0 is None)
    j = dense_jvp(block_matrix(a), block_matrix(xa), u, xu, h0, xh0 if with_h0 else None)
    lhs = re_dot(dh, j) + re_dot(dl, j[:, -1])
    rhs = re_dot(da, xa) + re_dot(du, xu) + (re_dot(dh0, xh0) if with_h0 else 0.0)
    assert abs(lhs - rhs) <= 1e-10 * (abs(lhs) + 1), (lhs, rhs)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("B", [1, 2, 5])
@pytest.mark.parametrize("k", [7, 32, 64, 100])
def test_block_circulant_scan_threads(threads, B, k):
    """With two or more threads and items each thread runs whole items (one region per call);
    with one thread or B = 1 the items share every stage. Forward against the dense loop, the
    gradients against the single-thread run, time blocks of a prime length; k = 7 GEMM, 32 and
    64 radix-2, 100 FFTW."""
    r = rng()
    p, T = 2, 11
    a, u = rand(r, (B, T, p, p, k), np.float64, 0.3), rand(r, (B, T, p * k), np.float64)
    h0, dh, dl = rand(r, (B, p * k), np.float64), rand(r, (B, T, p * k), np.float64), rand(r, (B, p * k), np.float64)
    old = strux.get_num_threads()
    strux._ext.scan_set_time_block(3)
    try:
        strux.set_num_threads(1)
        g1 = strux.block_circulant_scan_vjp(dh, a, u, h0=h0, dh_last=dl)
        strux.set_num_threads(threads)
        for hh in (None, h0):
            assert relerr(strux.block_circulant_scan(a, u, h0=hh), ref_block_circulant_scan(a, u, hh)) < 1e-12
        for x, y in zip(strux.block_circulant_scan_vjp(dh, a, u, h0=h0, dh_last=dl), g1):
            assert relerr(x, y) < 1e-12
    finally:
        strux.set_num_threads(old)
        strux._ext.scan_set_time_block(0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_block_circulant_scan_radix2_layouts(dtype):
    """k = 64 (the radix-2 kernels both ways): non-contiguous and byte-swapped inputs, rows that
    leave part of a lane block (B T p^2 = 3 * 5 * 9), NaN in one row of a."""
    r = rng()
    B, T, p, k = 3, 5, 3, 64
    a = rand(r, (B, 2 * T, p, p, k), dtype, 0.3)[:, ::2]
    u = rand(r, (p * k, T, B), dtype).transpose(2, 1, 0)
    h0 = rand(r, (B, p * k), dtype).astype(np.dtype(dtype).newbyteorder(">"))
    want = ref_block_circulant_scan(a.astype(np.float64), u.astype(np.float64), h0.astype(np.float64))
    assert relerr(strux.block_circulant_scan(a, u, h0=h0), want) < TOL[dtype]
    a = np.ascontiguousarray(a)
    a[1, 2, 0, 1, 5] = np.nan  # block (0, 1) of item 1, step 2: block row 0 from there, then all
    h = strux.block_circulant_scan(a, u, h0=h0)
    assert np.isnan(h[1, 2, :k]).all() and not np.isnan(h[1, 2, k:]).any() and np.isnan(h[1, 3:]).all()
    assert not np.isnan(h[0]).any() and not np.isnan(h[2]).any() and not np.isnan(h[1, :2]).any()


def test_block_circulant_scan_vjp_float32():
    r = rng()
    a, u, dh = rand(r, (2, 5, 2, 2, 4), np.float64, 0.3), rand(r, (2, 5, 8), np.float64), rand(r, (2, 5, 8), np.float64)
    h0 = rand(r, (2, 8), np.float64)
    g64 = strux.block_circulant_scan_vjp(dh, a, u, h0=h0)
    g32 = strux.block_circulant_scan_vjp(*(x.astype(np.float32) for x in (dh, a, u)), h0=h0.astype(np.float32))
    for x, y in zip(g32, g64):
        assert x.dtype == np.float32 and relerr(x, y) < 2e-5


# ---- bad inputs --------------------------------------------------------------------------------

def _f(*shape, dtype=np.float64):
    return np.ones(shape, dtype)


BAD = [
    # (function, args, kwargs, exception, argument named)
    (strux.diag_scan, (_f(2, 3), _f(2, 3)), {}, ValueError, "'a'"),
    (strux.diag_scan, (_f(2, 3, 4), _f(2, 3, 5)), {}, ValueError, "'b'"),
    (strux.diag_scan, (_f(2, 3, 4), _f(2, 3, 4)), {"h0": _f(2, 5)}, ValueError, "'h0'"),
    (strux.diag_scan, (_f(2, 3, 4), _f(2, 3, 4)), {"h0": _f(2, 4, 1)}, ValueError, "'h0'"),
    (strux.diag_scan, (_f(2, 0, 4), _f(2, 0, 4)), {}, ValueError, "'a'"),
    (strux.diag_scan, (_f(2, 3, 4, dtype=np.int64), _f(2, 3, 4)), {}, TypeError, "'a'"),
    (strux.diag_scan, (_f(2, 3, 4), _f(2, 3, 4, dtype=np.float32)), {}, TypeError, "'b'"),
    (strux.diag_scan, (_f(2, 3, 4, dtype=np.complex64), _f(2, 3, 4, dtype=np.complex128)), {}, TypeError, "'b'"),
    (strux.diag_scan, (_f(2, 3, 4), _f(2, 3, 4)), {"h0": _f(2, 4, dtype=np.float32)}, TypeError, "'h0'"),
    (strux.diag_scan, (_f(2, 3, 4), _f(2, 3, 4)), {"return_final": "yes"}, TypeError, "'return_final'"),
    (strux.diag_scan, (None, _f(2, 3, 4)), {}, TypeError, "'a'"),
    (strux.diag_scan_vjp, (_f(2, 3, 5), _f(2, 3, 4), _f(2, 3, 4)), {}, ValueError, "'dh'"),
    (strux.diag_scan_vjp, (_f(2, 3, 4), _f(2, 3, 4), _f(2, 3, 4)), {"dh_last": _f(3, 4)}, ValueError, "'dh_last'"),
    (strux.diag_scan_vjp, (_f(2, 3, 4, dtype=np.float32), _f(2, 3, 4), _f(2, 3, 4)), {}, TypeError, "'dh'"),
    (strux.circulant_scan, (_f(2, 3, 4), _f(2, 3)), {}, ValueError, "'u'"),
    (strux.circulant_scan, (_f(2, 3, 5), _f(2, 3, 4)), {}, ValueError, "'a'"),
    (strux.circulant_scan, (_f(2, 3, 4), _f(2, 3, 4)), {"h0": _f(3, 4)}, ValueError, "'h0'"),
    (strux.circulant_scan, (_f(2, 3, 4, dtype=np.complex128), _f(2, 3, 4)), {}, TypeError, "'a'"),
    (strux.circulant_scan, (_f(2, 3, 4, dtype=np.float32), _f(2, 3, 4)), {}, TypeError, "'a'"),
    (strux.circulant_scan, (_f(2, 3, 4), _f(2, 3, 4, dtype=np.complex128)), {}, TypeError, "'u'"),
    (strux.circulant_scan, (_f(2, 3, 3), _f(2, 3, 4)), {"fourier": True}, TypeError, "'a'"),
    (strux.circulant_scan, (_f(2, 3, 4, dtype=np.complex128), _f(2, 3, 4)), {"fourier": True}, ValueError, "'a'"),
    (strux.circulant_scan, (_f(2, 3, 3, dtype=np.complex64), _f(2, 3, 4)), {"fourier": True}, TypeError, "'a'"),
    (strux.circulant_scan, (_f(2, 3, 3, dtype=np.complex128), _f(2, 3, 4)), {"fourier": "yes"}, TypeError, "'fourier'"),
    (strux.circulant_scan, (_f(2, 3, 0), _f(2, 3, 0)), {}, ValueError, "'u'"),
    (strux.circulant_scan, (_f(2, 3, 4, dtype=np.int32), _f(2, 3, 4)), {}, TypeError, "'a'"),
    (strux.circulant_scan_vjp, (_f(2, 3, 5), _f(2, 3, 4), _f(2, 3, 4)), {}, ValueError, "'dh'"),
    (strux.circulant_scan_vjp, (_f(2, 3, 4, dtype=np.float32), _f(2, 3, 4), _f(2, 3, 4)), {}, TypeError, "'dh'"),
    (strux.block_circulant_scan, (_f(2, 3, 2, 2), _f(2, 3, 4)), {}, ValueError, "'a'"),
    (strux.block_circulant_scan, (_f(2, 3, 2, 3, 2), _f(2, 3, 4)), {}, ValueError, "'a'"),
    (strux.block_circulant_scan, (_f(2, 4, 2, 2, 2), _f(2, 3, 4)), {}, ValueError, "'a'"),
    (strux.block_circulant_scan, (_f(2, 3, 2, 2, 3), _f(2, 3, 4)), {}, ValueError, "'u'"),
    (strux.block_circulant_scan, (_f(2, 3, 2, 2, 2), _f(2, 3, 4)), {"h0": _f(2, 5)}, ValueError, "'h0'"),
    (strux.block_circulant_scan, (_f(2, 3, 0, 0, 2), _f(2, 3, 4)), {}, ValueError, "'a'"),
    (strux.block_circulant_scan, (_f(2, 3, 2, 2, 2, dtype=np.float32), _f(2, 3, 4)), {}, TypeError, "'a'"),
    (strux.block_circulant_scan, (_f(2, 3, 2, 2, 2, dtype=np.complex128), _f(2, 3, 4)), {}, TypeError, "'a'"),
    (strux.block_circulant_scan_vjp, (_f(2, 3, 5), _f(2, 3, 2, 2, 2), _f(2, 3, 4)), {}, ValueError, "'dh'"),
]


@pytest.mark.parametrize("fn,args,kwargs,exc,name", BAD)
def test_bad_inputs_name_the_argument(fn, args, kwargs, exc, name):
    with pytest.raises(exc, match=name):
        fn(*args, **kwargs)
