"""The direct fftconv solver (short filters, sums over the taps) against a float64 numpy reference:
CPU (options={"solver": "direct"}) always; GPU (torch CUDA tensors) where present."""
import numpy as np
import pytest

import strux
import strux._cuda_fftconv  # noqa: F401  (the package does not import its GPU modules itself)

LKS = [1, 2, 3, 4, 7, 33, 64]
LS = [1, 2, 5, 17, 1000, 4096, 4099]


def ref(u, k, mode, pre=None, post=None, skip=None):
    v = u * (pre if pre is not None else 1.0)
    L, Lk = u.shape[-1], k.shape[1]
    y = np.zeros_like(v)
    for j in range(min(Lk, L) if mode == "causal" else Lk):
        if mode == "causal":
            y[..., j:] += k[:, j, None] * v[..., :L - j]
        else:
            y += k[:, j, None] * np.roll(v, j, axis=-1)
    if skip is not None:
        y += skip[:, None] * v
    if post is not None:
        y *= post
    return y


def cases():
    for mode in ("causal", "circular"):
        for L in LS:
            for Lk in LKS:
                if mode == "circular" and Lk > L:
                    continue
                yield mode, L, Lk


@pytest.mark.parametrize("mode,L,Lk", list(cases()))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cpu_forward_and_vjp(mode, L, Lk, dtype):
    rng = np.random.default_rng(L * 100 + Lk)
    B, H = 2, 3
    u, pre, post, dy = (rng.standard_normal((B, H, L)) for _ in range(4))
    k, skip = rng.standard_normal((H, Lk)), rng.standard_normal(H)
    c = [x.astype(dtype) for x in (u, k, pre, post, skip, dy)]
    o = {"solver": "direct"}
    y = strux.fftconv(c[0], c[1], mode=mode, pregate=c[2], postgate=c[3], skip=c[4], options=o)
    want = ref(u, k, mode, pre, post, skip)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    assert np.linalg.norm(y - want) <= tol * np.linalg.norm(want)
    g = strux.fftconv_vjp(c[5], c[0], c[1], mode=mode, pregate=c[2], postgate=c[3], skip=c[4], options=o)
    f = strux.fftconv_vjp(dy, u, k, mode=mode, pregate=pre, postgate=post, skip=skip, options={"solver": "fft"})
    for a, b in zip(g, f):
        assert np.linalg.norm(a - b) <= 10 * tol * max(np.linalg.norm(b), 1e-30)


def test_cpu_options_errors():
    u, k = np.zeros((1, 2, 8)), np.zeros((2, 65))
    with pytest.raises(ValueError, match="solver"):
        strux.fftconv(np.zeros((1, 2, 100)), k, options={"solver": "direct"})
    with pytest.raises(ValueError, match="options"):
        strux.fftconv(u, k, options={"solver": "nope"})
    with pytest.raises(ValueError, match="options"):
        strux.fftconv(u, k, options={"path": "direct"})
    assert strux.FFTConv(np.ones((2, 3)), 100).solver == "direct"  # automatic: <= 16 taps
    assert strux.FFTConv(np.ones((2, 40)), 100).solver == "fft"


def _torch_cuda():
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() and strux._cuda_fftconv.available() else None


def test_cpu_noncontiguous_and_byteswapped():
    """Strided, Fortran-ordered and big-endian inputs give the bits of the C-ordered native ones."""
    rng = np.random.default_rng(7)
    u, pre, post = (rng.standard_normal((2, 3, 2 * 50)) for _ in range(3))
    k, skip = rng.standard_normal((3, 2 * 5)), rng.standard_normal(2 * 3)
    o = {"solver": "direct"}
    odd = [u[..., ::2], k[:, ::2], pre[..., ::2], post[..., ::2], skip[::2]]
    plain = [np.ascontiguousarray(x) for x in odd]
    want = strux.fftconv(plain[0], plain[1], pregate=plain[2], postgate=plain[3], skip=plain[4], options=o)
    for args in (odd, [np.asfortranarray(x) for x in plain], [x.astype(">f8") for x in plain]):
        y = strux.fftconv(args[0], args[1], pregate=args[2], postgate=args[3], skip=args[4], options=o)
        assert np.array_equal(y, want)
        g = strux.fftconv_vjp(args[0], args[0], args[1], pregate=args[2], postgate=args[3], skip=args[4], options=o)
        w = strux.fftconv_vjp(plain[0], plain[0], plain[1], pregate=plain[2], postgate=plain[3], skip=plain[4],
                              options=o)
        for a, b in zip(g, w):
            assert np.array_equal(a, b)


