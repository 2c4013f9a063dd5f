"""float64 numpy model of the four-step fftconv backward (src/cuda/fftconv/fourstep_bwd.cuh and the
epilogues of fourstep.cuh), on top of the forward model (fftconv_fourstep_model.py: passes A and C,
pairs, split, merge, K̂ blocks). Written as the kernels index things:
  pass A twice (cols_forward): v = u ⊙ pre into Xv, dz = dy ⊙ post into Xg, [B·H][M1][M2];
  pass B' (rows_backward), one CTA per (h, k1), looping over b: per row pair (ka, kb) of Xv[b·H + h]
    and Xg[b·H + h]: twiddle, FFT over m2, split both; dV = conj(K̂)·G merged back into Xg; dK
    accumulated over b per pair (set at b = 0, added after); Z = K̂·V merged back into Xv when dpost
    is wanted; after the b loop dK / nfft merged, transformed back into Xdk[h] (H rows);
  pass C three times (cols_inverse with an epilogue): Xg → du, dpre; Xv → dpost; Xdk → dk, dskip.
Checked against a reference built from np.fft on rows padded past any wrap-around and by the
dot-product test <dy, y(x + δ) − y(x)> = <dx, δ> (y is linear in u, pre, post and affine in k, skip).
    python bench/fftconv_fourstep_bwd_model.py        (exit status 0 when every case matches)
"""
import importlib.util
import pathlib
import sys

import numpy as np

_spec = importlib.util.spec_from_file_location(
    "fftconv_fourstep_model", pathlib.Path(__file__).resolve().parent / "fftconv_fourstep_model.py")
fwd = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fwd)


