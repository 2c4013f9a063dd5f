"""float64 numpy model of the GPU blocks fftconv solver (src/cuda/fftconv/blocks.cu): the block
geometry (fft_size), the gather of the blocks, the inner circular plan (as the FFT of length N it
computes), the scatter of the outputs and the backward's overlap sum, each with the kernels' flat
indices (block row rb = (b·nb + j)·H + h of stride N; own, next and first offsets of finish_kernel),
so a wrong index here is a wrong index there; and the float16 / bfloat16 path (blocks16_fftconv:
copy_in_kernel's three layouts, the gates inside the inner plan, copy_out_kernel, the backward on
blocks laid out ahead). Checked against tests/python/ref_fftconv.py.
    python bench/fftconv_blocks_model.py        (exit status 0 when every case matches)
"""
import pathlib
import sys

import numpy as np


def fft_size(m):
    """blocks::fft_size at ratio 4 (plan algo 13): the power of two >= max(1024, 4m). The index
    logic modelled here holds for any N >= m; the solver's own N is blocks::auto_fft_size."""
    n = 1024
    while n // 4 < m:
        n *= 2
    return n


def geometry(L, Lk, circular, N=None):
    """(m, N, S, nb): taps used, block transform, outputs per block, blocks per row."""
    m = Lk if circular else min(Lk, L)
    N = N or fft_size(m)
    S = N - (m - 1)
    return m, N, S, -(-L // S)


def _rows(B, H, nb):
    """(b, j, h) of every block row rb = (b·nb + j)·H + h, each of shape (rows, 1)."""
    rb = np.arange(B * nb * H)[:, None]
    h, bj = rb % H, rb // H
    return rb, bj // nb, bj % nb, h


def gather(x, gate, g, dz=False):
    """gather_kernel: (B·nb·H, N) blocks of x ⊙ gate (flattened (B, H, L) inputs)."""
    B, H, L, m, N, S, nb, circ = g
    rb, b, j, h = _rows(B, H, nb)
    i = np.arange(N)[None, :]
    t = j * S - (m - 1) + i
    if circ and not dz:
        t = np.where(t < 0, t + L, t)
    ok = (t >= 0) & (t < L) & ((i >= m - 1) if dz else True)
    src = (b * H + h) * L + np.clip(t, 0, L - 1)
    v = x[src] if gate is None else x[src] * gate[src]
    return np.where(ok, v, 0.0)


def inner_forward(xb, taps, skip, H):
    """The inner circular plan's forward: circular conv of length N per row (filter row rb mod H)."""
    N = xb.shape[1]
    hs = np.arange(xb.shape[0]) % H
    y = np.fft.irfft(np.fft.rfft(xb) * np.fft.rfft(taps, n=N)[hs], n=N)
    return y if skip is None else y + skip[hs, None] * xb


def inner_backward(gb, xb, taps, skip, H):
    """The inner plan's gradients for dz blocks gb: dv blocks and dk (H, m) summed over the rows."""
    N, m = xb.shape[1], taps.shape[1]
    hs = np.arange(xb.shape[0]) % H
    G = np.fft.rfft(gb)
    dv = np.fft.irfft(G * np.conj(np.fft.rfft(taps, n=N))[hs], n=N)
    if skip is not None:
        dv = dv + skip[hs, None] * gb
    c = np.fft.irfft(G * np.conj(np.fft.rfft(xb)), n=N)[:, :m]  # c[s] = Σ_i dz[i] v[i - s]
    return dv, np.stack([c[hs == h].sum(0) for h in range(H)])


def _outputs(g):
    """(rb, q, t, dst, valid) of scatter_kernel / finish_kernel: output q < S of block row rb."""
    B, H, L, m, N, S, nb, circ = g
    rb, b, j, h = _rows(B, H, nb)
    q = np.arange(S)[None, :]
    t = j * S + q
    return rb, j, q, t, (b * H + h) * L + np.minimum(t, L - 1), t < L


def scatter(ob, post, g, L_all):
    """scatter_kernel: y = ob[rb][m - 1 + q] ⊙ post at t = j·S + q < L."""
    m, N = g[3], g[4]
    rb, j, q, t, dst, ok = _outputs(g)
    z = ob.reshape(-1)[rb * N + (m - 1) + q]
    y = np.zeros(L_all)
    z = z if post is None else z * post[dst]
    y[dst[ok]] = z[ok]
    return y


def finish(dvb, zb, dy, u, pre, g, L_all):
    """finish_kernel: dv = own + next block's head + (circular) block 0's head; du, dpre, dpost."""
    B, H, L, m, N, S, nb, circ = g
    rb, j, q, t, dst, ok = _outputs(g)
    f = dvb.reshape(-1)
    n_all = f.size
    own = rb * N + (m - 1)
    nxt = own + H * N - S
    first = own - j * H * N - L + j * S
    dv = f[own + q]
    use_next = (j + 1 < nb) & (q >= S - (m - 1))
    dv = dv + np.where(use_next, f[np.clip(nxt + q, 0, n_all - 1)], 0.0)
    if circ:
        dv = dv + np.where(t >= L - (m - 1), f[np.clip(first + q, 0, n_all - 1)], 0.0)
    du, dpre, dpost = np.zeros(L_all), np.zeros(L_all), np.zeros(L_all)
    d = dst[ok]
    du[d] = (dv * pre[dst])[ok] if pre is not None else dv[ok]
    if pre is not None:
        dpre[d] = (dv * u[dst])[ok]
    dpost[d] = (dy[dst] * zb.reshape(-1)[own + q])[ok]
    return du, dpre, dpost


def blocks_fftconv(u, k, circular, pre=None, post=None, skip=None, dy=None, N=None):
    """y (and, with dy, (du, dk, dpre, dpost, dskip)) as the solver computes them."""
    B, H, L = u.shape
    Lk = k.shape[1]
    m, N, S, nb = geometry(L, Lk, circular, N)
    g = (B, H, L, m, N, S, nb, circular)
    flat = [None if a is None else a.reshape(-1) for a in (u, pre, post, dy)]
    uf, pf, qf, dyf = flat
    taps = k[:, :m]
    xb = gather(uf, pf, g)
    y = scatter(inner_forward(xb, taps, skip, H), qf, g, u.size).reshape(u.shape)
    if dy is None:
        return y
    dvb, dtaps = inner_backward(gather(dyf, qf, g, dz=True), xb, taps, skip, H)
    du, dpre, dpost = finish(dvb, inner_forward(xb, taps, skip, H), dyf, uf, pf, g, u.size)
    dk = np.zeros((H, Lk))
    dk[:, :m] = dtaps
    shape = u.shape
    return (y, du.reshape(shape), dk, None if pre is None else dpre.reshape(shape),
            None if post is None else dpost.reshape(shape), None if skip is None else dtaps[:, 0].copy())


# ---- the 16-bit path (blocks.hpp; copy_in_kernel / copy_out_kernel): gates inside the inner plan
def gather_ahead(x, g, v):
    """copy_in_kernel's kAheadV (v: only i < S) and kAheadDz (every i < N, circular t - L past L)
    layouts: block row rb holds x at t = j·S + i."""
    if x is None:
        return None
    B, H, L, m, N, S, nb, circ = g
    rb, b, j, h = _rows(B, H, nb)
    i = np.arange(N)[None, :]
    t = j * S + i
    if circ and not v:
        t = np.where(t >= L, t - L, t)
    ok = (t < L) & ((i < S) if v else True)
    return np.where(ok, x[(b * H + h) * L + np.clip(t, 0, L - 1)], 0.0)


def inner_forward16(xb, pb, qb, taps, skip, H):
    """The inner plan's forward with its own gates: ((k ⊛ v) + skip·v) ⊙ post, v = x ⊙ pre."""
    v = xb if pb is None else xb * pb
    y = inner_forward(v, taps, skip, H)
    return y if qb is None else y * qb


def inner_backward16(gb, xb, pb, qb, taps, skip, H):
    """The inner plan's gradients with its own gates: du, dpre blocks and dk (H, m)."""
    v = xb if pb is None else xb * pb
    dz = gb if qb is None else gb * qb
    dv, dk = inner_backward(dz, v, taps, skip, H)
    return (dv if pb is None else dv * pb), dv * xb, dk


def copy_out(ob, g, off, L_all):
    """copy_out_kernel: out[b, h, j·S + q] = ob[rb][off + q] for q < S, j·S + q < L."""
    N = g[4]
    rb, j, q, t, dst, ok = _outputs(g)
    y = np.zeros(L_all)
    y[dst[ok]] = ob.reshape(-1)[rb * N + off + q][ok]
    return y


def blocks16_fftconv(u, k, circular, pre=None, post=None, skip=None, dy=None, N=None):
    """As blocks_fftconv, by the 16-bit path's indices (in float64: the model checks the indices)."""
    B, H, L = u.shape
    Lk = k.shape[1]
    m, N, S, nb = geometry(L, Lk, circular, N)
    g = (B, H, L, m, N, S, nb, circular)
    uf, pf, qf, dyf = [None if a is None else a.reshape(-1) for a in (u, pre, post, dy)]
    taps = k[:, :m]
    hist = [None if a is None else gather(a, None, g) for a in (uf, pf, qf)]
    y = copy_out(inner_forward16(*hist, taps, skip, H), g, m - 1, u.size).reshape(u.shape)
    if dy is None:
        return y
    dpost = None
    if post is not None:  # the forward with dy as its postgate
        dpost = copy_out(inner_forward16(hist[0], hist[1], gather(dyf, None, g), taps, skip, H), g, m - 1, u.size)
    dub, dpb, dtaps = inner_backward16(gather_ahead(dyf, g, False), gather_ahead(uf, g, True),
                                       gather_ahead(pf, g, True), gather_ahead(qf, g, False), taps, skip, H)
    dk = np.zeros((H, Lk))
    dk[:, :m] = dtaps
    shape = u.shape
    return (y, copy_out(dub, g, 0, u.size).reshape(shape), dk,
            None if pre is None else copy_out(dpb, g, 0, u.size).reshape(shape),
            None if post is None else dpost.reshape(shape), None if skip is None else dtaps[:, 0].copy())


def check(B, H, L, Lk, circular, gates=("pre", "post", "skip"), N=None, seed=0, path=None):
    """Largest relative error (max norm) of the model's y and gradients against ref_fftconv
    (path "16": the 16-bit path's model, else the float32 / float64 one)."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "python"))
    from ref_fftconv import ref_fftconv, ref_fftconv_vjp
    rng = np.random.default_rng(seed)
    u, k, dy = rng.standard_normal((B, H, L)), rng.standard_normal((H, Lk)), rng.standard_normal((B, H, L))
    pre = rng.standard_normal((B, H, L)) if "pre" in gates else None
    post = rng.standard_normal((B, H, L)) if "post" in gates else None
    skip = rng.standard_normal(H) if "skip" in gates else None
    mode = "circular" if circular else "causal"
    got = (blocks16_fftconv if path == "16" else blocks_fftconv)(u, k, circular, pre, post, skip, dy, N)
    want = (ref_fftconv(u, k, mode, pre, post, skip),) + tuple(ref_fftconv_vjp(dy, u, k, mode, pre, post, skip))
    err = 0.0
    for a, w in zip(got, want):
        assert (a is None) == (w is None)
        if w is not None:
            err = max(err, float(np.abs(a - w).max() / max(np.abs(w).max(), 1e-300)))
    return err


# (B, H, L, Lk, circular, N): L = 1, one block, Lk > L, several blocks, block 0's head wrapped,
# and forced small N where a position sits in a block's output and the next block's head and the
# wrapped head at once.
CASES = [(2, 3, 1, 1, False, None), (1, 2, 1, 50, False, None), (2, 2, 700, 33, False, None),
         (1, 2, 500, 1000, False, None), (2, 2, 5001, 100, False, None), (1, 2, 4099, 257, False, None),
         (2, 2, 1, 1, True, None), (1, 2, 1031, 1031, True, None), (2, 3, 5003, 257, True, None),
         (2, 1, 1025, 7, True, None), (1, 2, 10, 4, True, 8), (2, 1, 23, 5, False, 8), (1, 1, 13, 5, True, 8),
         (1, 1, 9, 9, True, 16)]


def main():
    worst = 0.0
    for B, H, L, Lk, circ, N in CASES:
        for gates in [(), ("pre",), ("post",), ("skip",), ("pre", "post", "skip")]:
            for path in (None, "16"):
                e = check(B, H, L, Lk, circ, gates, N, path=path)
                worst = max(worst, e)
                print(f"B={B} H={H} L={L} Lk={Lk} {'circular' if circ else 'causal'} N={N or 'auto'} {gates} "
                      f"{path or '32'}: {e:.1e}")
    print(f"worst {worst:.1e}")
    return 0 if worst < 1e-10 else 1


if __name__ == "__main__":
    sys.exit(main())
