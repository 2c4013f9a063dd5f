"""scan benchmark cases: strux vs the plain numpy time loop, same inputs, same process.

Baselines (numpy computes complex64/float32 in single precision):
    diag:       h = a[:, t] * h + b[:, t] for t in range(T); backward: that loop for h, then
                g = dh[:, t] + conj(a[:, t+1]) g, da[:, t] = g conj(h[:, t-1]), db[:, t] = g
                backwards in time
    circulant:  A = rfft(a), U = rfft(u); H = A[:, t] * H + U[:, t] for t; h = irfft(H, n)
                (the time loop of the Fourier recipe; with fourier=True the rfft of a is skipped)
    block:      the same Fourier recipe with a per-frequency p x p einsum in the time loop
The float64 references are the same recipes in float64 / complex128.
Shape classes of diag_scan (issue 14): many channels and short T, the middle, few channels and
long T (where the CPU kernel splits time), each dtype; %copy in the table is the achieved
bytes (a and b read, h written; backward: dh, a, b read, da, db written) over the copy
bandwidth measured in the same run.
"""
from __future__ import annotations

import math

import numpy as np

from .case import Case


def _fft_flops(n: int) -> float:
    return 2.5 * n * math.log2(max(n, 2))


def _diag_loop(a, b):
    h = np.zeros_like(b[:, 0])
    out = np.empty_like(b)
    for t in range(a.shape[1]):
        h = a[:, t] * h + b[:, t]
        out[:, t] = h
    return out


def _diag_loop_vjp(dh, a, b):
    h = _diag_loop(a, b)
    g = np.zeros_like(b[:, 0])
    da, db = np.empty_like(b), np.empty_like(b)
    T = a.shape[1]
    for t in range(T - 1, -1, -1):
        g = dh[:, t] + (np.conj(a[:, t + 1]) * g if t + 1 < T else 0)
        db[:, t] = g
        da[:, t] = g * np.conj(h[:, t - 1]) if t > 0 else 0
    return da, db


def _fourier_loop(A, U, n):
    H = np.zeros_like(U[:, 0])
    out = np.empty_like(U)
    for t in range(A.shape[1]):
        H = A[:, t] * H + U[:, t]
        out[:, t] = H
    return np.fft.irfft(out, n)


def _circ_recipe(a, u, fourier=False):
    A = a if fourier else np.fft.rfft(a)
    return _fourier_loop(A, np.fft.rfft(u), u.shape[-1])


def _block_recipe(a, u):
    B, T, p, _, k = a.shape
    A = np.fft.rfft(a)                                  # (B, T, p, p, kf)
    U = np.fft.rfft(u.reshape(B, T, p, k))              # (B, T, p, kf)
    H = np.zeros_like(U[:, 0])
    out = np.empty_like(U)
    for t in range(T):
        H = np.einsum("bijf,bjf->bif", A[:, t], H) + U[:, t]
        out[:, t] = H
    return np.fft.irfft(out, k).reshape(B, T, p * k)


def _stable_circulant(rng, shape, radius=0.99):
    """Real a whose spectrum has |rfft(a)| <= radius at every step (a stable recurrence)."""
    a = rng.standard_normal(shape)
    return a * (radius / np.abs(np.fft.rfft(a)).max(axis=-1, keepdims=True))


def _decays(rng, shape, dtype):
    """Stable decays: |a| in [0.9, 0.999], a random phase (complex) or sign (real)."""
    r = rng.uniform(0.9, 0.999, shape)
    if np.dtype(dtype).kind == "c":
        return (r * np.exp(1j * rng.uniform(-np.pi, np.pi, shape))).astype(dtype)
    return (r * rng.choice([-1.0, 1.0], shape)).astype(dtype)


def diag_case(B=4, T=2048, n=1024, dtype=np.complex64, seed=0, backward=False):
    import strux

    rng = np.random.default_rng(seed)
    a = _decays(rng, (B, T, n), dtype)
    b = rng.standard_normal((B, T, n)).astype(dtype)
    if np.dtype(dtype).kind == "c":
        b = (b + 1j * rng.standard_normal((B, T, n))).astype(dtype)
    wide = np.complex128 if np.dtype(dtype).kind == "c" else np.float64
    item = np.dtype(dtype).itemsize
    name = f"diag_scan B={B} T={T} n={n} {np.dtype(dtype).name}"
    if backward:
        dh = rng.standard_normal((B, T, n)).astype(dtype)
        return Case(
            family="scan", name=name + " backward",
            strux=lambda: strux.diag_scan_vjp(dh, a, b)[0],
            baseline=lambda: _diag_loop_vjp(dh, a, b)[0],
            baseline_name="numpy time loops (h forward, then g, da, db backward)",
            bytes=5 * item * B * T * n, flops=16.0 * B * T * n, tol=1e-4,
            reference=lambda: _diag_loop_vjp(dh.astype(wide), a.astype(wide), b.astype(wide))[0],
        )
    return Case(
        family="scan",
        name=name,
        strux=lambda: strux.diag_scan(a, b),
        baseline=lambda: _diag_loop(a, b),
        baseline_name="numpy time loop h = a[:, t]*h + b[:, t]",
        bytes=3 * item * B * T * n,
        flops=8.0 * B * T * n,
        tol=5e-3 if item == 2 else 1e-4,  # float16: one rounding of each h
        reference=lambda: _diag_loop(a.astype(wide), b.astype(wide)),
    )


