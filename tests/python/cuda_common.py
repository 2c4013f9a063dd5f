"""Shared helpers of the GPU tests: skip logic and float64 references of DESIGN.md formulas."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import strux  # noqa: E402
from strux import _cuda  # noqa: E402

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