def _torch_cpu():
    try:
        import torch
        import strux.torch as st
    except ImportError:
        return None, None
    return torch, st


@pytest.mark.parametrize("Lk", [3, 16, 17])
def test_torch_cpu_autograd_takes_the_automatic_rule(Lk):
    """strux.torch.fftconv on CPU tensors runs strux.fftconv's automatic rule: the direct sums' bits
    up to 16 taps (forward and gradients), the FFT solver's above."""
    torch, st = _torch_cpu()
    if torch is None:
        pytest.skip("no torch")
    rng = np.random.default_rng(Lk)
    u, pre, post, dy = (rng.standard_normal((2, 3, 40)) for _ in range(4))
    k, skip = rng.standard_normal((3, Lk)), rng.standard_normal(3)
    solver = "direct" if Lk <= 16 else "fft"
    assert strux.FFTConv(k, 40).solver == solver
    t = [torch.tensor(x, requires_grad=True) for x in (u, k, pre, post, skip)]
    y = st.fftconv(t[0], t[1], "causal", t[2], t[3], t[4])
    o = {"solver": solver}
    assert np.array_equal(y.detach().numpy(), strux.fftconv(u, k, pregate=pre, postgate=post, skip=skip, options=o))
    y.backward(torch.tensor(dy))
    want = strux.fftconv_vjp(dy, u, k, pregate=pre, postgate=post, skip=skip, options=o)
    for x, w in zip(t, want):
        assert np.array_equal(x.grad.numpy(), w)


@pytest.mark.parametrize("mode,L,Lk", list(cases()))
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_gpu_direct(mode, L, Lk, dtype):
    torch = _torch_cuda()
    if torch is None:
        pytest.skip("no CUDA torch")
    rng = np.random.default_rng(L * 100 + Lk)
    B, H = 2, 3
    u, pre, post, dy = (rng.standard_normal((B, H, L)) for _ in range(4))
    k, skip = rng.standard_normal((H, Lk)), rng.standard_normal(H)
    td = getattr(torch, dtype)
    t = [torch.tensor(x, device="cuda").to(td) for x in (u, k, pre, post, skip, dy)]
    r = [x.double().cpu().numpy() for x in t]  # the reference sees the rounded inputs
    o = {"solver": "direct"}
    y = strux.fftconv(t[0], t[1], mode=mode, pregate=t[2], postgate=t[3], skip=t[4], options=o)
    want = ref(r[0], r[1], mode, r[2], r[3], r[4])
    tol = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 1e-5, "float64": 1e-12}[dtype]
    assert np.linalg.norm(y.double().cpu().numpy() - want) <= tol * np.linalg.norm(want)
    g = strux.fftconv_vjp(t[5], t[0], t[1], mode=mode, pregate=t[2], postgate=t[3], skip=t[4], options=o)
    f = strux.fftconv_vjp(r[5], r[0], r[1], mode=mode, pregate=r[2], postgate=r[3], skip=r[4])
    for name, a, b in zip(("du", "dk", "dpre", "dpost", "dskip"), g, f):
        a = a.double().cpu().numpy()
        assert np.linalg.norm(a - b) <= 4 * tol * max(np.linalg.norm(b), 1e-30), name


def test_gpu_nan_stays_in_row():
    torch = _torch_cuda()
    if torch is None:
        pytest.skip("no CUDA torch")
    u = torch.randn(2, 3, 300, device="cuda")
    k = torch.randn(3, 7, device="cuda")
    u[1, 2, 100] = float("nan")
    y = strux.fftconv(u, k, options={"solver": "direct"})
    bad = torch.isnan(y)
    assert bad[1, 2, 100:107].all() and bad.sum() == 7