def rows_backward(Xv, Xg, kblocks, M1, M2, H, need_z):
    """Pass B' in place on Xv, Xg ([B·H][M1][M2], row b·H + h); returns Xdk [H][M1][M2].
    kblocks: K̂ of every h in pass B's order (khat_block), 1/nfft included."""
    M = M1 * M2
    B = Xv.shape[0] // H
    Xdk = np.full((H, M1, M2), np.nan, complex)  # every slot must be written
    for h in range(H):
        for k1 in range(M1 // 2 + 1):
            ka, kb, pp = fwd.pairs(k1, M1, M2)
            blk = fwd.khat_block(h, k1, M1, M2)
            acc = np.full(2 * M2, np.nan, complex)  # shared memory: garbage until b = 0 sets it
            for b in range(B):
                row = b * H + h
                rv = {r: np.fft.fft(Xv[row, r] * fwd.twiddle(r, M2, M, -1)) for r in {ka, kb}}
                rg = {r: np.fft.fft(Xg[row, r] * fwd.twiddle(r, M2, M, -1)) for r in {ka, kb}}
                for pa, pb in pp:
                    f = ka + M1 * pa
                    vf, vg, w = fwd.split(rv[ka][pa], rv[kb][pb], f, M)
                    gf, gg, _ = fwd.split(rg[ka][pa], rg[kb][pb], f, M)
                    kf, kg = kblocks[blk + pa], kblocks[blk + M2 + pa]
                    pf, pg = np.conj(vf) * gf, np.conj(vg) * gg
                    acc[pa] = pf if b == 0 else acc[pa] + pf
                    acc[M2 + pa] = pg if b == 0 else acc[M2 + pa] + pg
                    df, dg = fwd.merge(np.conj(kf) * gf, np.conj(kg) * gg, w)
                    rg[ka][pa] = df
                    if f != 0:
                        rg[kb][pb] = dg
                    if need_z:
                        zf, zg = fwd.merge(kf * vf, kg * vg, w)
                        rv[ka][pa] = zf
                        if f != 0:
                            rv[kb][pb] = zg
                for r in {ka, kb}:
                    Xg[row, r] = np.fft.ifft(rg[r]) * M2 * fwd.twiddle(r, M2, M, +1)
                    if need_z:
                        Xv[row, r] = np.fft.ifft(rv[r]) * M2 * fwd.twiddle(r, M2, M, +1)
            # dK̂ = Σ_b conj(V)·G / nfft, merged and transformed back as the forward's product
            rk = {ka: np.full(M2, np.nan, complex), kb: np.full(M2, np.nan, complex)}  # all written
            for pa, pb in pp:
                f = ka + M1 * pa
                w = np.exp(-1j * np.pi * f / M)
                yf, yg = fwd.merge(acc[pa] * (0.5 / M), acc[M2 + pa] * (0.5 / M), w)
                rk[ka][pa] = yf
                if f != 0:
                    rk[kb][pb] = yg
            for r in {ka, kb}:
                Xdk[h, r] = np.fft.ifft(rk[r]) * M2 * fwd.twiddle(r, M2, M, +1)
    return Xdk


def fourstep_backward(dy, u, k, pre, post, skip, nfft, need_dpost=True):
    """(du, dk, dpre, dpost, dskip) of y = post ⊙ (conv(u ⊙ pre, k) + skip·u ⊙ pre); u, dy, gates
    (B, H, L), k (H, Lk), skip (H,); gates and skip may be None (then their gradient is None)."""
    B, H, L = u.shape
    Lk = k.shape[1]
    Lmin = min(Lk, L)
    M1, M2 = fwd.split_m(nfft // 2)
    # K̂ as set_filter stores it (pass A with 1/nfft, the spectrum variant of pass B), per h
    kblocks = np.concatenate([fwd.pass_b(fwd.pass_a(k[h], Lmin, M1, M2, 1.0 / nfft), M1, M2)[0]
                              for h in range(H)])
    ones = np.ones_like(u)
    v = u * (pre if pre is not None else ones)
    dz = dy * (post if post is not None else ones)
    Xv = np.stack([fwd.pass_a(v[b, h], L, M1, M2) for b in range(B) for h in range(H)])
    Xg = np.stack([fwd.pass_a(dz[b, h], L, M1, M2) for b in range(B) for h in range(H)])
    need_z = need_dpost and post is not None
    Xdk = rows_backward(Xv, Xg, kblocks, M1, M2, H, need_z)
    corr = np.stack([fwd.pass_c(Xg[r], M1, M2, L) for r in range(B * H)]).reshape(B, H, L)
    sk = skip[None, :, None] if skip is not None else 0.0
    # epilogue of Xg (EpiGrad): dv = corr + skip·dz; du = dv ⊙ pre; dpre = dv ⊙ u
    dv = corr + sk * dz
    du = dv * pre if pre is not None else dv
    dpre = dv * u if pre is not None else None
    dpost = None
    if need_z:  # epilogue of Xv (the forward's, with dy as the postgate): dy ⊙ (z + skip·v)
        z = np.stack([fwd.pass_c(Xv[r], M1, M2, L) for r in range(B * H)]).reshape(B, H, L)
        dpost = dy * (z + sk * v)
    # epilogue of Xdk (EpiFilter): c[s] for s < Lmin, zero up to Lk; dskip = c[0]
    c = np.stack([fwd.pass_c(Xdk[h], M1, M2, Lmin) for h in range(H)])
    dk = np.zeros((H, Lk))
    dk[:, :Lmin] = c
    dskip = c[:, 0].copy() if skip is not None else None
    return du, dk, dpre, dpost, dskip


def forward_ref(u, k, pre, post, skip, circular):
    """y in float64 by np.fft on rows padded to L + Lk (no wrap-around in causal mode)."""
    L = u.shape[-1]
    Lmin = min(k.shape[1], L)
    v = u * pre if pre is not None else u
    n = L if circular else L + Lmin
    y = np.fft.irfft(np.fft.rfft(v, n) * np.fft.rfft(k[:, :Lmin], n)[None], n)[..., :L]
    if skip is not None:
        y = y + skip[None, :, None] * v
    return y * post if post is not None else y


def backward_ref(dy, u, k, pre, post, skip, circular):
    """The gradients by their own formulas (correlations by np.fft on rows padded to 2L, no wrap)."""
    L, Lk = u.shape[-1], k.shape[1]
    Lmin = min(Lk, L)
    v = u * pre if pre is not None else u
    dz = dy * post if post is not None else dy
    n = L if circular else 2 * L
    # dv[t] = Σ_s k[s]·dz[t + s]; dk[s] = Σ_t dz[t]·v[t − s] (cyclic indices when circular)
    corr = np.fft.irfft(np.conj(np.fft.rfft(k[:, :Lmin], n))[None] * np.fft.rfft(dz, n), n)[..., :L]
    ck = np.fft.irfft((np.conj(np.fft.rfft(v, n)) * np.fft.rfft(dz, n)).sum(0), n)[:, :Lmin]
    sk = skip[None, :, None] if skip is not None else 0.0
    dv = corr + sk * dz
    dk = np.zeros((k.shape[0], Lk))
    dk[:, :Lmin] = ck
    z = forward_ref(u, k, pre, None, None, circular)
    return (dv * pre if pre is not None else dv, dk, dv * u if pre is not None else None,
            dy * (z + sk * v) if post is not None else None, (dz * v).sum((0, 2)) if skip is not None else None)


def dot_test(dy, args, grads, circular, rng):
    """max over the inputs of |<dy, y(x + δ) − y(x)> − <dx, δ>| / (|<dx, δ>| + scale)."""
    y0 = forward_ref(*args, circular)
    worst = 0.0
    for i, g in enumerate(grads):
        if g is None:
            continue
        d = rng.standard_normal(g.shape)
        a = list(args)
        a[i] = args[i] + d
        lhs = float((dy * (forward_ref(*a, circular) - y0)).sum())
        rhs = float((g * d).sum())
        worst = max(worst, abs(lhs - rhs) / (abs(rhs) + 1e-9 * np.abs(g).sum() * np.abs(d).max()))
    return worst


def check(B, H, L, Lk, circular, gates, rng, need_dpost=True):
    """Relative errors (model vs formula reference, worst gradient) and the model's dot test."""
    u, dy = rng.standard_normal((B, H, L)), rng.standard_normal((B, H, L))
    k = rng.standard_normal((H, Lk)) / np.sqrt(Lk)
    pre = rng.standard_normal((B, H, L)) if "pre" in gates else None
    post = rng.standard_normal((B, H, L)) if "post" in gates else None
    skip = rng.standard_normal(H) if "skip" in gates else None
    n = fwd.nfft_of(L, Lk, circular)
    got = fourstep_backward(dy, u, k, pre, post, skip, n, need_dpost)
    want = backward_ref(dy, u, k, pre, post, skip, circular)
    err = 0.0
    for name, g, w in zip(["du", "dk", "dpre", "dpost", "dskip"], got, want):
        if name == "dpost" and not need_dpost:
            assert g is None
            continue
        assert (g is None) == (w is None), name
        if g is not None:
            assert np.isfinite(g).all(), name
            err = max(err, np.linalg.norm(g - w) / np.linalg.norm(w))
    return err, dot_test(dy, (u, k, pre, post, skip), got, circular, rng)


CASES = [  # (B, H, L, Lk, circular, gates)
    (2, 2, 20000, 9000, False, ("pre", "post", "skip")),
    (3, 1, 30001, 40000, False, ("pre", "post", "skip")),  # Lk > L: taps past L get 0
    (1, 2, 65536, 3000, True, ("pre", "post", "skip")),
    (2, 1, 65536, 65536, True, ()),
    (1, 1, 40001, 40001, False, ("skip",)),                 # nfft 131072: M1 128, M2 512
]


def main():
    rng = np.random.default_rng(0)
    for B, H, L, Lk, circ, gates in CASES:
        err, dot = check(B, H, L, Lk, circ, gates, rng)
        print(f"B {B} H {H} L {L} Lk {Lk} {'circular' if circ else 'causal'} gates {gates}: "
              f"max rel err {err:.2e}, dot test {dot:.2e}")
        if err > 1e-11 or dot > 1e-9:
            return 1
    print("four-step backward model OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
