"""fftconv benchmark cases: strux vs the plain FFT recipe, same inputs, same process.

Baselines (both compute float32 FFTs in float32, and transform k on every call as strux.fftconv does):
    numpy (one thread):
        causal:   np.fft.irfft(np.fft.rfft(u, n=2L) * np.fft.rfft(k, n=2L), n=2L)[..., :L]
        circular: np.fft.irfft(np.fft.rfft(u) * np.fft.rfft(k, n=L), n=L)
    scipy.fft with workers=-1 (every core), causal at n = next_fast_len(L + Lk - 1):
        the same recipe with scipy.fft.rfft / irfft.
The float64 reference is the numpy recipe in float64.
"""
from __future__ import annotations

import math

import numpy as np

from .case import Case


def _fft_flops(n: int) -> float:
    return 2.5 * n * math.log2(max(n, 2))  # real FFT of length n, the usual 5/2 n log2 n count


def _causal_recipe(u, k, L, pre=None, post=None, skip=None):
    v = u if pre is None else u * pre
    y = np.fft.irfft(np.fft.rfft(v, n=2 * L) * np.fft.rfft(k, n=2 * L), n=2 * L)[..., :L]
    if skip is not None:
        y = y + skip[:, None] * v
    return y if post is None else y * post


def _circular_recipe(u, k, L):
    return np.fft.irfft(np.fft.rfft(u) * np.fft.rfft(k, n=L), n=L)


def _scipy_recipe(u, k, L, mode, pre=None, post=None, skip=None):
    import scipy.fft as sf

    v = u if pre is None else u * pre
    n = sf.next_fast_len(L + min(k.shape[-1], L) - 1, real=True) if mode == "causal" else L
    y = sf.irfft(sf.rfft(v, n=n, workers=-1) * sf.rfft(k, n=n, workers=-1), n=n, workers=-1)[..., :L]
    if skip is not None:
        y = y + skip[:, None] * v
    return y if post is None else y * post


def _case(name, B, H, L, Lk, mode, gated, dtype=np.float32, seed=0):
    import strux

    rng = np.random.default_rng(seed)
    u = rng.standard_normal((B, H, L)).astype(dtype)
    k = (rng.standard_normal((H, Lk)) / math.sqrt(Lk)).astype(dtype)
    pre = post = skip = None
    if gated:
        pre = rng.standard_normal((B, H, L)).astype(dtype)
        post = rng.standard_normal((B, H, L)).astype(dtype)
        skip = rng.standard_normal(H).astype(dtype)
    f64 = lambda a: None if a is None else a.astype(np.float64)  # noqa: E731

    if mode == "causal":
        baseline = lambda: _causal_recipe(u, k, L, pre, post, skip)  # noqa: E731
        reference = lambda: _causal_recipe(f64(u), f64(k), L, f64(pre), f64(post), f64(skip))  # noqa: E731
        nfft = strux.FFTConv(k, L).nfft
    else:
        baseline = lambda: _circular_recipe(u, k, L)  # noqa: E731
        reference = lambda: _circular_recipe(f64(u), f64(k), L)  # noqa: E731
        nfft = L

    item = np.dtype(dtype).itemsize
    nbytes = item * (B * H * L * (2 + (2 if gated else 0)) + H * Lk + (H if gated else 0))
    flops = (2 * B * H + H) * _fft_flops(nfft) + B * H * 6 * (nfft // 2 + 1)
    return Case(
        family="fftconv",
        name=f"{name} B={B} H={H} L={L} Lk={Lk} {np.dtype(dtype).name}",
        strux=lambda: strux.fftconv(u, k, mode=mode, pregate=pre, postgate=post, skip=skip),
        baseline=baseline,
        baseline_name=f"numpy rfft/irfft recipe (n={'2L' if mode == 'causal' else 'L'})",
        bytes=nbytes,
        flops=flops,
        tol=1e-4,
        reference=reference,
        extra={"nfft": nfft, "mode": mode, "gated": gated},
        more_baselines=[("scipy.fft rfft/irfft recipe, workers=-1",
                         lambda: _scipy_recipe(u, k, L, mode, pre, post, skip))],
    )


def cases(quick: bool = False) -> list[Case]:
    B, H, L = (2, 8, 1024) if quick else (8, 64, 8192)
    return [
        _case("causal", B, H, L, L, "causal", gated=False),
        _case("causal gated (pre, post, skip)", B, H, L, L, "causal", gated=True),
        _case("circular", B, H, L, L, "circular", gated=False),
    ]
