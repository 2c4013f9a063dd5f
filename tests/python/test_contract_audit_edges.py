"""Edge inputs at the Python boundary (audit of the public API against DESIGN.md and _arrays.py's
rules): ragged nested lists, numpy integer scalars, extended-precision values reaching the
toeplitz operator through scipy's flat-vector side or a sparse LTI system, and a float64 check of
every family against plain numpy references for inputs a careful user passes (lists, Fortran
order, negative strides, byte-swapped, read-only, unaligned).

The integer rule (_arrays.py): Python numbers and (nested) lists of them carry no dtype and are
read as float64; anything that carries a numpy integer or bool dtype (arrays, 0-d arrays, numpy
scalars) is a TypeError naming the argument, as float128 / complex256 are.
"""
import numpy as np
import pytest
import scipy.sparse as sp

import strux
import ref_ks

RNG = np.random.default_rng(20240611)


def R(*shape):
    return RNG.standard_normal(shape)


# ---- float64 references (DESIGN.md formulas, plain loops) -------------------------------------

def conv_ref(u, k, mode="causal", pre=None, post=None, skip=None):
    B, H, L = u.shape
    v = u * pre if pre is not None else u
    y = np.zeros((B, H, L))
    for t in range(L):
        for s in range(k.shape[1]):
            if mode == "causal":
                if s <= t:
                    y[:, :, t] += k[:, s] * v[:, :, t - s]
            else:
                y[:, :, t] += k[:, s] * v[:, :, (t - s) % L]
    if skip is not None:
        y += skip[None, :, None] * v
    if post is not None:
        y *= post
    return y


