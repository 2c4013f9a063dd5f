"""A float64 model of the tensor-core fftconv kernels (src/cuda/fftconv/tensor.cuh): their
indexing taken literally (shared-memory swizzle, mma fragment layouts per lane, tile order,
twiddle indices, radix-r pass, the fused middle with K̂, two rows per complex sequence), the mma
products done exactly, optionally with the kernels' operand rounding (hi + lo halves of float16).
Checked against np.convolve before a GPU run; keep it in step with tensor.cuh when the layout
changes. Also checks that every half warp's fragment accesses hit distinct bank pairs.
Prints the twiddle table lines per warp load (direct vs factored, NOTES round 2); --ftw models the
factored twiddles (plan algo 6).
    python bench/fftconv_tensor_model.py [--rounding] [--big] [--ftw]
"""
import sys

import numpy as np


def popc(x):
    return bin(x).count("1")


def swz(a):
    return a ^ (popc(a & 0x11111110) & 1) ^ ((popc(a & 0x22222220) & 1) << 3) ^ ((popc(a & 0x44444440) & 1) << 2)


def passes16(N):
    return 3 if N >= 4096 else 2


def radix_r(N):
    return N // 16 ** passes16(N)


def seqs_for(N):
    return 1 if N >= 8192 else 8192 // N


KK = np.arange(16)
F16 = np.exp(-2j * np.pi * np.outer(KK, KK) / 16)
ROUNDING = "--rounding" in sys.argv
FTW = "--ftw" in sys.argv  # factored twiddles (tensor.cuh pass16 FT, plan algo 6)


