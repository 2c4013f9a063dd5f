"""Self-check without stored answers (the FFTW verify-lib idea): every operator here is linear,
so each is checked by linearity, by its impulse response read against the DESIGN.md formula,
and, where it has one, by the adjoint identity <A x, y> = <x, A* y>. Fresh random inputs.
"""
from __future__ import annotations

import numpy as np

import strux


def _rel(a, b) -> float:
    a = np.asarray(a, dtype=np.complex128)
    b = np.asarray(b, dtype=np.complex128)
    n = np.linalg.norm(b.ravel())
    return float(np.linalg.norm((a - b).ravel()) / (n if n > 0 else 1.0))


def _dot(a, b) -> float:
    return float(np.vdot(np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()).real)


def check_fftconv(rng, dtype):
    B, H, L, Lk = 2, 3, 37, 11
    k = rng.standard_normal((H, Lk)).astype(dtype)
    u1, u2 = (rng.standard_normal((B, H, L)).astype(dtype) for _ in range(2))
    f = lambda u: strux.fftconv(u, k)
    yield "fftconv linearity", _rel(f(2 * u1 - u2), 2 * f(u1) - f(u2))
    delta = np.zeros((1, H, L), dtype)
    delta[..., 3] = 1  # impulse at t=3: y[h, t] = k[h, t-3]
    want = np.zeros((1, H, L))
    want[0, :, 3:3 + Lk] = k
    yield "fftconv impulse response", _rel(f(delta), want)
    dy = rng.standard_normal((B, H, L)).astype(dtype)
    du = strux.fftconv_vjp(dy, u1, k)[0]
    yield "fftconv adjoint identity", abs(_dot(f(u1), dy) - _dot(u1, du)) / (abs(_dot(f(u1), dy)) + 1e-30)


def check_toeplitz(rng, dtype):
    Nt, Nd, Nm = 9, 3, 4
    blocks = rng.standard_normal((Nt, Nd, Nm)).astype(dtype)
    op = strux.BlockToeplitz(blocks)
    m = rng.standard_normal((Nt, Nm)).astype(dtype)
    d = rng.standard_normal((Nt, Nd)).astype(dtype)
    e = np.zeros((Nt, Nm), dtype)
    e[2, 1] = 1  # column (2, 1) of F: blocks[i-2][:, 1] for i >= 2
    want = np.zeros((Nt, Nd))
    want[2:] = blocks[:Nt - 2, :, 1]
    yield "toeplitz impulse response", _rel(op.matvec(e), want)
    lhs, rhs = _dot(op.matvec(m), d), _dot(m, op.rmatvec(d))
    yield "toeplitz adjoint identity", abs(lhs - rhs) / (abs(lhs) + 1e-30)


def check_ks(rng, dtype):
    a, b, c, d = 2, 3, 5, 2
    w = rng.standard_normal((a, b, c, d)).astype(dtype)
    x = rng.standard_normal((4, a * c * d)).astype(dtype)
    y = strux.ks_matmul(x, w, (a, b, c, d))
    # y[:, i*b*d + k*d + j] = sum_l w[i,k,l,j] x[:, i*c*d + l*d + j]
    want = np.einsum("iklj,nilj->nikj", w.astype(np.float64), x.reshape(4, a, c, d)).reshape(4, a * b * d)
    yield "ks index formula", _rel(y, want)
    dy = rng.standard_normal(y.shape).astype(dtype)
    dx = strux.ks_matmul_vjp(dy, x, w, (a, b, c, d))[0]
    yield "ks adjoint identity", abs(_dot(y, dy) - _dot(x, dx)) / (abs(_dot(y, dy)) + 1e-30)


def check_scan(rng, dtype):
    B, T, n = 2, 17, 5
    a = rng.uniform(-1, 1, (B, T, n)).astype(dtype)
    b = rng.standard_normal((B, T, n)).astype(dtype)
    h = strux.diag_scan(a, b)
    step = a[:, 5] * h[:, 4] + b[:, 5]
    yield "diag_scan recurrence step", _rel(h[:, 5], step)
    u = rng.standard_normal((B, T, n)).astype(dtype)
    ac = rng.uniform(-0.5, 0.5, (B, T, n)).astype(dtype)
    hc = strux.circulant_scan(ac, u)
    idx = (np.arange(n)[:, None] - np.arange(n)[None, :]) % n
    want = np.einsum("bij,bj->bi", ac[:, 6][:, idx].astype(np.float64), hc[:, 5]) + u[:, 6]
    yield "circulant_scan recurrence step", _rel(hc[:, 6], want)


CHECKS = (check_fftconv, check_toeplitz, check_ks, check_scan)
TOL = {np.float32: 1e-4, np.float64: 1e-10}


def run(progress=print) -> bool:
    rng = np.random.default_rng()
    ok = True
    for dtype in (np.float32, np.float64):
        for check in CHECKS:
            try:
                results = list(check(rng, dtype))
            except Exception as e:  # a crash is a failed check, reported, not hidden
                results = [(f"{check.__name__} raised {type(e).__name__}: {e}", float("inf"))]
            for name, err in results:
                good = err <= TOL[dtype]
                ok &= good
                progress(f"{'ok  ' if good else 'FAIL'} {np.dtype(dtype).name:8} {name:36} error {err:.2e}")
    return ok
