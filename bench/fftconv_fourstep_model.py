"""float64 numpy model of the four-step fftconv solver (src/cuda/fftconv/fourstep*.cuh): the index
mapping, twiddles, real-FFT untangle/re-tangle across the row pair (k1, M1 - k1) and the inverse,
checked against np.fft. Each pass is written as the kernels run it (pass A: column FFTs over m1;
pass B: per row pair, twiddle, FFT over m2, split, filter, merge, inverse FFT, conj twiddle; pass C:
inverse column FFTs), so a wrong index here is a wrong index there.
    python bench/fftconv_fourstep_model.py        (exit status 0 when every case matches)
"""
import sys

import numpy as np


def split_m(M):
    """(M1, M2) as the plan picks them: M2 = 2^min(11, log2 M - 7), M1 = M / M2."""
    lm = M.bit_length() - 1
    M2 = 1 << min(11, lm - 7)
    return M // M2, M2


def pass_a(x, nvalid, M1, M2, scale=1.0):
    """Column FFTs: X[k1][m2] = sum_m1 z[m1*M2 + m2] W_M1^(m1 k1), z[m] = x[2m] + i x[2m+1] (zero past nvalid)."""
    M = M1 * M2
    r = np.zeros(2 * M)
    r[:nvalid] = x[:nvalid] * scale
    z = (r[0::2] + 1j * r[1::2]).reshape(M1, M2)  # z[m1][m2]
    return np.fft.fft(z, axis=0)                    # [k1][m2]


def twiddle(k1, M2, M, sign):
    return np.exp(sign * 2j * np.pi * np.arange(M2) * k1 / M)


def pairs(k1, M1, M2):
    """(ka, kb, [(pa, pb)]) of the pass-B CTA for k1 in [0, M1/2]: positions in rows ka and kb."""
    ka, kb = k1, (M1 - k1) % M1
    if ka != kb:
        return ka, kb, [(j, M2 - 1 - j) for j in range(M2)]
    if k1 == 0:
        return ka, kb, [(j, (M2 - j) % M2) for j in range(M2 // 2 + 1)]
    return ka, kb, [(j, M2 - 1 - j) for j in range(M2 // 2)]


def split(zf, zg, f, M):
    e = 0.5 * (zf + np.conj(zg))
    o = -0.5j * (zf - np.conj(zg))
    w = np.exp(-1j * np.pi * f / M)
    return e + w * o, np.conj(e - w * o), w


def merge(yf, yg, w):
    a, d = yf + np.conj(yg), yf - np.conj(yg)
    t = 1j * np.conj(w) * d
    return a + t, np.conj(a - t)


def khat_block(h, k1, M1, M2):
    """Start of the K̂ block of (h, k1) (fourstep.cuh khat_block): K̂[f] of pair j at j, K̂[M - f] at M2 + j."""
    return (h * (M1 // 2 + 1) + k1) * 2 * M2


def pass_b(X, M1, M2, kblocks=None):
    """In place: forward row FFTs, split, times K̂ (read from its blocks), merge, inverse row FFTs.
    kblocks None: the spectrum variant; returns (the blocks as stored, the half spectrum [M + 1])."""
    M = M1 * M2
    spectrum = kblocks is None
    if spectrum:
        kblocks = np.full(khat_block(1, 0, M1, M2), np.nan, complex)
        half = np.zeros(M + 1, complex)
    for k1 in range(M1 // 2 + 1):
        ka, kb, pp = pairs(k1, M1, M2)
        blk = khat_block(0, k1, M1, M2)
        rows = {r: np.fft.fft(X[r] * twiddle(r, M2, M, -1)) for r in {ka, kb}}
        for pa, pb in pp:
            f = ka + M1 * pa
            g = M - f
            assert (g % M) == kb + M1 * pb, (k1, pa, pb)
            xf, xg, w = split(rows[ka][pa], rows[kb][pb], f, M)
            if spectrum:
                kblocks[blk + pa], kblocks[blk + M2 + pa] = xf, xg
                half[f], half[g] = xf, xg
                continue
            zf, zg = merge(xf * kblocks[blk + pa], xg * kblocks[blk + M2 + pa], w)
            rows[ka][pa] = zf
            if f != 0:
                rows[kb][pb] = zg
        if spectrum:
            continue
        for r in {ka, kb}:
            X[r] = np.fft.ifft(rows[r]) * M2 * twiddle(r, M2, M, +1)
    return (kblocks, half) if spectrum else None


def pass_c(X, M1, M2, L):
    z = (np.fft.ifft(X, axis=0) * M1).reshape(-1)  # z'[m1*M2 + m2]
    y = np.empty(2 * z.size)
    y[0::2], y[1::2] = z.real, z.imag
    return y[:L]


def fourstep_conv(u, k, nfft, circular):
    L, Lmin = u.size, min(k.size, u.size)
    M = nfft // 2
    M1, M2 = split_m(M)
    kblocks, khat = pass_b(pass_a(k, Lmin, M1, M2, 1.0 / nfft), M1, M2)
    ref_k = np.fft.rfft(np.pad(k[:Lmin], (0, nfft - Lmin))) / nfft
    assert np.allclose(khat, ref_k, rtol=0, atol=1e-12 * np.abs(ref_k).max()), "spectrum"
    X = pass_a(u, L, M1, M2)
    pass_b(X, M1, M2, kblocks)  # NaN in a block slot the kernels never write would show in y
    return pass_c(X, M1, M2, L)


def reference(u, k, circular):
    L, Lmin = u.size, min(k.size, u.size)
    n = L if circular else L + Lmin
    return np.fft.irfft(np.fft.rfft(u, n) * np.fft.rfft(k[:Lmin], n), n)[:L]


def nfft_of(L, Lk, circular):
    if circular:
        return L
    n = 65536
    while n < L + min(Lk, L) - 1:
        n *= 2
    return n


def main():
    rng = np.random.default_rng(0)
    cases = [(65536, 65536, True), (131072, 1000, True), (40001, 40001, False), (65537, 300, False),
             (100000, 100000, False), (20000, 9000, False), (300000, 5, False), (1 << 20, 1 << 20, True)]
    # the smallest and largest splits (M1 = 128 … 1024) on their own, without a convolution
    for M in (1 << 15, 1 << 18, 1 << 21):
        M1, M2 = split_m(M)
        x = rng.standard_normal(2 * M)
        spec = pass_b(pass_a(x, 2 * M, M1, M2), M1, M2)[1]
        ref = np.fft.rfft(x)
        err = np.abs(spec - ref).max() / np.abs(ref).max()
        print(f"rfft M = {M} (M1 {M1}, M2 {M2}): max rel err {err:.2e}")
        if err > 1e-12:
            return 1
    for L, Lk, circ in cases:
        u, k = rng.standard_normal(L), rng.standard_normal(Lk)
        n = nfft_of(L, Lk, circ)
        y = fourstep_conv(u, k, n, circ)
        ref = reference(u, k, circ)
        err = np.linalg.norm(y - ref) / np.linalg.norm(ref)
        print(f"L {L} Lk {Lk} {'circular' if circ else 'causal'} nfft {n} {split_m(n // 2)}: rel err {err:.2e}")
        if err > 1e-12:
            return 1
    print("four-step model OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