def test_gpu_automatic_rule():
    """Plan algo 0 takes the direct kernels where at most 32 taps are used (causal min(Lk, L),
    circular Lk), every dtype, with or without the backward; the FFT solvers above."""
    torch = _torch_cuda()
    if torch is None:
        pytest.skip("no CUDA torch")
    P = strux._ext.cuda.FFTConvPlan
    for dt in ("float16", "bfloat16", "float32", "float64"):
        for backward in (False, True):
            for L, Lk, mode, want in ((4096, 1, "causal", True), (4096, 32, "causal", True),
                                      (4096, 33, "causal", False), (20, 100, "causal", True),
                                      (1024, 32, "circular", True), (1024, 33, "circular", False)):
                assert P(2, 3, L, Lk, mode, dt, backward, 0).direct == want, (dt, backward, L, Lk, mode)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("Lk", [4, 32, 33])
def test_gpu_torch_autograd_takes_the_automatic_rule(dtype, Lk):
    """strux.torch.fftconv on CUDA tensors reaches the direct kernels through the automatic rule:
    forward and gradients are the forced direct solver's bits up to 32 taps."""
    torch = _torch_cuda()
    if torch is None:
        pytest.skip("no CUDA torch")
    import strux.torch as st
    g = torch.Generator(device="cuda").manual_seed(Lk)
    td = getattr(torch, dtype)
    u, pre, post, dy = (torch.randn(2, 3, 1000, device="cuda", generator=g).to(td) for _ in range(4))
    k = (torch.randn(3, Lk, device="cuda", generator=g) / Lk ** 0.5).to(td)
    skip = torch.randn(3, device="cuda", generator=g).to(td)
    t = [x.clone().requires_grad_(True) for x in (u, k, pre, post, skip)]
    y = st.fftconv(t[0], t[1], "causal", t[2], t[3], t[4])
    y.backward(dy)
    o = {"solver": "direct"}
    yd = strux.fftconv(u, k, pregate=pre, postgate=post, skip=skip, options=o)
    gd = strux.fftconv_vjp(dy, u, k, pregate=pre, postgate=post, skip=skip, options=o)
    same = torch.equal(y.detach(), yd) and all(torch.equal(x.grad, w) for x, w in zip(t, gd))
    assert same == (Lk <= 32)


def test_gpu_noncontiguous_and_negated_views():
    """Strided and negated-view CUDA tensors (copied by the adapter) give the contiguous inputs' bits."""
    torch = _torch_cuda()
    if torch is None:
        pytest.skip("no CUDA torch")
    g = torch.Generator(device="cuda").manual_seed(3)
    u, pre, post, dy = (torch.randn(2, 3, 2 * 300, device="cuda", generator=g) for _ in range(4))
    k, skip = torch.randn(3, 2 * 7, device="cuda", generator=g), torch.randn(2 * 3, device="cuda", generator=g)
    o = {"solver": "direct"}
    odd = [u[..., ::2], k[:, ::2], pre[..., ::2], post[..., ::2], skip[::2], dy[..., ::2]]
    plain = [x.contiguous() for x in odd]
    neg = [torch._neg_view(x) for x in plain]  # views with the negative bit set
    for args, ref in ((odd, plain), (neg, [-x for x in plain])):
        y = strux.fftconv(args[0], args[1], pregate=args[2], postgate=args[3], skip=args[4], options=o)
        assert torch.equal(y, strux.fftconv(ref[0], ref[1], pregate=ref[2], postgate=ref[3], skip=ref[4], options=o))
        gg = strux.fftconv_vjp(args[5], args[0], args[1], pregate=args[2], postgate=args[3], skip=args[4], options=o)
        w = strux.fftconv_vjp(ref[5], ref[0], ref[1], pregate=ref[2], postgate=ref[3], skip=ref[4], options=o)
        for a, b in zip(gg, w):
            assert torch.equal(a, b)
