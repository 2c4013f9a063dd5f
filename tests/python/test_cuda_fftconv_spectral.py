"""strux.fftconv_spectral on the GPU (strux._cuda_fftconv) against the CPU backend and the float64
torch.fft formula; gradients against the CPU vjp and torch autograd. Skipped without a GPU."""
import numpy as np
import pytest

from cuda_common import DTYPES, TOL, _cuda, needs_gpu, torch

import strux  # noqa: E402

pytestmark = needs_gpu

MODES = ("causal", "circular")
CDT = {"float32": torch.complex64, "float16": torch.complex64, "bfloat16": torch.complex64,
       "float64": torch.complex128}
# (B, H, L, m as a function of n): L = 1 (circular: n = 1, no cuFFT), odd, prime, even; m = 1 .. n // 2 + 1
SHAPES = [(2, 3, 1, lambda n: n // 2 + 1), (1, 2, 2, lambda n: 1), (2, 3, 7, lambda n: n // 2 + 1),
          (2, 3, 7, lambda n: 3), (3, 2, 31, lambda n: 1), (2, 2, 64, lambda n: n // 2 + 1), (2, 4, 100, lambda n: 9),
          (1, 2, 1000, lambda n: 40)]
GATES = [(False, False, False), (True, True, True), (True, False, True), (False, True, False)]


def rel(a, b):
    """Relative 2-norm error, complex arrays compared in both parts."""
    def f64(x):
        x = torch.as_tensor(x).detach().cpu()
        return torch.view_as_real(x.to(torch.complex128)) if x.is_complex() else x.double()
    a, b = f64(a), f64(b)
    return float((a - b).norm() / max(float(b.norm()), 1e-300))


def nsize(L, mode):
    return L if mode == "circular" else 2 * L


def make(B, H, L, m, dtype, gates, seed=0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, dtype=torch.float64, generator=g).to(getattr(torch, dtype)).cuda()  # noqa: E731
    u = r(B, H, L)
    kh = torch.randn(H, m, dtype=torch.complex128, generator=g).to(CDT[dtype]).cuda()
    pre = r(B, H, L) if gates[0] else None
    post = r(B, H, L) if gates[1] else None
    skip = r(H) if gates[2] else None
    return u, kh, pre, post, skip


def host(x):
    """The tensor as numpy for the CPU backend: float32 for the half types (what strux computes in)."""
    if x is None:
        return None
    x = x.detach().cpu()
    if x.dtype in (torch.float16, torch.bfloat16):
        x = x.float()
    return x.numpy()


def ref64(u, kh, mode, pre=None, post=None, skip=None):
    f = lambda x: None if x is None else x.detach().cpu().double()  # noqa: E731
    u, pre, post, skip = f(u), f(pre), f(post), f(skip)
    kh = kh.detach().cpu().to(torch.complex128)
    L = u.shape[-1]
    n = nsize(L, mode)
    v = u * pre if pre is not None else u
    K = torch.nn.functional.pad(kh, (0, n // 2 + 1 - kh.shape[1]))
    y = torch.fft.irfft(torch.fft.rfft(v, n=n) * K, n=n)[..., :L]
    if skip is not None:
        y = y + skip[:, None] * v
    return y * post if post is not None else y


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", SHAPES)
def test_forward(dtype, mode, shape):
    B, H, L, mf = shape
    m = mf(nsize(L, mode))
    for gates in GATES:
        u, kh, pre, post, skip = make(B, H, L, m, dtype, gates)
        y = strux.fftconv_spectral(u, kh, mode=mode, pregate=pre, postgate=post, skip=skip)
        assert y.dtype == u.dtype and y.shape == u.shape and y.device == u.device
        y_cpu = strux.fftconv_spectral(host(u), host(kh), mode=mode, pregate=host(pre), postgate=host(post),
                                       skip=host(skip))
        assert rel(y, torch.from_numpy(y_cpu)) < TOL[dtype], (gates, rel(y, torch.from_numpy(y_cpu)))
        assert rel(y, ref64(u, kh, mode, pre, post, skip)) < TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", SHAPES)
def test_backward_matches_cpu(dtype, mode, shape):
    B, H, L, mf = shape
    m = mf(nsize(L, mode))
    for gates in GATES:
        u, kh, pre, post, skip = make(B, H, L, m, dtype, gates, seed=1)
        dy = make(B, H, L, m, dtype, gates, seed=2)[0]
        g = strux.fftconv_spectral_vjp(dy, u, kh, mode=mode, pregate=pre, postgate=post, skip=skip)
        g_cpu = strux.fftconv_spectral_vjp(host(dy), host(u), host(kh), mode=mode, pregate=host(pre),
                                           postgate=host(post), skip=host(skip))
        for name, a, b, x in zip(("du", "dk_hat", "dpregate", "dpostgate", "dskip"), g, g_cpu,
                                 (u, kh, pre, post, skip)):
            assert (a is None) == (b is None) == (x is None), name
            if a is None:
                continue
            assert a.dtype == x.dtype and a.shape == x.shape and a.device == x.device, name
            tol = TOL[dtype] * (4 if name == "dskip" else 1)
            assert rel(a, torch.from_numpy(b)) < tol, (name, gates, rel(a, torch.from_numpy(b)))


@pytest.mark.parametrize("mode", MODES)
def test_dk_hat_real_bins_and_filter_read_per_call(mode):
    L = 8
    n = nsize(L, mode)
    u, kh, *_ = make(2, 3, L, n // 2 + 1, "float64", GATES[0])
    dy = make(2, 3, L, 1, "float64", GATES[0], seed=5)[0]
    _, dk, *_ = strux.fftconv_spectral_vjp(dy, u, kh, mode=mode)
    assert torch.all(dk[:, 0].imag == 0) and torch.all(dk[:, n // 2].imag == 0)
    # the plan is cached by shape: a second filter of the same shape must be the one used
    kh2 = 2 * kh + 1j
    y2 = strux.fftconv_spectral(u, kh2, mode=mode)
    assert rel(y2, ref64(u, kh2, mode)) < 1e-12


def test_torch_autograd_cuda():
    import strux.torch as st
    for mode in MODES:
        u, kh, pre, post, skip = make(2, 3, 9, 4, "float64", GATES[1], seed=3)
        args = tuple(t.requires_grad_() for t in (u, kh, pre, post, skip))
        f = lambda u, kh, pre, post, skip: st.fftconv_spectral(u, kh, mode, pre, post, skip)  # noqa: E731
        assert torch.autograd.gradcheck(f, args, eps=1e-6, atol=1e-6, rtol=1e-5)
        dy = torch.randn_like(u)
        g = torch.autograd.grad(f(*args), args, dy)
        uc = [a.detach().cpu().requires_grad_() for a in args]
        gc = torch.autograd.grad(f(*uc), uc, dy.cpu())
        for a, b in zip(g, gc):
            assert a.is_cuda and rel(a, b) < 1e-12


def test_half_with_torch_op():
    import strux.torch as st
    u, kh, *_ = make(2, 3, 40, 11, "bfloat16", GATES[0])
    u.requires_grad_()
    kh.requires_grad_()
    y = st.fftconv_spectral(u, kh)
    assert y.dtype == torch.bfloat16
    y.float().sum().backward()
    assert u.grad.dtype == torch.bfloat16 and kh.grad.dtype == torch.complex64


def test_noncontiguous_and_conj_views():
    u, kh, *_ = make(2, 3, 16, 9, "float32", GATES[0])
    big = torch.randn(3, 18, dtype=torch.complex64, device="cuda")
    kv = big[:, ::2]  # non-contiguous
    np.testing.assert_allclose(strux.fftconv_spectral(u, kv).cpu().numpy(),
                               strux.fftconv_spectral(u, kv.contiguous()).cpu().numpy(), rtol=0, atol=0)
    kc = kh.conj()  # lazy conjugate view
    assert rel(strux.fftconv_spectral(u, kc), ref64(u, kc.resolve_conj(), "causal")) < 2e-5


def test_errors_name_the_argument():
    u, kh, *_ = make(2, 3, 8, 4, "float32", GATES[0])
    F = strux.fftconv_spectral
    with pytest.raises(TypeError, match="'k_hat'"):
        F(u, torch.randn(3, 4, device="cuda"))
    y128 = F(u, kh.to(torch.complex128))  # the other width: taken to complex64 for float32 u
    assert y128.dtype == u.dtype and torch.equal(y128, F(u, kh))
    with pytest.raises(ValueError, match="'k_hat'.*n // 2 \\+ 1 = 9.*got m = 10"):
        F(u, torch.zeros(3, 10, dtype=torch.complex64, device="cuda"))
    with pytest.raises(ValueError, match="'k_hat'.*= 5.*got m = 6"):
        F(u, torch.zeros(3, 6, dtype=torch.complex64, device="cuda"), mode="circular")
    with pytest.raises(ValueError, match="'k_hat'.*shape"):
        F(u, torch.zeros(2, 4, dtype=torch.complex64, device="cuda"))
    with pytest.raises(ValueError, match="'mode'"):
        F(u, kh, mode="same")
    with pytest.raises(TypeError, match="'pregate'"):
        F(u, kh, pregate=torch.zeros(2, 3, 8, dtype=torch.float64, device="cuda"))
    with pytest.raises(ValueError, match="'k_hat'"):
        F(u, kh.cpu())
    with pytest.raises(TypeError, match="'dy'"):
        strux.fftconv_spectral_vjp(None, u, kh)
    assert _cuda.fftconv_spectral is not None