def twiddle(tw, Q, S, low0, j, k):
    """W_S^((low0 + j)·k) as the kernel looks it up: directly, or (FTW) as W_S^(low0·k)·W_S^(j·k)."""
    at = lambda m: tw[(m & (S - 1)) * (Q // S)]  # noqa: E731
    return at(low0 * k) * at(j * k) if FTW else at((low0 + j) * k)


def twiddle_lines(Q, J):
    """Distinct 128-byte lines of the float2 table per warp load of a twiddled pass, worst tile:
    (direct forward, direct inverse, factored forward per-tile, factored inverse per-tile)."""
    Lw = 16 ** J
    S = 16 * Lw
    line = lambda m: ((m & (S - 1)) * (Q // S) * 8) // 128  # noqa: E731
    worst = [0, 0, 0, 0]
    for low0 in range(0, Lw, 8):
        for e in range(2):
            for h in range(2):
                fd = {line((low0 + 2 * q + e) * (g + 8 * h)) for g in range(8) for q in range(4)}
                iv = {line((low0 + g) * (2 * q + e + 8 * h)) for g in range(8) for q in range(4)}
                ff = {line(low0 * (g + 8 * h)) for g in range(8)}
                fi = {line(low0 * (2 * q + e + 8 * h)) for q in range(4)}
                worst = [max(a, len(b)) for a, b in zip(worst, (fd, iv, ff, fi))]
    return worst


def split(x):
    hi = x.astype(np.float16).astype(np.float64)
    lo = ((x - hi) * 2048).astype(np.float16).astype(np.float64) / 2048
    return hi, lo


def dft_tile(X, inverse):
    """16×8 complex tile times F (or conj F): exact, or the kernels' three hi/lo products."""
    M = np.conj(F16) if inverse else F16
    if not ROUNDING:
        return M @ X
    out = 0
    for A, Xp, sgn in ((M.real, X.real, 1), (-M.imag, X.imag, 1), (M.imag, X.real, 1j), (M.real, X.imag, 1j)):
        (ah, al), (xh, xl) = split(A), split(Xp.astype(np.float32).astype(np.float64))
        out = out + sgn * (ah @ xh + ah @ xl + al @ xh)
    return out


def lanes():
    for lane in range(32):
        g, q = lane >> 2, lane & 3
        for e in range(2):
            for h in range(2):
                yield g, q, e, h


def tile(buf, Q, J, t, inverse, tw, kh=None):
    """pass16 (kh None) or middle (J = 0, kh: K̂ at a logical position) on tile t."""
    Lw = 16 ** J
    S, kT = 16 * Lw, Q // 128
    addr = lambda k, c: (c // Lw) * S + k * Lw + (c & (Lw - 1))  # noqa: E731
    blk, c0 = t // kT, 8 * (t % kT)
    base = blk * Q + addr(0, c0)
    sb, low0 = swz(base), c0 & (Lw - 1)

    def load(inv):
        X = np.zeros((16, 8), complex)
        for g, q, e, h in lanes():
            v = buf[sb ^ swz(addr(2 * q + e + 8 * h, g))]
            if inv and J > 0:
                v = v * np.conj(twiddle(tw, Q, S, low0, g, 2 * q + e + 8 * h))
            X[2 * q + e + 8 * h, g] = v
        return X

    def store(Y, fwd_scale, kfac):
        for g, q, e, h in lanes():
            v = Y[g + 8 * h, 2 * q + e]
            if fwd_scale:
                v = v / 16
                if J > 0:
                    v = v * twiddle(tw, Q, S, low0, 2 * q + e, g + 8 * h)
            if kfac:
                v = v * kh(base + addr(g + 8 * h, 2 * q + e))
            buf[sb ^ swz(addr(g + 8 * h, 2 * q + e))] = v

    if kh is None:
        store(dft_tile(load(inverse), inverse), not inverse, False)
    else:
        store(dft_tile(load(False), False), True, True)
        store(dft_tile(load(True), True), False, False)


def radix_load(buf, N, seqs, ld):
    R = radix_r(N)
    Q = N // R
    for i in range(seqs * Q):
        s, c = i // Q, i % Q
        x = np.array([ld(s, Q * m + c) for m in range(R)])
        x = np.fft.fft(x) * np.exp(-2j * np.pi * c * np.arange(R) / N) / R
        for k in range(R):
            buf[swz(s * N + k * Q + c)] = x[k]


def radix_store(buf, N, seqs, st):
    R = radix_r(N)
    Q = N // R
    for i in range(seqs * Q):
        s, c = i // Q, i % Q
        x = np.array([buf[swz(s * N + k * Q + c)] for k in range(R)]) * np.exp(2j * np.pi * c * np.arange(R) / N)
        x = np.fft.ifft(x) * R
        for m in range(R):
            st(s, Q * m + c, x[m])


def conv(u, k, N, circular):
    """The forward kernel on u (B, H, L) and k (H, Lk) at FFT size N."""
    B, H, L = u.shape
    Lmin = min(L, k.shape[1])
    P = passes16(N)
    Q = 16 ** P
    tw = np.exp(-2j * np.pi * np.arange(Q) / Q)
    SEQ, ntile = seqs_for(N), seqs_for(N) * N // 128
    khat = np.zeros((H, N), complex)
    for blk in range((H + SEQ - 1) // SEQ):  # spectrum_kernel
        buf, h0 = np.zeros(SEQ * N, complex), blk * SEQ
        radix_load(buf, N, SEQ, lambda s, n: k[h0 + s, n] if h0 + s < H and n < Lmin else 0.0)
        for J in range(P - 1, -1, -1):
            for t in range(ntile):
                tile(buf, Q, J, t, False, tw)
        for i in range(SEQ * N):
            if h0 + i // N < H:
                khat[h0 + i // N, i % N] = buf[swz(i)] * N
    pairs = (B + 1) // 2
    nseq = H * pairs
    y = np.full(B * H * L, np.nan)
    uf = u.reshape(-1)
    for blk in range((nseq + SEQ - 1) // SEQ):  # forward_kernel
        rows = []
        for s in range(SEQ):
            seq = blk * SEQ + s
            h, b = (seq // pairs if seq < nseq else 0), 2 * (seq % pairs)
            o0 = (b * H + h) * L if seq < nseq else -1
            rows.append((o0, o0 + H * L if seq < nseq and b + 1 < B else -1, h))
        v = lambda o, n: 0.0 if o < 0 or n >= L else uf[o + n]  # noqa: E731
        buf = np.zeros(SEQ * N, complex)
        radix_load(buf, N, SEQ, lambda s, n: v(rows[s][0], n) + 1j * v(rows[s][1], n))
        for J in range(P - 1, 0, -1):
            for t in range(ntile):
                tile(buf, Q, J, t, False, tw)
        for t in range(ntile):
            tile(buf, Q, 0, t, False, tw, kh=lambda p: khat[rows[p // N][2], p & (N - 1)])
        for J in range(1, P):
            for t in range(ntile):
                tile(buf, Q, J, t, True, tw)

        def st(s, n, z):
            o0, o1, _ = rows[s]
            if n < L and o0 >= 0:
                y[o0 + n] = z.real
                if o1 >= 0:
                    y[o1 + n] = z.imag
        radix_store(buf, N, SEQ, st)
    return y.reshape(B, H, L)


def bank_check(Q, J):
    """Largest number of one half warp's lanes on one 8-byte bank pair, over tiles and accesses."""
    Lw = 16 ** J
    addr = lambda k, c: (c // Lw) * 16 * Lw + k * Lw + (c & (Lw - 1))  # noqa: E731
    worst = 0
    for t in range(Q // 128):
        sb = swz(addr(0, 8 * t))
        for e in range(2):
            for h in range(2):
                for half in range(2):
                    for off in (lambda g, q: addr(2 * q + e + 8 * h, g), lambda g, q: addr(g + 8 * h, 2 * q + e)):
                        slots = [(sb ^ swz(off(ln >> 2, ln & 3))) % 16 for ln in range(16 * half, 16 * half + 16)]
                        worst = max(worst, max(slots.count(x) for x in slots))
    return worst


if __name__ == "__main__":
    for Q, P in ((256, 2), (4096, 3)):
        for J in range(P):
            assert bank_check(Q, J) == 1, (Q, J)
            if J > 0:
                print(f"Q {Q:4d} pass {J}: twiddle lines per warp load (direct fwd, direct inv, "
                      f"factored fwd, factored inv): {twiddle_lines(Q, J)}")
    rng = np.random.default_rng(1)
    cases = [(256, 3, 5, 128, 128, False), (256, 1, 1, 256, 256, True), (512, 3, 1, 300, 50, False),
             (1024, 2, 1, 1024, 7, True), (2048, 1, 1, 1000, 1000, False), (4096, 1, 2, 4096, 4096, True),
             (8192, 1, 1, 5000, 100, False)]
    if "--big" in sys.argv:
        cases.append((16384, 1, 1, 8192, 8192, False))
    for N, B, H, L, Lk, circ in cases:
        u = rng.standard_normal((B, H, L)).astype(np.float16).astype(np.float64)
        k = rng.standard_normal((H, Lk)).astype(np.float16).astype(np.float64) / np.sqrt(Lk)
        y = conv(u, k, N, circ)
        n = L if circ else L + min(L, Lk)
        ref = np.fft.irfft(np.fft.rfft(u, n) * np.fft.rfft(k[:, :min(L, Lk)], n), n)[..., :L]
        err = np.linalg.norm(y - ref) / np.linalg.norm(ref)
        print(f"N {N:5d} B {B} H {H} L {L:5d} Lk {Lk:5d} {'circular' if circ else 'causal  '} rel err {err:.2e}",
              flush=True)
        assert err < (1e-6 if ROUNDING else 1e-12)
