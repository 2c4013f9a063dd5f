"""Contract checks from DESIGN.md ("scan", "ks") written straight from its text: signatures as
DESIGN.md writes them and `a` broadcasting against `b` by numpy's rules, each against a plain
float64 loop of the formula."""
import numpy as np
import pytest

import strux


def _loop_diag(a, b, h0=None, reverse=False, axis=1):
    """h_t = a_t h_{t-1} + b_t (h_t = a_t h_{t+1} + b_t reversed), complex128, time at `axis`."""
    b = np.asarray(b, np.complex128)
    a = np.broadcast_to(np.asarray(a, np.complex128), b.shape)
    if axis != 1:
        a, b = a.transpose(0, 2, 1), b.transpose(0, 2, 1)
    Bb, T, n = b.shape
    h = np.zeros(b.shape, np.complex128)
    prev = np.zeros((Bb, n), np.complex128) if h0 is None else np.asarray(h0, np.complex128)
    for t in (range(T - 1, -1, -1) if reverse else range(T)):
        prev = a[:, t] * prev + b[:, t]
        h[:, t] = prev
    return (h if axis == 1 else h.transpose(0, 2, 1)), prev


def _loop_dense(M, u, h0):
    """h_t = M_t h_{t-1} + u_t with explicit (B, T, n, n) matrices, float64."""
    Bb, T, n = u.shape
    h, prev = np.zeros(u.shape), np.asarray(h0, np.float64)
    for t in range(T):
        prev = np.einsum("bij,bj->bi", M[:, t], prev) + u[:, t]
        h[:, t] = prev
    return h


def _circ(a):
    n = a.shape[-1]
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    return a[..., (i - j) % n]


def _rel(x, r):
    return float(np.max(np.abs(np.asarray(x) - r)) / max(np.max(np.abs(r)), 1e-300))


# ---- h0 is the third positional argument of every scan (DESIGN.md: f(a, u, h0=None)) ------------

@pytest.mark.parametrize("B,T,n", [(2, 5, 7), (1, 1, 1), (3, 2, 4)])
def test_circulant_scan_takes_h0_positionally(B, T, n):
    r = np.random.default_rng(11)
    a, u, h0 = 0.5 * r.standard_normal((B, T, n)), r.standard_normal((B, T, n)), r.standard_normal((B, n))
    h = strux.circulant_scan(a, u, h0)
    assert _rel(h, _loop_dense(_circ(a), u, h0)) < 1e-12
    assert np.array_equal(h, strux.circulant_scan(a, u, h0=h0))
    hf = strux.circulant_scan(np.fft.rfft(a), u, h0, fourier=True)
    assert _rel(hf, _loop_dense(_circ(a), u, h0)) < 1e-12
    dh = r.standard_normal((B, T, n))
    g_pos = strux.circulant_scan_vjp(dh, a, u, h0)
    g_kw = strux.circulant_scan_vjp(dh, a, u, h0=h0)
    assert all(np.array_equal(x, y) for x, y in zip(g_pos, g_kw)) and g_pos[2] is not None


@pytest.mark.parametrize("B,T,p,k", [(2, 3, 2, 3), (1, 1, 1, 1), (1, 4, 3, 1)])
def test_block_circulant_scan_takes_h0_positionally(B, T, p, k):
    r = np.random.default_rng(12)
    n = p * k
    a, u, h0 = 0.4 * r.standard_normal((B, T, p, p, k)), r.standard_normal((B, T, n)), r.standard_normal((B, n))
    c = np.moveaxis(_circ(a), -3, -2).reshape(B, T, n, n)  # block (i, j) = circ(a[i, j]), index i*k + r
    h = strux.block_circulant_scan(a, u, h0)
    assert _rel(h, _loop_dense(c, u, h0)) < 1e-12
    assert np.array_equal(h, strux.block_circulant_scan(a, u, h0=h0))
    dh = r.standard_normal((B, T, n))
    g_pos = strux.block_circulant_scan_vjp(dh, a, u, h0)
    g_kw = strux.block_circulant_scan_vjp(dh, a, u, h0=h0)
    assert all(np.array_equal(x, y) for x, y in zip(g_pos, g_kw)) and g_pos[2] is not None


# ---- diag_scan: `a` broadcasts against `b` by numpy's rules (lower ranks too) -------------------

B, T, N = 2, 5, 3


@pytest.mark.parametrize("axis", [1, 2, -1])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("a_shape", [(N,), (1, N), (T, N), (1, 1), (1,), ()], ids=str)
def test_diag_scan_lower_rank_a_broadcasts_by_numpy_rules(a_shape, reverse, axis):
    """numpy aligns trailing axes in the caller's layout: for time-last arrays (B, n, T) an `a` of
    shape (T,) is a per-step decay shared by every batch and channel."""
    r = np.random.default_rng(13)
    bshape = (B, T, N) if axis == 1 else (B, N, T)
    a_shape = tuple(bshape[len(bshape) - len(a_shape):][i] if s != 1 else 1 for i, s in enumerate(a_shape))
    a = 0.8 * r.standard_normal(a_shape)
    b, h0 = r.standard_normal(bshape), r.standard_normal((B, N))
    h, last = strux.diag_scan(a, b, h0, axis=axis, reverse=reverse, return_final=True)
    ref, ref_last = _loop_diag(a, b, h0, reverse, axis)
    assert h.shape == bshape and h.dtype == np.float64
    assert _rel(h, ref) < 1e-13 and _rel(last, ref_last) < 1e-13
    # the gradient of a broadcast `a` comes back in a's own shape, summed over the broadcast axes
    dh = r.standard_normal(bshape)
    da, db, dh0 = strux.diag_scan_vjp(dh, a, b, h0, axis=axis, reverse=reverse)
    da3, db3, dh03 = strux.diag_scan_vjp(dh, np.broadcast_to(a, bshape).copy(), b, h0, axis=axis, reverse=reverse)
    assert da.shape == a.shape and da.dtype == np.float64
    lead = len(bshape) - a.ndim
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(a.shape) if s == 1)
    assert _rel(da, da3.sum(axis=axes).reshape(a.shape)) < 1e-12
    assert _rel(db, db3) < 1e-13 and _rel(dh0, dh03) < 1e-13


def test_diag_scan_lower_rank_a_still_checks_sizes():
    b = np.ones((B, T, N))
    for a in (np.ones(N + 1), np.ones((T + 1, N)), np.ones((1, 1, 1, N))):
        with pytest.raises(ValueError, match="'a'"):
            strux.diag_scan(a, b)
        with pytest.raises(ValueError, match="'a'"):
            strux.diag_scan_vjp(b, a, b)
    with pytest.raises(TypeError, match="'a'"):   # a flag where an array goes is not the number 1
        strux.diag_scan(True, b)
