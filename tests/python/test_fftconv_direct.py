"""The direct fftconv solver (short filters, sums over the taps) against a float64 numpy reference:
CPU (options={"solver": "direct"}) always; GPU (torch CUDA tensors) where present."""
import numpy as np
import pytest

import strux

LKS = [1, 2, 3, 4, 7, 33, 64]
LS = [1, 2, 5, 17, 1000, 4099]


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
