"""Self-check without stored answers (the FFTW verify-lib idea): every operator here is linear,
so each is checked by linearity, by its impulse response read against the DESIGN.md formula,
and, where it has one, by the adjoint identity <A x, y> = <x, A* y>. Fresh random inputs.

Every error is measured against the scale of the operands, never against a result that can be
small by chance: the adjoint identity as |<A x, y> - <x, A* y>| / (|A x| |y| + |x| |A* y|) (a
random inner product can be near 0, and dividing by it failed about one run in 500), the other
checks as ||a - b|| over the norms of the terms that made them. Rounding bounds all of these by
a small multiple of the unit roundoff, whatever the random draw.
"""
from __future__ import annotations

import numpy as np

import strux


def _norm(a) -> float:
    return float(np.linalg.norm(np.asarray(a, dtype=np.complex128).ravel()))


def _rel(a, b, scale=None) -> float:
    """||a - b|| / scale, scale defaulting to max(||a||, ||b||); 0 when both are 0."""
    a = np.asarray(a, dtype=np.complex128)
    b = np.asarray(b, dtype=np.complex128)
    s = max(_norm(a), _norm(b)) if scale is None else scale
    d = _norm(a - b)
    return d / s if s > 0 else d


def _dot(a, b) -> float:
    return float(np.vdot(np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()).real)


def _adjoint_error(Ax, y, x, Ahy) -> float:
    """|<A x, y> - <x, A* y>| against the operands' scale |A x| |y| + |x| |A* y|."""
    scale = _norm(Ax) * _norm(y) + _norm(x) * _norm(Ahy)
    return abs(_dot(Ax, y) - _dot(x, Ahy)) / scale if scale > 0 else 0.0


def check_fftconv(rng, dtype):
    B, H, L, Lk = 2, 3, 37, 11
    k = rng.standard_normal((H, Lk)).astype(dtype)
    u1, u2 = (rng.standard_normal((B, H, L)).astype(dtype) for _ in range(2))
    f = lambda u: strux.fftconv(u, k)
    f1, f2 = f(u1), f(u2)
    yield "fftconv linearity", _rel(f(2 * u1 - u2), 2 * f1 - f2, 2 * _norm(f1) + _norm(f2))
    delta = np.zeros((1, H, L), dtype)
    delta[..., 3] = 1  # impulse at t=3: y[h, t] = k[h, t-3]
    want = np.zeros((1, H, L))
    want[0, :, 3:3 + Lk] = k
    yield "fftconv impulse response", _rel(f(delta), want)
    dy = rng.standard_normal((B, H, L)).astype(dtype)
    du = strux.fftconv_vjp(dy, u1, k)[0]
    yield "fftconv adjoint identity", _adjoint_error(f1, dy, u1, du)


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
    yield "toeplitz adjoint identity", _adjoint_error(op.matvec(m), d, m, op.rmatvec(d))


def check_ks(rng, dtype):
    a, b, c, d = 2, 3, 5, 2
    w = rng.standard_normal((a, b, c, d)).astype(dtype)
    x = rng.standard_normal((4, a * c * d)).astype(dtype)
    y = strux.ks_matmul(x, w, (a, b, c, d))
    # y[:, i*b*d + k*d + j] = sum_l w[i,k,l,j] x[:, i*c*d + l*d + j]
    want = np.einsum("iklj,nilj->nikj", w.astype(np.float64), x.reshape(4, a, c, d)).reshape(4, a * b * d)
    # each output sums c products: scale by |w| |x| entrywise
    scale = _norm(np.einsum("iklj,nilj->nikj", np.abs(w.astype(np.float64)), np.abs(x.reshape(4, a, c, d))))
    yield "ks index formula", _rel(y, want, scale)
    dy = rng.standard_normal(y.shape).astype(dtype)
    dx = strux.ks_matmul_vjp(dy, x, w, (a, b, c, d))[0]
    yield "ks adjoint identity", _adjoint_error(y, dy, x, dx)


def check_scan(rng, dtype):
    B, T, n = 2, 17, 5
    a = rng.uniform(-1, 1, (B, T, n)).astype(dtype)
    b = rng.standard_normal((B, T, n)).astype(dtype)
    h = strux.diag_scan(a, b)
    step = a[:, 5] * h[:, 4] + b[:, 5]
    yield "diag_scan recurrence step", _rel(h[:, 5], step, _norm(np.abs(a[:, 5] * h[:, 4])) + _norm(b[:, 5]))
    u = rng.standard_normal((B, T, n)).astype(dtype)
    ac = rng.uniform(-0.5, 0.5, (B, T, n)).astype(dtype)
    hc = strux.circulant_scan(ac, u)
    idx = (np.arange(n)[:, None] - np.arange(n)[None, :]) % n
    Ah = np.einsum("bij,bj->bi", ac[:, 6][:, idx].astype(np.float64), hc[:, 5])
    absAh = np.einsum("bij,bj->bi", np.abs(ac[:, 6][:, idx].astype(np.float64)), np.abs(hc[:, 5]))
    yield "circulant_scan recurrence step", _rel(hc[:, 6], Ah + u[:, 6], _norm(absAh) + _norm(u[:, 6]))


CHECKS = (check_fftconv, check_toeplitz, check_ks, check_scan)
TOL = {np.float32: 1e-4, np.float64: 1e-10}


def run(progress=print, seed=None) -> bool:
    """Runs every check in float32 and float64; True when all pass. `progress` gets one line per
    check (None: silent); `seed` fixes the random inputs (default: fresh)."""
    rng = np.random.default_rng(seed)
    progress = progress or (lambda line: None)
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
