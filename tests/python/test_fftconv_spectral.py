"""strux.fftconv_spectral on the CPU: the filter as its lowest m frequencies (DESIGN.md).

Checked against a float64 numpy reference of the contract's formula (np.fft here, in the tests
only), the gradients against central finite differences and the adjoint identity with an exact
JVP, and the torch op (skipped without torch) with gradcheck and opcheck.
"""
import numpy as np
import pytest

import strux
from strux import _ext

MODES = ("causal", "circular")


def nsize(L, mode):
    return L if mode == "circular" else 2 * L


def conv_ref(v, kh, mode):
    """irfft(rfft(v, n) ⊙ K̂, n)[..., :L] in float64 (K̂ = kh zero-padded to n // 2 + 1 bins)."""
    L = v.shape[-1]
    n = nsize(L, mode)
    K = np.zeros((kh.shape[0], n // 2 + 1), complex)
    K[:, :kh.shape[1]] = kh
    return np.fft.irfft(np.fft.rfft(v, n) * K, n)[..., :L]


def ref(u, kh, mode, pre=None, post=None, skip=None):
    f = lambda x: None if x is None else np.asarray(x, np.float64)  # noqa: E731
    u, pre, post, skip = f(u), f(pre), f(post), f(skip)
    v = u * pre if pre is not None else u
    y = conv_ref(v, np.asarray(kh, np.complex128), mode)
    if skip is not None:
        y = y + skip[:, None] * v
    if post is not None:
        y = y * post
    return y


def ref_jvp(x, dx, mode):
    """Directional derivative of ref at x = (u, kh, pre, post, skip) along dx (product rule; y is
    linear in kh and in v, so this is exact)."""
    u, kh, pre, post, skip = x
    du, dkh, dpre, dpost, dskip = dx
    v = u * pre if pre is not None else u
    dv = du * pre + u * dpre if pre is not None else du
    z = conv_ref(v, kh, mode)
    dz = conv_ref(v, dkh, mode) + conv_ref(dv, kh, mode)
    if skip is not None:
        z = z + skip[:, None] * v
        dz = dz + dskip[:, None] * v + skip[:, None] * dv
    return dz * post + z * dpost if post is not None else dz


def make(rng, B, H, L, m, opts=(False, False, False), dtype=np.float64):
    u = rng.standard_normal((B, H, L))
    kh = rng.standard_normal((H, m)) + 1j * rng.standard_normal((H, m))
    pre = rng.standard_normal((B, H, L)) if opts[0] else None
    post = rng.standard_normal((B, H, L)) if opts[1] else None
    skip = rng.standard_normal(H) if opts[2] else None
    cdt = np.complex128 if dtype == np.float64 else np.complex64
    c = lambda a: None if a is None else a.astype(dtype)  # noqa: E731
    return c(u), kh.astype(cdt), c(pre), c(post), c(skip)


def rel(a, b):
    a, b = np.asarray(a, np.complex128), np.asarray(b, np.complex128)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


def inner(a, b):
    """Real inner product <a, b> = Σ Re(conj(a) b) (the one the complex gradient convention uses)."""
    return float(np.sum(np.real(np.conj(np.asarray(a, np.complex128)) * np.asarray(b, np.complex128))))


# (L, m as a function of n): L = 1, odd, prime, even; m = 1, middle, n // 2 + 1
SHAPES = [(1, lambda n: 1), (1, lambda n: n // 2 + 1), (2, lambda n: n // 2 + 1), (7, lambda n: 1),
          (7, lambda n: 3), (7, lambda n: n // 2 + 1), (12, lambda n: 5), (12, lambda n: n // 2 + 1),
          (31, lambda n: n // 2 + 1), (100, lambda n: 17)]
OPTS = [(False, False, False), (True, True, True), (True, False, False), (False, True, False),
        (False, False, True)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("L,mf", SHAPES)
@pytest.mark.parametrize("opts", OPTS)
def test_forward_float64(mode, L, mf, opts):
    rng = np.random.default_rng(L * 7 + len(mode))
    m = mf(nsize(L, mode))
    u, kh, pre, post, skip = make(rng, 2, 3, L, m, opts)
    y = strux.fftconv_spectral(u, kh, mode=mode, pregate=pre, postgate=post, skip=skip)
    assert y.dtype == np.float64 and y.shape == u.shape
    assert rel(y, ref(u, kh, mode, pre, post, skip)) < 1e-13


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("L,mf", SHAPES)
def test_forward_float32(mode, L, mf):
    rng = np.random.default_rng(L)
    m = mf(nsize(L, mode))
    u, kh, pre, post, skip = make(rng, 3, 2, L, m, (True, True, True), np.float32)
    y = strux.fftconv_spectral(u, kh, mode=mode, pregate=pre, postgate=post, skip=skip)
    assert y.dtype == np.float32
    assert rel(y, ref(u, kh, mode, pre, post, skip)) < 2e-6


@pytest.mark.parametrize("mode", MODES)
def test_float16_computed_in_float32(mode):
    rng = np.random.default_rng(5)
    u, kh, pre, post, skip = make(rng, 2, 3, 40, 9, (True, True, True), np.float16)
    y = strux.fftconv_spectral(u, kh, mode=mode, pregate=pre, postgate=post, skip=skip)
    assert y.dtype == np.float16
    f32 = [a.astype(np.float32) for a in (u, pre, post, skip)]
    y32 = strux.fftconv_spectral(f32[0], kh, mode=mode, pregate=f32[1], postgate=f32[2], skip=f32[3])
    np.testing.assert_array_equal(y, y32.astype(np.float16))
    assert rel(y, ref(u, kh, mode, pre, post, skip)) < 2e-3
    dy = rng.standard_normal(u.shape).astype(np.float16)
    g = strux.fftconv_spectral_vjp(dy, u, kh, mode=mode, pregate=pre, postgate=post, skip=skip)
    g32 = strux.fftconv_spectral_vjp(dy.astype(np.float32), f32[0], kh, mode=mode, pregate=f32[1],
                                     postgate=f32[2], skip=f32[3])
    assert g[1].dtype == np.complex64
    np.testing.assert_array_equal(g[1], g32[1])
    for a, b in zip(g[:1] + g[2:], g32[:1] + g32[2:]):
        assert a.dtype == np.float16
        np.testing.assert_array_equal(a, b.astype(np.float16))


def test_same_as_fftconv_with_full_spectrum():
    """k_hat = rfft(k, n) for a real filter k of length <= L reproduces fftconv."""
    rng = np.random.default_rng(1)
    for mode in MODES:
        u, _, pre, post, skip = make(rng, 2, 3, 20, 1, (True, True, True))
        k = rng.standard_normal((3, 20 if mode == "circular" else 13))
        kh = np.fft.rfft(k, nsize(20, mode))
        y = strux.fftconv_spectral(u, kh, mode=mode, pregate=pre, postgate=post, skip=skip)
        y0 = strux.fftconv(u, k, mode=mode, pregate=pre, postgate=post, skip=skip)
        assert rel(y, y0) < 1e-13


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("L", [6, 7])
def test_imaginary_parts_of_dc_and_nyquist_have_no_effect(mode, L):
    rng = np.random.default_rng(2)
    n = nsize(L, mode)
    u, kh, *_ = make(rng, 2, 2, L, n // 2 + 1)
    kh2 = kh.copy()
    kh2[:, 0] += 3j
    if n % 2 == 0:
        kh2[:, n // 2] -= 2j
    np.testing.assert_array_equal(strux.fftconv_spectral(u, kh, mode=mode), strux.fftconv_spectral(u, kh2, mode=mode))
    _, dk, *_ = strux.fftconv_spectral_vjp(rng.standard_normal(u.shape), u, kh, mode=mode)
    assert np.all(dk[:, 0].imag == 0)
    if n % 2 == 0:
        assert np.all(dk[:, n // 2].imag == 0)


# ---- gradients -------------------------------------------------------------------------------------

def _grads_and_dirs(rng, L, m, mode, opts, B=2, H=3):
    u, kh, pre, post, skip = make(rng, B, H, L, m, opts)
    x = (u, kh, pre, post, skip)
    dx = tuple(None if a is None else (rng.standard_normal(a.shape) + (1j * rng.standard_normal(a.shape)
                                                                      if a.dtype.kind == "c" else 0))
               for a in x)
    dy = rng.standard_normal(u.shape)
    g = strux.fftconv_spectral_vjp(dy, u, kh, mode=mode, pregate=pre, postgate=post, skip=skip)
    return x, dx, dy, g


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("L,mf", SHAPES)
@pytest.mark.parametrize("opts", [(False, False, False), (True, True, True)])
def test_adjoint_identity(mode, L, mf, opts):
    """<dy, J dx> = Σ <g_i, dx_i> for random directions, J the exact JVP of the reference."""
    rng = np.random.default_rng(L + 3)
    m = mf(nsize(L, mode))
    x, dx, dy, g = _grads_and_dirs(rng, L, m, mode, opts)
    for a, ga in zip(x, g):
        assert (a is None) == (ga is None)
        if a is not None:
            assert ga.shape == a.shape and ga.dtype == a.dtype
    dx = tuple(None if d is None else d for d in dx)
    zero = tuple(None if a is None else np.zeros_like(a) for a in x)
    lhs = inner(dy, ref_jvp(x, dx, mode))
    rhs = sum(inner(ga, d) for ga, d in zip(g, dx) if ga is not None)
    assert abs(lhs - rhs) <= 1e-11 * max(1.0, abs(lhs))
    # each argument alone, so that one wrong gradient cannot hide behind another
    for i, (ga, d) in enumerate(zip(g, dx)):
        if ga is None:
            continue
        one = tuple(d if j == i else zero[j] for j in range(5))
        assert abs(inner(dy, ref_jvp(x, one, mode)) - inner(ga, d)) <= 1e-11 * max(1.0, abs(inner(ga, d)))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("L,m", [(1, 1), (4, 3), (5, 3), (6, 4), (9, 2)])
def test_gradients_finite_differences(mode, L, m):
    """Every entry of every gradient (dk_hat: real and imaginary parts) by central differences."""
    n = nsize(L, mode)
    m = min(m, n // 2 + 1)
    rng = np.random.default_rng(11 * L + m)
    x, _, dy, g = _grads_and_dirs(rng, L, m, mode, (True, True, True))
    loss = lambda xs: float(np.sum(dy * ref(xs[0], xs[1], mode, *xs[2:])))  # noqa: E731
    eps = 1e-6
    for i, a in enumerate(x):
        parts = (1.0, 1j) if a.dtype.kind == "c" else (1.0,)
        fd = np.zeros(a.shape, np.complex128 if a.dtype.kind == "c" else np.float64)
        for idx in np.ndindex(a.shape):
            for p in parts:
                xp = [c.copy() for c in x]
                xm = [c.copy() for c in x]
                xp[i][idx] += eps * p
                xm[i][idx] -= eps * p
                fd[idx] += (loss(xp) - loss(xm)) / (2 * eps) * (1.0 if p == 1.0 else 1j)
        np.testing.assert_allclose(g[i], fd, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("mode", MODES)
def test_gradients_float32(mode):
    rng = np.random.default_rng(4)
    u, kh, pre, post, skip = make(rng, 3, 2, 33, 15, (True, True, True), np.float32)
    dy = rng.standard_normal(u.shape).astype(np.float32)
    g = strux.fftconv_spectral_vjp(dy, u, kh, mode=mode, pregate=pre, postgate=post, skip=skip)
    f64 = lambda a: a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)  # noqa: E731
    g64 = strux.fftconv_spectral_vjp(f64(dy), f64(u), f64(kh), mode=mode, pregate=f64(pre), postgate=f64(post),
                                     skip=f64(skip))
    for a, b in zip(g, g64):
        assert a.dtype in (np.float32, np.complex64)
        assert rel(a, b) < 1e-5


def test_gradients_independent_of_threads():
    rng = np.random.default_rng(6)
    u, kh, pre, post, skip = make(rng, 5, 2, 24, 7, (True, True, True))
    dy = rng.standard_normal(u.shape)
    old = strux.get_num_threads()
    try:
        strux.set_num_threads(1)
        g1 = strux.fftconv_spectral_vjp(dy, u, kh, pregate=pre, postgate=post, skip=skip)
        strux.set_num_threads(2)
        g2 = strux.fftconv_spectral_vjp(dy, u, kh, pregate=pre, postgate=post, skip=skip)
    finally:
        strux.set_num_threads(old)
    for a, b in zip(g1, g2):
        assert rel(a, b) < 1e-14


# ---- validation ------------------------------------------------------------------------------------

def test_errors_name_the_argument():
    u = np.zeros((2, 3, 8))
    kh = np.zeros((3, 4), np.complex128)
    F = strux.fftconv_spectral
    with pytest.raises(TypeError, match="'k_hat'.*complex"):
        F(u, np.zeros((3, 4)))
    with pytest.raises(ValueError, match="'k_hat'.*shape \\(3, m\\)"):
        F(u, np.zeros((2, 4), np.complex128))
    with pytest.raises(ValueError, match="'k_hat'.*shape"):
        F(u, np.zeros((3, 4, 1), np.complex128))
    with pytest.raises(ValueError, match="'k_hat'.*1 <= m <= n // 2 \\+ 1 = 9.*got m = 10"):
        F(u, np.zeros((3, 10), np.complex128))
    with pytest.raises(ValueError, match="'k_hat'.*= 5.*circular.*got m = 6"):
        F(u, np.zeros((3, 6), np.complex128), mode="circular")
    with pytest.raises(ValueError, match="'k_hat'.*got m = 0"):
        F(u, np.zeros((3, 0), np.complex128))
    with pytest.raises(ValueError, match="'mode'"):
        F(u, kh, mode="same")
    with pytest.raises(ValueError, match="'u'.*3 dimensions"):
        F(u[0], kh)
    with pytest.raises(ValueError, match="'pregate'"):
        F(u, kh, pregate=np.zeros((2, 3, 7)))
    with pytest.raises(TypeError, match="'postgate'.*dtype"):
        F(u, kh, postgate=np.zeros((2, 3, 8), np.float32))
    with pytest.raises(ValueError, match="'skip'"):
        F(u, kh, skip=np.zeros(2))
    with pytest.raises(TypeError, match="'dy'"):
        strux.fftconv_spectral_vjp(None, u, kh)
    with pytest.raises(ValueError, match="'dy'"):
        strux.fftconv_spectral_vjp(np.zeros((2, 3, 9)), u, kh)


def test_native_checks():
    """The C++ plan checks m itself (the bindings may be called without the Python layer)."""
    u = np.zeros((1, 2, 4))
    with pytest.raises(ValueError, match="'k_hat'.*at most n/2 \\+ 1 = 5.*got m = 6"):
        _ext.fftconv_spectral_forward(u, np.zeros((2, 6), np.complex128), "causal", None, None, None)
    with pytest.raises(ValueError, match="'k_hat'.*shape"):
        _ext.fftconv_spectral_forward(u, np.zeros((3, 2), np.complex128), "causal", None, None, None)
    with pytest.raises(ValueError, match="'mode'"):
        _ext.fftconv_spectral_forward(u, np.zeros((2, 2), np.complex128), "x", None, None, None)


# ---- torch (skipped without it) ----------------------------------------------------------------------

def _torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("L,m", [(1, 1), (7, 4), (8, 5)])
def test_torch_gradcheck(mode, L, m):
    torch = _torch()
    import strux.torch as st
    n = nsize(L, mode)
    m = min(m, n // 2 + 1)
    g = torch.Generator().manual_seed(L + m)
    r = lambda *s: torch.randn(*s, dtype=torch.float64, generator=g).requires_grad_()  # noqa: E731
    u, pre, post, skip = r(2, 3, L), r(2, 3, L), r(2, 3, L), r(3)
    kh = torch.randn(3, m, dtype=torch.complex128, generator=g).requires_grad_()
    f = lambda u, kh, pre, post, skip: st.fftconv_spectral(u, kh, mode, pre, post, skip)  # noqa: E731
    assert torch.autograd.gradcheck(f, (u, kh, pre, post, skip), eps=1e-6, atol=1e-6, rtol=1e-5)
    assert torch.autograd.gradcheck(lambda u, kh: st.fftconv_spectral(u, kh, mode), (u, kh), eps=1e-6, atol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_torch_matches_torch_fft_autograd(mode):
    """Forward and every gradient equal those of the same formula written with torch.fft."""
    torch = _torch()
    import strux.torch as st
    L, m = 10, 6
    n = nsize(L, mode)
    g = torch.Generator().manual_seed(3)
    r = lambda *s: torch.randn(*s, dtype=torch.float64, generator=g).requires_grad_()  # noqa: E731
    u, pre, post, skip = r(2, 3, L), r(2, 3, L), r(2, 3, L), r(3)
    kh = torch.randn(3, m, dtype=torch.complex128, generator=g).requires_grad_()
    dy = torch.randn(2, 3, L, dtype=torch.float64, generator=g)

    def recipe(u, kh, pre, post, skip):
        v = u * pre
        K = torch.nn.functional.pad(kh, (0, n // 2 + 1 - m))
        y = torch.fft.irfft(torch.fft.rfft(v, n=n) * K, n=n)[..., :L]
        return (y + skip[:, None] * v) * post

    args = (u, kh, pre, post, skip)
    y0 = recipe(*args)
    g0 = torch.autograd.grad(y0, args, dy)
    y1 = st.fftconv_spectral(u, kh, mode, pre, post, skip)
    g1 = torch.autograd.grad(y1, args, dy)
    assert rel(y1.detach().numpy(), y0.detach().numpy()) < 1e-13
    for a, b in zip(g1, g0):
        assert a.dtype == b.dtype
        assert rel(a.numpy(), b.numpy()) < 1e-12


def test_torch_half_and_opcheck():
    torch = _torch()
    import strux.torch as st
    u = torch.randn(2, 3, 16, dtype=torch.float16, requires_grad=True)
    kh = torch.randn(3, 5, dtype=torch.complex64, requires_grad=True)
    y = st.fftconv_spectral(u, kh)
    assert y.dtype == torch.float16
    y32 = strux.fftconv_spectral(u.detach().float().numpy(), kh.detach().numpy())
    np.testing.assert_array_equal(y.detach().numpy(), y32.astype(np.float16))
    y.float().sum().backward()
    assert u.grad.dtype == torch.float16 and kh.grad.dtype == torch.complex64
    with pytest.raises(TypeError, match="'k_hat'.*complex"):
        st.fftconv_spectral(u, torch.randn(3, 5))
    with pytest.raises(TypeError, match="'pregate'"):
        st.fftconv_spectral(u, kh, pregate=torch.randn(2, 3, 16))
    u64 = torch.randn(2, 3, 9, dtype=torch.float64, requires_grad=True)
    kh64 = torch.randn(3, 4, dtype=torch.complex128, requires_grad=True)
    torch.library.opcheck(torch.ops.strux.fftconv_spectral.default,
                          (u64, kh64, "circular", None, torch.randn(2, 3, 9, dtype=torch.float64), None))
    torch.library.opcheck(torch.ops.strux.fftconv_spectral_backward.default,
                          (torch.randn(2, 3, 9, dtype=torch.float64), u64.detach(), kh64.detach(), "causal",
                           None, None, torch.randn(3, dtype=torch.float64)))


def test_torch_compile_fullgraph():
    torch = _torch()
    import strux.torch as st
    u = torch.randn(2, 3, 10, dtype=torch.float64, requires_grad=True)
    kh = torch.randn(3, 6, dtype=torch.complex128, requires_grad=True)
    loss = lambda u, kh: st.fftconv_spectral(u, kh, "causal").square().sum()  # noqa: E731
    torch.compile(loss, backend="aot_eager", fullgraph=True)(u, kh).backward()
    g = (u.grad.clone(), kh.grad.clone())
    u.grad = kh.grad = None
    loss(u, kh).backward()
    assert torch.equal(g[0], u.grad) and torch.equal(g[1], kh.grad)


@pytest.mark.parametrize("udt, kdt", [(np.float32, np.complex128), (np.float64, np.complex64),
                                      (np.float16, np.complex128)])
def test_k_hat_of_the_other_width(udt, kdt):
    """DESIGN.md names k_hat only "complex": a k_hat of the other width (np.fft.rfft of a float64
    filter with float32 u, say) is taken to u's compute width (complex64 for float16 / float32,
    complex128 for float64): the same y as the matching width, in u's dtype; dk_hat comes back in
    k_hat's own dtype with the matching call's values."""
    rng = np.random.default_rng(5)
    u = rng.standard_normal((2, 3, 16)).astype(udt)
    kh = (rng.standard_normal((3, 6)) + 1j * rng.standard_normal((3, 6))).astype(kdt)
    cw = np.complex128 if udt == np.float64 else np.complex64
    y = strux.fftconv_spectral(u, kh)
    assert y.dtype == udt
    np.testing.assert_array_equal(y, strux.fftconv_spectral(u, kh.astype(cw)))
    dy = rng.standard_normal(u.shape).astype(udt)
    g = strux.fftconv_spectral_vjp(dy, u, kh)
    g_same = strux.fftconv_spectral_vjp(dy, u, kh.astype(cw))
    assert g[1].dtype == kdt and g[0].dtype == udt
    np.testing.assert_array_equal(g[0], g_same[0])
    np.testing.assert_allclose(g[1], g_same[1].astype(kdt), rtol=0, atol=0)
