"""Shared helpers of the GPU tests: skip logic and float64 references of DESIGN.md formulas."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import strux  # noqa: E402
from strux import _cuda_fftconv as _cuda  # noqa: E402  (fftconv's GPU module)

needs_gpu = pytest.mark.skipif(not (torch.cuda.is_available() and _cuda.available()),
                               reason="needs a CUDA GPU and strux built with CUDA")

DTYPES = ["float32", "float64", "float16", "bfloat16"]
TOL = {"float64": 1e-12, "float32": 2e-5, "float16": 1e-2, "bfloat16": 3e-2}


def tdtype(name):
    return getattr(torch, name)


def rel(a, b):
    a = torch.as_tensor(a).detach().double().cpu()
    b = torch.as_tensor(b).detach().double().cpu()
    return float((a - b).norm() / max(float(b.norm()), 1e-300))


def rand(shape, dtype="float64", device="cuda", gen=None):
    """Random normal values, exactly representable in `dtype` (so references see the same inputs)."""
    x = torch.randn(*shape, dtype=torch.float64, generator=gen)
    return x.to(tdtype(dtype)).to(device)


def ref_fftconv(u, k, mode="causal", pre=None, post=None, skip=None):
    """The DESIGN.md formula in float64 torch on CPU, by direct sums over taps (differentiable)."""
    L, Lk = u.shape[-1], k.shape[-1]
    v = u * pre if pre is not None else u
    y = torch.zeros_like(v)
    if mode == "causal":
        for s in range(min(Lk, L)):
            y = y + torch.nn.functional.pad(k[:, s, None] * v[..., :L - s], (s, 0))
    else:
        for s in range(Lk):
            y = y + k[:, s, None] * torch.roll(v, s, dims=-1)
    if skip is not None:
        y = y + skip[:, None] * v
    if post is not None:
        y = y * post
    return y


def ref_toeplitz(blocks, x, adjoint=False):
    """d[i] = Σ_{j≤i} blocks[i−j] @ m[j] (or the adjoint), float64 numpy loops; x (Nt, n, R)."""
    Nt = blocks.shape[0]
    out = np.zeros((Nt, blocks.shape[2] if adjoint else blocks.shape[1], x.shape[2]))
    for i in range(Nt):
        for j in range(i + 1):
            if adjoint:
                out[j] += blocks[i - j].T @ x[i]
            else:
                out[i] += blocks[i - j] @ x[j]
    return out


# ---- fftconv test helpers shared by the cuFFT-path and fused-path tests ------------------------
FFTCONV_GATES = [(), ("pre",), ("post",), ("skip",), ("pre", "post", "skip")]


def fft_ref(u, k, mode="causal", pre=None, post=None, skip=None):
    """float64 FFT form of the DESIGN.md formula (torch CPU pocketfft, differentiable), for
    sizes where the direct sum is slow."""
    L = u.shape[-1]
    v = u * pre if pre is not None else u
    Lk = min(k.shape[-1], L)
    n = L if mode == "circular" else L + Lk
    y = torch.fft.irfft(torch.fft.rfft(v, n=n) * torch.fft.rfft(k[:, :Lk], n=n), n=n)[..., :L]
    if skip is not None:
        y = y + skip[:, None] * v
    return y * post if post is not None else y


def make_fftconv_inputs(B, H, L, Lk, dtype, gates):
    """u, k (scaled by 1/sqrt(Lk)), and the gates named in `gates` (else None), in `dtype`."""
    u = rand((B, H, L), dtype)
    k = rand((H, Lk), dtype) / max(Lk, 1) ** 0.5
    pre = rand((B, H, L), dtype) if "pre" in gates else None
    post = rand((B, H, L), dtype) if "post" in gates else None
    skip = rand((H,), dtype) if "skip" in gates else None
    return u, k, pre, post, skip


def cpu64(*xs):
    return [x.double().cpu() if x is not None else None for x in xs]


def check_fftconv_vjp(B, H, L, Lk, mode, dtype):
    """strux's GPU vjp against autograd of the float64 direct-sum reference, for every gate set."""
    for gates in FFTCONV_GATES:
        u, k, pre, post, skip = make_fftconv_inputs(B, H, L, Lk, dtype, gates)
        dy = rand((B, H, L), dtype)
        got = _cuda.fftconv_vjp(dy, u, k, mode, pre, post, skip)
        args = [x.requires_grad_(True) if x is not None else None for x in cpu64(u, k, pre, post, skip)]
        ref = ref_fftconv(args[0], args[1], mode, *args[2:])
        live = [a for a in args if a is not None]
        want = iter(torch.autograd.grad(ref, live, dy.double().cpu()))
        for name, g, a in zip(["du", "dk", "dpregate", "dpostgate", "dskip"], got, args):
            if a is None:
                assert g is None, name
                continue
            w = next(want)
            assert g.dtype == u.dtype and tuple(g.shape) == tuple(a.shape), name
            assert rel(g, w) < 2 * TOL[dtype], (name, gates, rel(g, w))
