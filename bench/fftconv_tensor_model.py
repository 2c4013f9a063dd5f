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


def passes16(M):
    return 3 if M >= 4096 else 2 if M >= 256 else 1


def radix_r(M):
    return M // 16 ** passes16(M)


def seqs_for(M):
    return 8192 // M


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


def tile_base(Q, J, t):
    """(unswizzled base, low0) of tile t in pass J; at J = 0 a tile is 128 consecutive points
    (8 columns of 16), also when Q = 16 (the columns are then 8 blocks)."""
    if J == 0:
        return 128 * t, 0
    Lw, kT = 16 ** J, Q // 128
    blk, c0 = t // kT, 8 * (t % kT)
    return blk * Q + (c0 // Lw) * 16 * Lw + (c0 & (Lw - 1)), c0 & (Lw - 1)


def tile_addr(J):
    Lw = 16 ** J
    return lambda k, c: (c // Lw) * 16 * Lw + k * Lw + (c & (Lw - 1))  # noqa: E731


def load_tile(buf, sb, addr, inv, tw=None, Q=0, S=0, low0=0, J=0):
    X = np.zeros((16, 8), complex)
    for g, q, e, h in lanes():
        v = buf[sb ^ swz(addr(2 * q + e + 8 * h, g))]
        if inv and J > 0:
            v = v * np.conj(twiddle(tw, Q, S, low0, g, 2 * q + e + 8 * h))
        X[2 * q + e + 8 * h, g] = v
    return X


def tile(buf, Q, J, t, inverse, tw):
    """pass16 on tile t."""
    S = 16 ** (J + 1)
    addr = tile_addr(J)
    base, low0 = tile_base(Q, J, t)
    sb = swz(base)
    Y = dft_tile(load_tile(buf, sb, addr, inverse, tw, Q, S, low0, J), inverse)
    for g, q, e, h in lanes():
        v = Y[g + 8 * h, 2 * q + e]
        if not inverse:
            v = v / 16
            if J > 0:
                v = v * twiddle(tw, Q, S, low0, 2 * q + e, g + 8 * h)
        buf[sb ^ swz(addr(g + 8 * h, 2 * q + e))] = v


# ---- one real row per complex sequence ---------------------------------------------------------
# z[n] = v[2n] + i·v[2n+1], n < M = nfft/2; Z = DFT_M(z)/M in the kernels' order: position
# p = k·Q + digrev16(f'), frequency f = k + R·f'. The middle needs Z[f] and Z[M − f]:
# Z'[f] = α_f·Z[f] + β_f·conj(Z[M − f]) (the real-FFT untangle, the product with the filter's rfft K
# and the re-tangle in one 2×2 map), α_f = (K[f](1 − sin θ) + conj K[M − f](1 + sin θ))/2,
# β_f = i·cos θ·(K[f] − conj K[M − f])/2, θ = π f/M; the kernels fold the innermost pass's 1/16 into
# α and β.


def digrev(a, P):
    r = 0
    for _ in range(P):
        r, a = 16 * r + (a & 15), a >> 4
    return r


def freq_of(p, M):
    P = passes16(M)
    Q = 16 ** P
    return p // Q + (M // Q) * digrev(p % Q, P)


def pos_of(f, M):
    P = passes16(M)
    Q = 16 ** P
    R = M // Q
    return (f % R) * Q + digrev(f // R, P)


def pair_tiles(M, pi):
    """Tile pair pi of the middle: (base A, base B, kind) with unswizzled bases in the CTA buffer;
    every element's partner (position of M − f) lies in the pair (kind says where)."""
    if M == 128:  # a tile is one whole sequence: two sequences, each closed
        return 256 * pi, 256 * pi + 128, "neg128"
    P = passes16(M)
    Q = 16 ** P
    R, T = M // Q, Q // 128
    s, j = pi // (M // 256), pi % (M // 256)
    at = lambda k, tc: s * M + k * Q + 128 * tc  # noqa: E731
    if j < T // 2:
        if j == 0:
            return at(0, 0), at(0, 1), "neg256"
        return at(0, j + 1), at(0, T - j), "comp"
    if j < T:
        tc = j - T // 2
        return at(R // 2, tc), at(R // 2, T - 1 - tc), "comp"
    k, tc = 1 + (j - T) // T, (j - T) % T
    return at(k, tc), at(R - k, T - 1 - tc), "comp"


def partner(o, kind):
    """Offset (0…255 over the pair: A then B) of the partner of offset o."""
    if kind == "comp":
        return 255 - o
    if kind == "neg256":
        return (16 - o) & 15 if o < 16 else 271 - o
    lo = o & 127
    return (o & 128) | ((16 - lo) & 15 if lo < 16 else 143 - lo)


def item_of(i, kind):
    """Work item i (0…127) of a pair: offsets (x, y) it updates, each the other's partner, or
    both their own partners (self: frequencies 0 and M/2)."""
    if kind == "comp":
        return i, 255 - i, False
    half = 128 if kind == "neg256" else 64  # items per closed span of 2·half points
    base, ii = 2 * half * (i // half), i % half
    if ii == 0:
        x, y = 0, 8
    elif ii < 8:
        x, y = ii, 16 - ii
    elif ii < 16:
        x, y = half - 8 + ii, half + 23 - ii
    else:
        x, y = ii, 2 * half + 15 - ii
    return base + x, base + y, ii == 0


def middle_pair(buf, M, pi, ab):
    """The innermost forward pass on both tiles; then per work item (x, y) (a lane's items:
    i = lane + 32·j) Z' = α·Z + β·conj(Z_partner) for both; then the innermost inverse pass.
    ab(p): (α, β)/16 at CTA-buffer position p."""
    A, Bb, kind = pair_tiles(M, pi)
    addr = tile_addr(0)
    sbs = (swz(A), swz(Bb))
    for sb in sbs:
        Y = dft_tile(load_tile(buf, sb, addr, False), False)
        for g, q, e, h in lanes():
            buf[sb ^ swz(addr(g + 8 * h, 2 * q + e))] = Y[g + 8 * h, 2 * q + e]
    at = lambda o: sbs[o >> 7] ^ swz(o & 127)  # noqa: E731
    for i in range(128):
        x, y, self_ = item_of(i, kind)
        zx, zy = buf[at(x)], buf[at(y)]
        (ax, bx), (ay, by) = ab((A, Bb)[x >> 7] + (x & 127)), ab((A, Bb)[y >> 7] + (y & 127))
        buf[at(x)] = ax * zx + bx * np.conj(zx if self_ else zy)
        buf[at(y)] = ay * zy + by * np.conj(zy if self_ else zx)
    for sb in sbs:
        Y = dft_tile(load_tile(buf, sb, addr, True), True)
        for g, q, e, h in lanes():
            buf[sb ^ swz(addr(g + 8 * h, 2 * q + e))] = Y[g + 8 * h, 2 * q + e]


def radix_load(buf, M, seqs, ld):
    R = radix_r(M)
    Q = M // R
    for i in range(seqs * Q):
        s, c = i // Q, i % Q
        x = np.array([ld(s, Q * m + c) for m in range(R)])
        x = np.fft.fft(x) * np.exp(-2j * np.pi * c * np.arange(R) / M) / R
        for k in range(R):
            buf[swz(s * M + k * Q + c)] = x[k]


def radix_store(buf, M, seqs, st):
    R = radix_r(M)
    Q = M // R
    for i in range(seqs * Q):
        s, c = i // Q, i % Q
        x = np.array([buf[swz(s * M + k * Q + c)] for k in range(R)]) * np.exp(2j * np.pi * c * np.arange(R) / M)
        x = np.fft.ifft(x) * R
        for m in range(R):
            st(s, Q * m + c, x[m])


def check_pairs(M):
    """Every tile in exactly one pair; every element's partner is the position of M − f; the
    work items cover every element of a pair once, each with its partner."""
    seen = set()
    SEQ = seqs_for(M)
    for pi in range(SEQ * M // 256):
        A, Bb, kind = pair_tiles(M, pi)
        assert A // 128 not in seen and Bb // 128 not in seen and A != Bb, (M, pi)
        seen |= {A // 128, Bb // 128}
        for o in range(256):
            p = (A, Bb)[o >> 7] + (o & 127)
            pp = partner(o, kind)
            q = (A, Bb)[pp >> 7] + (pp & 127)
            assert p // M == q // M and q % M == pos_of((M - freq_of(p % M, M)) % M, M), (M, pi, o, kind)
        cover = []
        for i in range(128):
            x, y, self_ = item_of(i, kind)
            cover += [x, y]
            assert (partner(x, kind), partner(y, kind)) == ((x, y) if self_ else (y, x)), (M, kind, i)
        assert sorted(cover) == list(range(256)), (M, kind)
    assert len(seen) == SEQ * M // 128


def check_rx(M):
    """Plan algo 6's radix-r passes (tensor.cuh load_forward_rx / inverse_store_rx, 256 threads,
    Q <= 256): item i = tid + 256*(i0 + it) has c = tid % Q, and its swizzled addresses
    swz(s*M + k*Q + c) are swz(s0*M + c) ^ swz(i0*(256/Q)*M) ^ swz(it*(256/Q)*M + k*Q); every
    point once."""
    Q = 16 ** passes16(M)
    R, SEQ = M // Q, seqs_for(M)
    IT, U = SEQ * Q // 256, 1 if M // Q >= 8 else 8 // (M // Q)
    assert Q <= 256 and IT % U == 0
    seen = set()
    for tid in range(256):
        c, s0 = tid % Q, tid // Q
        a0 = swz(s0 * M + c)
        for i0 in range(0, IT, U):
            a1 = a0 ^ swz(i0 * (256 // Q) * M)
            for it in range(U):
                i = tid + 256 * (i0 + it)
                s = s0 + (i0 + it) * (256 // Q)
                assert i // Q == s and i % Q == c
                for k in range(R):
                    assert a1 ^ swz(it * (256 // Q) * M + k * Q) == swz(s * M + k * Q + c), (M, tid, i0, it, k)
                    seen.add(s * M + k * Q + c)
    assert seen == set(range(SEQ * M)), M


def conv(u, k, nfft, circular):
    """The forward kernel on u (B, H, L) and k (H, Lk) at FFT size nfft (M = nfft/2 complex)."""
    B, H, L = u.shape
    M = nfft // 2
    Lmin = min(L, k.shape[1])
    P = passes16(M)
    Q = 16 ** P
    tw = np.exp(-2j * np.pi * np.arange(max(Q, 256)) / max(Q, 256))
    SEQ, ntile = seqs_for(M), seqs_for(M) * M // 128
    ab = np.zeros((H, M, 2), complex)
    for blk in range((H + SEQ - 1) // SEQ):  # spectrum_kernel
        buf, h0 = np.zeros(SEQ * M, complex), blk * SEQ
        kv = lambda s, n: k[h0 + s, n] if h0 + s < H and n < Lmin else 0.0  # noqa: E731
        radix_load(buf, M, SEQ, lambda s, n: kv(s, 2 * n) + 1j * kv(s, 2 * n + 1))
        for J in range(P - 1, -1, -1):
            for t in range(ntile):
                tile(buf, Q, J, t, False, tw)
        for i in range(SEQ * M):
            s, p = i // M, i % M
            if h0 + s >= H:
                continue
            f = freq_of(p, M)
            zf, zg = buf[swz(i)], buf[swz(s * M + pos_of((M - f) % M, M))]
            th = np.pi * f / M
            w = np.exp(-1j * th)
            e, o = (zf + np.conj(zg)) / 2, -1j * (zf - np.conj(zg)) / 2
            kf, kg = M * (e + w * o), M * np.conj(e - w * o)  # rfft(k)[f], rfft(k)[M − f]
            ab[h0 + s, p] = ((kf * (1 - np.sin(th)) + np.conj(kg) * (1 + np.sin(th))) / 32,
                             1j * np.cos(th) * (kf - np.conj(kg)) / 32)
    y = np.full(B * H * L, np.nan)
    uf = u.reshape(-1)
    nseq = B * H
    for blk in range((nseq + SEQ - 1) // SEQ):  # forward_kernel: sequence seq = row (b, h), h = seq / B
        rows = []
        for s in range(SEQ):
            seq = blk * SEQ + s
            h, b = (seq // B, seq % B) if seq < nseq else (0, 0)
            rows.append(((b * H + h) * L if seq < nseq else -1, h))
        v = lambda o, n: 0.0 if o < 0 or n >= L else uf[o + n]  # noqa: E731
        buf = np.zeros(SEQ * M, complex)
        radix_load(buf, M, SEQ, lambda s, n: v(rows[s][0], 2 * n) + 1j * v(rows[s][0], 2 * n + 1))
        for J in range(P - 1, 0, -1):
            for t in range(ntile):
                tile(buf, Q, J, t, False, tw)
        for pi in range(ntile // 2):
            middle_pair(buf, M, pi, lambda p: ab[rows[p // M][1], p % M])
        for J in range(1, P):
            for t in range(ntile):
                tile(buf, Q, J, t, True, tw)

        def st(s, n, z):
            o = rows[s][0]
            if o >= 0:
                for t, x in ((2 * n, z.real), (2 * n + 1, z.imag)):
                    if t < L:
                        y[o + t] = x
        radix_store(buf, M, SEQ, st)
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


def partner_banks(M):
    """Worst lanes of one half warp on one bank pair, over the middle's work-item loads and
    stores (items i = lane + 32·j), per kind."""
    worst = {}
    for pi in range(seqs_for(M) * M // 256):
        A, Bb, kind = pair_tiles(M, pi)
        for j in range(4):
            for half in range(2):
                for w in range(2):
                    slots = []
                    for ln in range(16 * half, 16 * half + 16):
                        o = item_of(ln + 32 * j, kind)[w]
                        slots.append((swz((A, Bb)[o >> 7]) ^ swz(o & 127)) % 16)
                    worst[kind] = max(worst.get(kind, 0), max(slots.count(x) for x in slots))
    return worst


if __name__ == "__main__":
    for Q, P in ((256, 2), (4096, 3)):
        for J in range(P):
            assert bank_check(Q, J) == 1, (Q, J)
            if J > 0:
                print(f"Q {Q:4d} pass {J}: twiddle lines per warp load (direct fwd, direct inv, "
                      f"factored fwd, factored inv): {twiddle_lines(Q, J)}")
    for M in (128, 256, 512, 1024, 2048, 4096, 8192):
        check_pairs(M)
        if M <= 2048:
            check_rx(M)
        print(f"M {M:5d}: tile pairs and items checked; item loads/stores, worst lanes per bank pair: {partner_banks(M)}")
    rng = np.random.default_rng(1)
    cases = [(256, 3, 5, 128, 128, False), (256, 1, 1, 256, 256, True), (512, 3, 1, 300, 50, False),
             (512, 2, 3, 512, 512, True), (1024, 2, 1, 1024, 7, True), (2048, 1, 1, 1000, 1000, False),
             (4096, 1, 1, 4096, 100, True), (8192, 1, 2, 4096, 4096, False)]
    if "--big" in sys.argv:
        cases.append((16384, 1, 1, 8192, 8192, False))
    for N, B, H, L, Lk, circ in cases:
        u = rng.standard_normal((B, H, L)).astype(np.float16).astype(np.float64)
        k = rng.standard_normal((H, Lk)).astype(np.float16).astype(np.float64) / np.sqrt(Lk)
        y = conv(u, k, N, circ)
        n = L if circ else L + min(L, Lk)
        ref = np.fft.irfft(np.fft.rfft(u, n) * np.fft.rfft(k[:, :min(L, Lk)], n), n)[..., :L]
        err = np.linalg.norm(y - ref) / np.linalg.norm(ref)
        print(f"nfft {N:5d} B {B} H {H} L {L:5d} Lk {Lk:5d} {'circular' if circ else 'causal  '} rel err {err:.2e}",
              flush=True)
        assert err < (1e-6 if ROUNDING else 1e-12)