def spectral_ref(u, k_hat, mode="causal"):
    L = u.shape[2]
    n = L if mode == "circular" else 2 * L
    K = np.zeros((k_hat.shape[0], n // 2 + 1), complex)
    K[:, :k_hat.shape[1]] = k_hat
    return np.fft.irfft(np.fft.rfft(u, n) * K[None], n)[..., :L]


def toe_ref(blocks, m):
    d = np.zeros((blocks.shape[0], blocks.shape[1]))
    for i in range(blocks.shape[0]):
        for j in range(i + 1):
            d[i] += blocks[i - j] @ m[j]
    return d


def toe_rref(blocks, d):
    m = np.zeros((blocks.shape[0], blocks.shape[2]))
    for j in range(blocks.shape[0]):
        for i in range(j, blocks.shape[0]):
            m[j] += blocks[i - j].T @ d[i]
    return m


def ks_ref_dense(w):
    return ref_ks.dense(w, w.shape)


def diag_ref(a, b, h0=None):
    a = np.broadcast_to(a, b.shape)
    h = np.zeros(b.shape, np.result_type(a, b))
    prev = np.zeros((b.shape[0], b.shape[2])) if h0 is None else h0
    for t in range(b.shape[1]):
        prev = a[:, t] * prev + b[:, t]
        h[:, t] = prev
    return h


def circ(a):
    n = a.shape[-1]
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    return a[..., (i - j) % n]


def circ_ref(a, u, h0=None):
    B, T, n = u.shape
    prev = np.zeros((B, n)) if h0 is None else h0
    h = np.zeros(u.shape)
    for t in range(T):
        prev = np.einsum("bij,bj->bi", circ(a[:, t]), prev) + u[:, t]
        h[:, t] = prev
    return h


def block_ref(a, u, h0=None):
    B, T, n = u.shape
    prev = np.zeros((B, n)) if h0 is None else h0
    h = np.zeros(u.shape)
    for t in range(T):
        M = np.moveaxis(circ(a[:, t]), -3, -2).reshape(B, n, n)
        prev = np.einsum("bij,bj->bi", M, prev) + u[:, t]
        h[:, t] = prev
    return h


# ---- every family: (call, float64 arguments, reference) ---------------------------------------

_U, _K = R(2, 3, 7), R(3, 4)
_KH = R(3, 3) + 1j * R(3, 3)
_BL, _M, _D = R(5, 2, 3), R(5, 3), R(5, 2)
_W, _X = R(2, 3, 2, 1), R(4, 4)
_A, _B, _H0 = R(2, 5, 3) * 0.5, R(2, 5, 3), R(2, 3)
_CA, _CU, _CH0 = R(2, 5, 4) * 0.3, R(2, 5, 4), R(2, 4)
_BA = R(2, 5, 2, 2, 2) * 0.3

CASES = {
    "fftconv": (lambda u, k, pregate, skip: strux.fftconv(u, k, pregate=pregate, skip=skip),
                dict(u=_U, k=_K, pregate=R(2, 3, 7), skip=R(3)),
                lambda u, k, pregate, skip: conv_ref(u, k, pre=pregate, skip=skip)),
    "fftconv-circular": (lambda u, k: strux.fftconv(u, k, mode="circular"), dict(u=_U, k=_K),
                         lambda u, k: conv_ref(u, k, "circular")),
    "FFTConv": (lambda k, u: strux.FFTConv(k, 7)(u), dict(k=_K, u=_U), lambda k, u: conv_ref(u, k)),
    "fftconv_spectral": (lambda u, k_hat: strux.fftconv_spectral(u, k_hat), dict(u=_U, k_hat=_KH), spectral_ref),
    "BlockToeplitz.matvec": (lambda blocks, m: strux.BlockToeplitz(blocks).matvec(m), dict(blocks=_BL, m=_M), toe_ref),
    "BlockToeplitz.rmatvec": (lambda blocks, d: strux.BlockToeplitz(blocks).rmatvec(d), dict(blocks=_BL, d=_D),
                              toe_rref),
    "BlockToeplitz@": (lambda blocks, m: strux.BlockToeplitz(blocks) @ m, dict(blocks=_BL, m=_M), toe_ref),
    "ks_matmul": (lambda x, w: strux.ks_matmul(x, w, (2, 3, 2, 1)), dict(x=_X, w=_W),
                  lambda x, w: x @ ks_ref_dense(w).T),
    "diag_scan": (lambda a, b, h0: strux.diag_scan(a, b, h0), dict(a=_A, b=_B, h0=_H0), diag_ref),
    "circulant_scan": (lambda a, u, h0: strux.circulant_scan(a, u, h0), dict(a=_CA, u=_CU, h0=_CH0), circ_ref),
    "block_circulant_scan": (lambda a, u, h0: strux.block_circulant_scan(a, u, h0), dict(a=_BA, u=_CU, h0=_CH0),
                             block_ref),
}
ARGS = [(c, n) for c, (_, args, _) in CASES.items() for n in args]


def _unaligned(x):
    buf = np.zeros(x.nbytes + 1, np.uint8)[1:]
    v = buf.view(x.dtype).reshape(x.shape)
    v[...] = x
    return v


def _read_only(x):
    x = x.copy()
    x.flags.writeable = False
    return x


LAYOUTS = {
    "list": lambda x: x.tolist(),
    "fortran": np.asfortranarray,
    "negative-stride": lambda x: np.flip(np.flip(x).copy()),
    "byte-swapped": lambda x: x.astype(">c16" if x.dtype.kind == "c" else ">f8"),
    "read-only": _read_only,
    "unaligned": _unaligned,
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("case,arg", ARGS)
def test_float64_result_for_every_layout(case, arg, layout):
    fn, args, ref = CASES[case]
    x = LAYOUTS[layout](args[arg])
    if layout == "unaligned":
        assert not x.flags.aligned
    y = fn(**dict(args, **{arg: x}))
    assert isinstance(y, np.ndarray) and y.dtype == np.float64
    np.testing.assert_allclose(y, ref(**args), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case,arg", ARGS)
def test_integer_lists_are_float64(case, arg):
    fn, args, ref = CASES[case]
    if args[arg].dtype.kind == "c":
        pytest.skip("complex argument")
    ints = np.round(args[arg] * 2)
    y = fn(**dict(args, **{arg: ints.astype(int).tolist()}))
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, ref(**dict(args, **{arg: ints})), rtol=1e-12, atol=1e-12)


_BAD_DTYPES = [np.int8, np.int32, np.int64, np.uint8, np.bool_, np.longdouble, np.clongdouble, object]


@pytest.mark.parametrize("dtype", _BAD_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("case,arg", ARGS)
def test_typed_non_float_arrays_are_type_errors_naming_the_argument(case, arg, dtype):
    fn, args, _ = CASES[case]
    x = args[arg]
    bad = (x > 0).astype(dtype) if np.dtype(dtype) != np.bool_ else (x.real > 0)
    with pytest.raises(TypeError, match=f"argument '{arg}'"):
        fn(**dict(args, **{arg: bad}))


# ---- defect 1: ragged nested lists --------------------------------------------------------------

@pytest.mark.parametrize("case,arg", ARGS)
def test_ragged_nested_list_is_a_value_error_naming_the_argument(case, arg):
    fn, args, _ = CASES[case]
    ragged = args[arg].tolist()
    ragged[0] = ragged[0][:-1] if isinstance(ragged[0], list) and len(ragged[0]) > 1 else [ragged[0], ragged[0]]
    with pytest.raises(ValueError, match=f"argument '{arg}'"):
        fn(**dict(args, **{arg: ragged}))


def test_ragged_lists_elsewhere():
    with pytest.raises(ValueError, match=r"argument 'ws\[0\]'"):
        strux.ks_chain(_X, [[[[1.0]], [[1.0, 2.0]]]], [(2, 3, 2, 1)])
    with pytest.raises(ValueError, match="argument 'A'"):
        strux.BlockToeplitz.from_lti([[1.0, 0.0], [1.0]], np.ones((2, 1)), np.ones((1, 2)), 3)
    with pytest.raises(ValueError, match="argument 'dh'"):
        strux.diag_scan_vjp([[[1.0]], [[1.0, 2.0]]], _A, _B)


# ---- defect 2: numpy integer scalars follow numpy integer arrays -----------------------------

@pytest.mark.parametrize("value", [np.int64(1), np.int32(1), np.uint8(1), np.array(1), np.array([1, 1, 1])],
                         ids=["int64", "int32", "uint8", "0-d int64", "1-d int64"])
def test_numpy_integer_scalar_is_a_type_error_like_integer_arrays(value):
    with pytest.raises(TypeError, match="argument 'a'"):
        strux.diag_scan(value, _B)
    with pytest.raises(TypeError, match="argument 'a'"):
        strux.diag_scan_vjp(_B, value, _B)


def test_python_numbers_and_lists_broadcast_as_float64():
    want = diag_ref(np.ones((1, 1, 1)), _B)
    for a in (1, 1.0, [1, 1, 1], [[[1]]], np.float64(1.0), np.array(1.0)):
        h = strux.diag_scan(a, _B)
        assert h.dtype == np.float64
        np.testing.assert_allclose(h, want, rtol=1e-14)


# ---- defect 3: the toeplitz operator's flat (scipy) side took extended precision silently ------

@pytest.mark.parametrize("dtype", [np.longdouble, np.clongdouble, object], ids=lambda d: np.dtype(d).name)
def test_toeplitz_flat_vectors_refuse_extended_precision(dtype):
    F = strux.BlockToeplitz(_BL)
    m = _M.reshape(-1).astype(dtype)
    d = _D.reshape(-1).astype(dtype)
    for call in (lambda: F.matvec(m), lambda: F @ m, lambda: F.dot(m), lambda: F.matmat(m[:, None]),
                 lambda: F @ m[:, None], lambda: F.as_linear_operator().matvec(m)):
        with pytest.raises(TypeError, match="argument 'm'"):
            call()
    for call in (lambda: F.rmatvec(d), lambda: F.H @ d, lambda: F.T @ d, lambda: F.rmatmat(d[:, None])):
        with pytest.raises(TypeError, match="argument 'd'"):
            call()


def test_toeplitz_flat_vectors_still_take_scipy_inputs():
    F = strux.BlockToeplitz(_BL)
    want = toe_ref(_BL, _M).reshape(-1)
    for m, dt in ((_M.reshape(-1), np.float64), (_M.reshape(-1).astype(">f8"), np.float64),
                  (_M.reshape(-1).tolist(), np.float64), (_M.reshape(-1) + 0j, np.complex128)):
        y = F.matvec(m)
        assert y.dtype == dt
        np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)
    ints = np.round(_M * 2).reshape(-1)
    y = F @ ints.astype(np.int64)  # documented: integers are computed in the operator's dtype
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, toe_ref(_BL, ints.reshape(_M.shape)).reshape(-1), rtol=1e-12, atol=1e-12)


def test_toeplitz_ragged_list_vector():
    F = strux.BlockToeplitz(_BL)
    with pytest.raises(ValueError, match="argument 'm'"):
        F.matvec([[1.0], [1.0, 2.0]])
    with pytest.raises(ValueError, match="argument 'd'"):
        F.rmatvec([[1.0], [1.0, 2.0]])


# ---- defect 4: a sparse / operator LTI system in extended precision --------------------------

def test_from_lti_sparse_longdouble_is_a_type_error():
    A, B, C = R(4, 4) * 0.3, R(4, 3), R(2, 4)
    with pytest.raises(TypeError, match="argument 'A'"):
        strux.BlockToeplitz.from_lti(sp.csr_matrix(A.astype(np.longdouble)), B, C, 5)
    with pytest.raises(TypeError, match="argument 'B'"):
        strux.BlockToeplitz.from_lti(sp.csr_matrix(A), sp.csr_matrix(B.astype(np.longdouble)), C, 5)
    want = np.stack([C @ np.linalg.matrix_power(A, t) @ B for t in range(5)])
    got = strux.BlockToeplitz.from_lti(sp.csr_matrix(A), B.tolist(), C.astype(">f8"), 5).blocks
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


# ---- what was already right, pinned ------------------------------------------------------------

@pytest.mark.parametrize("call,name", [
    (lambda: strux.fftconv(_U, _K, mode="bogus"), "mode"),
    (lambda: strux.fftconv_spectral(_U, _KH, mode="bogus"), "mode"),
    (lambda: strux.FFTConv(_K, 7.0), "L"),
    (lambda: strux.FFTConv(_K, 7, solver="bogus"), "options"),
    (lambda: strux.diag_scan(_A, _B, reverse="yes"), "reverse"),
    (lambda: strux.diag_scan(_A, _B, axis=1.5), "axis"),
    (lambda: strux.diag_scan_vjp(_B, _A, _B, axis=1.5), "axis"),
    (lambda: strux.diag_scan(_A, _B, return_final="yes"), "return_final"),
    (lambda: strux.circulant_scan(_CA, _CU, fourier="yes"), "fourier"),
    (lambda: strux.block_circulant_scan(_BA, _CU, return_final=None), "return_final"),
    (lambda: strux.ks_matmul(_X, _W, (2, 3, 2, 1), layout="bogus"), "layout"),
    (lambda: strux.BlockToeplitz(_BL, layout="bogus"), "layout"),
    (lambda: strux.BlockToeplitz.from_lti(R(2, 2), R(2, 1), R(1, 2), 5.0), "nt"),
    (lambda: strux.monarch(16.0, 4), "n"),
    (lambda: strux.butterfly(8, 2.0), "radix"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_keyword_errors_name_the_argument(call, name):
    with pytest.raises((TypeError, ValueError), match=f"argument '{name}'"):
        call()


def test_mixed_precision_is_a_type_error_naming_the_argument():
    with pytest.raises(TypeError, match="argument 'k'"):
        strux.fftconv(_U.astype(np.float32), _K)
    with pytest.raises(TypeError, match="argument 'm'"):
        strux.BlockToeplitz(_BL).matvec(_M.astype(np.float32))
    with pytest.raises(TypeError, match="argument 'w'"):
        strux.ks_matmul(_X, _W.astype(np.float32), (2, 3, 2, 1))
    with pytest.raises(TypeError, match="argument 'h0'"):
        strux.circulant_scan(_CA, _CU, _CH0.astype(np.float32))


def test_nan_reaches_every_output_the_formula_says():
    u = _U.copy()
    u[0, 1, 3] = np.nan
    y = strux.fftconv(u, _K)
    assert np.isnan(y[0, 1, 3:]).all() and np.isfinite(y[1]).all() and np.isfinite(y[0, [0, 2]]).all()
    b = _B.copy()
    b[1, 2, 0] = np.nan
    h = strux.diag_scan(_A, b)
    assert np.isnan(h[1, 2:, 0]).all() and np.isfinite(h[1, :2]).all() and np.isfinite(h[0]).all()
    m = _M.copy()
    m[2, 0] = np.nan
    assert np.isnan(strux.BlockToeplitz(_BL).matvec(m)[2:]).all()
    x = _X.copy()
    x[1, 2] = np.nan
    y = strux.ks_matmul(x, _W, (2, 3, 2, 1))
    assert np.isnan(y[1, 3:]).all() and np.isfinite(y[[0, 2, 3]]).all()


@pytest.mark.parametrize("B,H,L,Lk", [(1, 1, 1, 1), (1, 1, 13, 13), (3, 5, 11, 7), (1, 2, 17, 31)])
def test_size_one_and_prime_sizes(B, H, L, Lk):
    u, k, skip = R(B, H, L), R(H, Lk), R(H)
    np.testing.assert_allclose(strux.fftconv(u, k, skip=skip), conv_ref(u, k, skip=skip), rtol=1e-12, atol=1e-12)
    if Lk <= L:
        np.testing.assert_allclose(strux.fftconv(u, k, mode="circular"), conv_ref(u, k, "circular"),
                                   rtol=1e-12, atol=1e-12)
    bl, m = R(L, H, Lk), R(L, Lk)
    np.testing.assert_allclose(strux.BlockToeplitz(bl).matvec(m), toe_ref(bl, m), rtol=1e-12, atol=1e-12)
    a, b = R(B, L, H) * 0.5, R(B, L, H)
    np.testing.assert_allclose(strux.diag_scan(a, b), diag_ref(a, b), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(strux.circulant_scan(a, b), circ_ref(a, b), rtol=1e-12, atol=1e-12)
    w = R(1, H, Lk, 1)
    x = R(B, Lk)
    np.testing.assert_allclose(strux.ks_matmul(x, w, (1, H, Lk, 1)), x @ ks_ref_dense(w).T, rtol=1e-12, atol=1e-12)
