"""float64 / complex128 references of the scan family: plain time loops over explicit dense
transition matrices built from the DESIGN.md index formulas (no FFT anywhere)."""
from __future__ import annotations

import numpy as np


def circ_matrix(a):
    """circ(a)[..., i, j] = a[..., (i - j) mod n]."""
    a = np.asarray(a)
    n = a.shape[-1]
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    return a[..., (i - j) % n]


def block_matrix(a):
    """a (..., p, p, k) -> (..., n, n): block (i, j) = circ(a[..., i, j, :]), state index i*k + r."""
    a = np.asarray(a)
    p, k = a.shape[-3], a.shape[-1]
    c = circ_matrix(a)  # (..., p, p, k, k): [i, j, r, c]
    c = np.moveaxis(c, -3, -2)  # (..., p, k, p, k): [i, r, j, c]
    return c.reshape(a.shape[:-3] + (p * k, p * k))


def diag_matrix(a):
    a = np.asarray(a)
    return a[..., :, None] * np.eye(a.shape[-1])


def naive_irfft(a_hat, n):
    """numpy.fft.irfft(a_hat, n) along the last axis, written as the sum (imaginary parts at
    frequency 0 and n/2 ignored)."""
    a_hat = np.asarray(a_hat, dtype=np.complex128)
    m = np.arange(n)
    out = np.broadcast_to(a_hat[..., :1].real, a_hat.shape[:-1] + (n,)).copy()
    for k in range(1, (n + 1) // 2):
        out += 2 * (a_hat[..., k:k + 1] * np.exp(2j * np.pi * k * m / n)).real
    if n % 2 == 0:
        out += a_hat[..., n // 2:n // 2 + 1].real * (-1.0) ** m
    return out / n


def dense_scan(M, u, h0=None):
    """h_t = M_t h_{t-1} + u_t; M (B, T, n, n), u (B, T, n), h0 (B, n) or None."""
    M = np.asarray(M)
    u = np.asarray(u)
    dt = np.result_type(M, u, np.float64)
    B, T, n = u.shape
    h = np.zeros((B, T, n), dt)
    prev = np.zeros((B, n), dt) if h0 is None else np.asarray(h0, dt)
    for t in range(T):
        prev = np.einsum("bij,bj->bi", M[:, t], prev) + u[:, t]
        h[:, t] = prev
    return h


def dense_jvp(M, dM, u, du, h0=None, dh0=None):
    """Exact forward-mode derivative of dense_scan in the direction (dM, du, dh0)."""
    h = dense_scan(M, u, h0)
    B, T, n = np.shape(u)
    dt = np.result_type(M, dM, u, du, np.float64)
    prev = np.zeros((B, n), dt) if h0 is None else np.asarray(h0, dt)
    dprev = np.zeros((B, n), dt) if dh0 is None else np.asarray(dh0, dt)
    out = np.zeros((B, T, n), dt)
    for t in range(T):
        dprev = (np.einsum("bij,bj->bi", dM[:, t], prev) + np.einsum("bij,bj->bi", M[:, t], dprev)
                 + du[:, t])
        out[:, t] = dprev
        prev = h[:, t]
    return out


def ref_diag_scan(a, b, h0=None):
    """Direct loop of h_t = a_t * h_{t-1} + b_t in complex128 / float64."""
    a = np.asarray(a)
    b = np.asarray(b)
    dt = np.result_type(a, b, np.float64)
    B, T, n = a.shape
    h = np.zeros((B, T, n), dt)
    prev = np.zeros((B, n), dt) if h0 is None else np.asarray(h0, dt)
    for t in range(T):
        prev = a[:, t].astype(dt) * prev + b[:, t]
        h[:, t] = prev
    return h


def ref_circulant_scan(a, u, h0=None, fourier=False):
    u = np.asarray(u, np.float64)
    a = naive_irfft(a, u.shape[-1]) if fourier else np.asarray(a, np.float64)
    return dense_scan(circ_matrix(a), u, h0)


def ref_block_circulant_scan(a, u, h0=None):
    return dense_scan(block_matrix(np.asarray(a, np.float64)), np.asarray(u, np.float64), h0)


def re_dot(x, y):
    """Re sum conj(x) y: the real inner product under which vjp and jvp are adjoint."""
    return float(np.sum(np.conj(np.asarray(x, np.complex128)) * np.asarray(y, np.complex128)).real)


def rand(r, shape, dtype, scale=1.0):
    """Normal values of `shape` in `dtype` from generator r (complex: both parts)."""
    x = r.standard_normal(shape) * scale
    if np.dtype(dtype).kind == "c":
        x = x + 1j * r.standard_normal(shape) * scale
    return x.astype(dtype)


def relerr(got, want):
    """Norm-wise relative error, in complex128."""
    got, want = np.asarray(got, np.complex128), np.asarray(want, np.complex128)
    return np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-300)