def circulant_case(B=4, T=1024, n=256, dtype=np.float32, fourier=False, seed=0):
    import strux

    rng = np.random.default_rng(seed)
    a64 = _stable_circulant(rng, (B, T, n))
    u64 = rng.standard_normal((B, T, n))
    u = u64.astype(dtype)
    if fourier:
        a = np.fft.rfft(a64).astype(np.complex64 if dtype == np.float32 else np.complex128)
        a_ref = a.astype(np.complex128)
    else:
        a = a64.astype(dtype)
        a_ref = a.astype(np.float64)
    nf = n // 2 + 1
    item = np.dtype(dtype).itemsize
    a_bytes = (2 * item * nf) if fourier else (item * n)
    return Case(
        family="scan",
        name=f"circulant_scan{' fourier' if fourier else ''} B={B} T={T} n={n} {np.dtype(dtype).name}",
        strux=lambda: strux.circulant_scan(a, u, fourier=fourier),
        baseline=lambda: _circ_recipe(a, u, fourier),
        baseline_name="numpy rfft + time loop H = A[:, t]*H + U[:, t] + irfft",
        bytes=B * T * (a_bytes + 2 * item * n),
        flops=B * T * ((2 if fourier else 3) * _fft_flops(n) + 8.0 * nf),
        tol=1e-4,
        reference=lambda: _circ_recipe(a_ref, u.astype(np.float64), fourier),
    )


def block_circulant_case(B=4, T=512, p=4, k=64, dtype=np.float32, seed=0):
    import strux

    rng = np.random.default_rng(seed)
    a = (_stable_circulant(rng, (B, T, p, p, k)) / p).astype(dtype)  # row sums of |A_hat| < 1
    u = rng.standard_normal((B, T, p * k)).astype(dtype)
    item = np.dtype(dtype).itemsize
    kf = k // 2 + 1
    return Case(
        family="scan",
        name=f"block_circulant_scan B={B} T={T} p={p} k={k} {np.dtype(dtype).name}",
        strux=lambda: strux.block_circulant_scan(a, u),
        baseline=lambda: _block_recipe(a, u),
        baseline_name="numpy rfft + time loop of per-frequency p x p einsum + irfft",
        bytes=item * B * T * (p * p * k + 2 * p * k),
        flops=B * T * ((p * p + 2 * p) * _fft_flops(k) + 8.0 * p * p * kf),
        tol=1e-4,
        reference=lambda: _block_recipe(a.astype(np.float64), u.astype(np.float64)),
    )


# diag_scan's shape classes: many channels / short T, the middle, few channels / long T.
DIAG_SHAPES = [(64, 64, 4096), (4, 2048, 1024), (1, 65536, 64), (1, 262144, 8)]
DIAG_DTYPES = [np.float32, np.complex64, np.float64, np.complex128]


def cases(quick: bool = False) -> list[Case]:
    if quick:
        return [diag_case(B=2, T=128, n=64), diag_case(B=1, T=2048, n=4, dtype=np.float32),
                diag_case(B=2, T=128, n=64, backward=True), circulant_case(B=2, T=64, n=32),
                circulant_case(B=2, T=64, n=32, fourier=True), block_circulant_case(B=2, T=32, p=2, k=16)]
    out = []
    for dt in DIAG_DTYPES:
        for B, T, n in DIAG_SHAPES:
            if np.dtype(dt).itemsize >= 16 and B * T * n > 1 << 21:
                T //= 2  # complex128: the same bytes as complex64 at half the steps
            out.append(diag_case(B, T, n, dt))
    out += [diag_case(B, T, n, np.float16) for B, T, n in DIAG_SHAPES[1:3]]
    out += [diag_case(4, 2048, 1024, np.complex64, backward=True), diag_case(1, 65536, 64, np.complex64, backward=True),
            diag_case(4, 2048, 1024, np.float32, backward=True)]
    out += [circulant_case(), circulant_case(fourier=True), circulant_case(n=64)]
    out += [block_circulant_case(p=p, k=k, T=T) for p, k, T in ((2, 64, 512), (4, 64, 512), (8, 32, 256),
                                                                  (16, 16, 256))]
    return out
