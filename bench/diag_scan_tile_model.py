"""A float64 model of the tile diag_scan kernel (src/cuda/scan/diag_scan_tile.cuh), indexed as the
kernel indexes: block = tile of LR lanes of the flattened (B, n / VW) channels (a tile may straddle
two batch rows; lanes past B * n / VW are dead), thread (warp, lane) -> channel lane lane % LR and
segment warp * (32 / LR) + lane / LR of L steps, chunks of TL_THREADS / LR * L steps, a ring of ns
stages filled `ns` chunks ahead (zeros past the sequence, as cp.async with no source bytes), the
per-thread maps, the shuffle scan over the warp's segments (every lane reads before any writes),
the warp totals folded from the carry, the fix-up and the stores; backward: the map
x -> conj(a_t) (dh_t + x) from t = T-1 down, h_{t-1} copied with step t (h0 or 0 at t = 0), dh0 the
final carry. Complex values, so a misplaced conjugate shows. Checked against the direct recurrence
by tests/python/test_diag_scan_tile_model.py.
    python bench/diag_scan_tile_model.py
"""
from __future__ import annotations

import numpy as np

THREADS, WARPS = 128, 4


def tile_scan(a, b, h0, *, VW, LR, L, ns, rev=False, hf=None, scale=1.0, bug=None):
    """Forward: h (B, T, n) from a, b, h0 (B, n) or None. Backward (rev): (da, db, dh0) from a, dh = b,
    the forward's h = hf and h0. `bug` breaks one step on purpose (the tests check it is caught)."""
    B, T, n = b.shape
    nv, SW, NA = n // VW, 32 // LR, 3 if rev else 2
    TC = THREADS // LR * L
    nchunks = -(-T // TC)
    tiles = -(-(B * nv) // LR)
    tid = np.arange(THREADS)
    warp, lane = tid // 32, tid % 32
    c, j = lane % LR, lane // LR
    seg = warp * SW + j
    flat = lambda x: x.reshape(-1)  # noqa: E731  (C order: base + t * n + k)
    fa, fb = flat(a), flat(b)
    ff = flat(hf) if rev else None
    f0 = None if h0 is None else flat(h0)
    out = [np.zeros(B * T * n, complex) for _ in range(2 if rev else 1)]
    dh0 = np.zeros(B * n, complex) if (rev and h0 is not None) else None
    one = np.ones((THREADS, VW), complex)

    for blk in range(tiles):
        q = blk * LR + c
        live = q < B * nv
        bi = np.where(live, q // nv, 0)
        ch = np.where(live, (q - bi * nv) * VW, 0)
        base = bi * T * n + ch
        h0i = bi * n + ch
        stage = np.zeros((ns, NA, L, THREADS, VW), complex)

        def when(k, s):
            i = k * TC + seg * L + s
            return T - 1 - i if rev else i

        def ld(arr, off, ok):  # (THREADS, VW): VW adjacent elements at off, zeros where not ok
            idx = np.where(ok, off, 0)[:, None] + np.arange(VW)
            return np.where(ok[:, None], arr[idx], 0)

        def issue(st, k):
            if k >= nchunks:
                return
            for s in range(L):
                t = when(k, s)
                inn = live & (t >= 0) & (t < T)
                stage[st, 0, s] = ld(fa, base + t * n, inn)
                stage[st, 1, s] = ld(fb, base + t * n, inn)
                if rev:
                    hp = ld(ff, base + (t - 1) * n, inn & (t >= 1))
                    if f0 is not None:
                        hp = np.where((inn & (t == 0))[:, None], ld(f0, h0i, inn & (t == 0)), hp)
                    stage[st, 2, s] = hp

        carry = np.zeros((THREADS, VW), complex)
        if not rev and f0 is not None:
            carry = scale * ld(f0, h0i, live)
        for st in range(ns):
            issue(st, st)
        for k in range(nchunks):
            st = k % ns
            A, H = one.copy(), np.zeros((THREADS, VW), complex)
            for s in range(L):
                t = when(k, s)
                inn = ((t >= 0) & (t < T))[:, None]
                av = stage[st, 0, s].conj() if rev else stage[st, 0, s]
                bv = av * stage[st, 1, s] if rev else scale * stage[st, 1, s]
                H = np.where(inn, av * H + bv, H)
                A = np.where(inn, av * A, A)
            d = 1 if bug == "shuffle stride" else LR
            while d < 32:  # shuffles: every lane reads the values before this round's writes
                src = np.where(lane >= d, tid - d, tid)
                Ap, Hp = A[src], H[src]
                up = (lane >= d)[:, None]
                H, A = np.where(up, A * Hp + H, H), np.where(up, A * Ap, A)
                d *= 2
            sA = np.ones((WARPS, LR, VW), complex)
            sH = np.zeros((WARPS, LR, VW), complex)
            last = j == SW - 1
            sA[warp[last], c[last]], sH[warp[last], c[last]] = A[last], H[last]
            src = np.where(lane >= LR, tid - LR, tid)
            first = (j == 0)[:, None]
            Ae, He = np.where(first, 1, A[src]), np.where(first, 0, H[src])
            x = np.zeros_like(carry)
            order = range(WARPS - 1, -1, -1) if bug == "fold order" else range(WARPS)
            for w in order:
                mine = (warp == w)[:, None]
                x = np.where(mine, Ae * carry + He, x)
                carry = sA[w, c] * carry + sH[w, c]
            for s in range(L):
                t = when(k, s)
                ok = live & (t >= 0) & (t < T)
                idx = (np.where(ok, base + t * n, 0)[:, None] + np.arange(VW))[ok]
                if not rev:
                    x = stage[st, 0, s] * x + scale * stage[st, 1, s]
                    out[0][idx] = x[ok]
                else:
                    g = stage[st, 1, s] + x
                    out[1][idx] = g[ok]
                    out[0][idx] = (g * stage[st, 2, s].conj())[ok]
                    x = stage[st, 0, s].conj() * g
            issue(st, k + ns if bug != "refill early" else k + ns - 1)
        if rev and dh0 is not None:
            w0 = live & (warp == 0) & (j == 0)
            dh0[(h0i[w0][:, None] + np.arange(VW)).reshape(-1)] = carry[w0].reshape(-1)
    shape = (B, T, n)
    if not rev:
        return out[0].reshape(shape)
    return out[0].reshape(shape), out[1].reshape(shape), None if dh0 is None else dh0.reshape(B, n)


def direct(a, b, h0, scale=1.0):
    h = np.zeros_like(b[:, 0]) if h0 is None else scale * h0
    out = np.empty_like(b)
    for t in range(b.shape[1]):
        h = a[:, t] * h + scale * b[:, t]
        out[:, t] = h
    return out


def direct_vjp(dh, a, h, h0):
    """g_t = dh_t + conj(a_{t+1}) g_{t+1}; da_t = g_t conj(h_{t-1}); db = g; dh0 = conj(a_0) g_0."""
    T = a.shape[1]
    g = np.empty_like(dh)
    acc = np.zeros_like(dh[:, 0])
    for t in range(T - 1, -1, -1):
        acc = dh[:, t] + (a[:, t + 1].conj() * acc if t + 1 < T else 0)
        g[:, t] = acc
    hp = np.zeros_like(h)
    hp[:, 1:] = h[:, :-1]
    if h0 is not None:
        hp[:, 0] = h0
    return g * hp.conj(), g, None if h0 is None else a[:, 0].conj() * g[:, 0]


def inputs(B, T, n, seed):
    r = np.random.default_rng(seed)
    a = (0.5 + 0.49 * r.random((B, T, n))) * np.exp(6.3j * r.random((B, T, n)))
    cx = lambda *s: r.standard_normal(s) + 1j * r.standard_normal(s)  # noqa: E731
    return a, cx(B, T, n), cx(B, n), cx(B, T, n)


def check(B, T, n, VW, LR, L, ns, *, with_h0=True, scale=1.0, seed=0, bug=None):
    """Largest relative error of the model's h, da, db, dh0 against the direct recurrence."""
    a, b, h0, dh = inputs(B, T, n, seed)
    h0 = h0 if with_h0 else None
    rel = lambda x, r: np.abs(x - r).max() / max(np.abs(r).max(), 1e-300)  # noqa: E731  (NaN stays NaN)
    ref = direct(a, b, h0, scale)
    err = [rel(tile_scan(a, b, h0, VW=VW, LR=LR, L=L, ns=ns, scale=scale, bug=bug), ref)]
    rda, rdb, rdh0 = direct_vjp(dh, a, ref, None if h0 is None else scale * h0)
    da, db, d0 = tile_scan(a, dh, None if h0 is None else scale * h0, VW=VW, LR=LR, L=L, ns=ns, rev=True, hf=ref, bug=bug)
    err += [rel(da, rda), rel(db, rdb)]
    if h0 is not None:
        err.append(rel(d0, rdh0))
    return float(np.max(err))  # NaN if any is


# (B, T, n, VW, LR, L, ns): the kernel's (VW, LR, L) for float32 (4, 16|8|4|2, 4), complex64 (2, ., 4),
# half types (8, ., 4), one-element lanes (1, 32, 16 or 8); T = 1, prime T, partial chunks, n not a
# multiple of the tile (tiles straddling batch rows, dead lanes), 2 to 6 stages.
CASES = [
    (1, 1, 4, 4, 8, 4, 2), (2, 1, 3, 1, 32, 16, 3),
    (2, 131, 32, 4, 8, 4, 2), (3, 257, 20, 4, 8, 4, 6),       # n = 5 lanes: tiles straddle batch rows
    (2, 1009, 16, 4, 4, 4, 3), (1, 523, 8, 4, 2, 4, 4),        # 64- and 32-byte rows; prime T
    (2, 300, 12, 2, 8, 4, 5), (3, 97, 24, 8, 2, 4, 2),         # complex64-like and half-type lanes
    (2, 389, 5, 1, 32, 16, 2), (1, 200, 7, 1, 32, 8, 6),       # one-element lanes, odd n
    (5, 64, 4, 4, 8, 4, 3), (2, 65, 8, 4, 2, 4, 2),            # exactly one chunk; one chunk and a step
    (2, 500, 48, 4, 16, 4, 3),                                 # 256-byte rows (forced only)
]

if __name__ == "__main__":
    for case in CASES:
        print(case, f"{check(*case):.1e}")
