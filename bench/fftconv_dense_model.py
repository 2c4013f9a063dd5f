"""A float64 model of the dense fftconv kernels (src/cuda/fftconv/dense.cuh): their indexing taken
literally, lane by lane (the staged rows' 16-byte unit swizzle, ldmatrix and ldmatrix.trans row
addresses and fragment layouts, the reversed filter's two parity copies and each lane's B-fragment
words, the mma m16n8k16 fragment layouts, the causal zero block and circular wrap, the epilogue's
output positions, the reversed rows of the du pass, the filter gradient's diagonal fold), the
products done exactly. Checked against a direct convolution; also checks that every ldmatrix
phase (8 rows of 16 bytes) and every filter-word load hits distinct banks. Keep it in step with
dense.cuh when the layout changes; tests/python/test_fftconv_dense_model.py runs it in CI.
    python bench/fftconv_dense_model.py
"""
import numpy as np

PB = 32


def geometry(L, m, R):
    NI = -(-L // PB)
    S = NI | 1
    D = (m + PB - 2) // PB + 1
    kwords = 16 * (D + 1)
    if kwords % 32 == 0:
        kwords += 16
    return NI, S, D, kwords


def unit_offset(X, c):
    """Index (in 16-byte units) of unit c of block X (dense.cuh unit_offset)."""
    return X * 4 + (c ^ ((X >> 1) & 3))


def stage(v, S, NI):
    """v (R, L) float64 -> the row buffer: 16-bit element slots, 8 per unit, zero past L."""
    R, L = v.shape
    buf = np.zeros(R * S * 32)
    for r in range(R):
        for x in range(NI):
            for c in range(4):
                u = unit_offset(r * S + x, c)
                for e in range(8):
                    t = PB * x + 8 * c + e
                    buf[u * 8 + e] = v[r, t] if t < L else 0.0
    return buf


CONFLICTS = {"worst": 1}  # the most rows of one ldmatrix phase on one 16-byte bank group


def ldmatrix(mem, addrs, trans=False, zero=None):
    """addrs[l]: element index of the row lane l gives (matrix l // 8, row l % 8). Returns a[j][lane]
    = (lo, hi) of matrix j as the lane holds it. Records in CONFLICTS the most distinct rows (the
    zero block's left out) that one phase puts on one 16-byte bank group."""
    for j in range(4):
        groups = {}
        for a in addrs[8 * j:8 * j + 8]:
            if zero is None or a < zero:
                groups.setdefault((a * 2 // 16) % 8, set()).add(a)
        CONFLICTS["worst"] = max([CONFLICTS["worst"]] + [len(s) for s in groups.values()])
    out = []
    for j in range(4):
        mat = np.array([[mem[addrs[8 * j + r] + e] for e in range(8)] for r in range(8)])
        if trans:
            mat = mat.T
        out.append([(mat[lane >> 2, 2 * (lane & 3)], mat[lane >> 2, 2 * (lane & 3) + 1]) for lane in range(32)])
    return out


def mma(acc, a, b0, b1):
    """acc[lane] (4 floats) += A (16×16) · B (16×8) from the lanes' fragments (PTX m16n8k16)."""
    A = np.zeros((16, 16))
    B = np.zeros((16, 8))
    for lane in range(32):
        g, c = lane >> 2, lane & 3
        for reg, (row, col) in enumerate(((g, 2 * c), (g + 8, 2 * c), (g, 2 * c + 8), (g + 8, 2 * c + 8))):
            A[row, col], A[row, col + 1] = a[reg][lane]
        B[2 * c, g], B[2 * c + 1, g] = b0[lane]
        B[2 * c + 8, g], B[2 * c + 9, g] = b1[lane]
    C = A @ B
    for lane in range(32):
        g, c = lane >> 2, lane & 3
        acc[lane] += np.array([C[g, 2 * c], C[g, 2 * c + 1], C[g + 8, 2 * c], C[g + 8, 2 * c + 1]])


def filter_words(k, m, D, kwords):
    Z0 = PB * D

    def kr(z):
        x = Z0 - z
        return k[x] if 0 <= x < m else 0.0
    kE = [(kr(2 * w), kr(2 * w + 1)) for w in range(kwords)]
    kO = [(kr(2 * w + 1), kr(2 * w + 2)) for w in range(kwords)]
    return kE, kO


def forward(v, k, circular, NT=2, rev=False):
    """The forward kernel on one CTA (R rows of one h): y (R, L) from v (R, L) (the staged rows:
    u ⊙ pregate, reversed when rev) and k (m taps), as dense.cuh forward_kernel computes it."""
    R, L = v.shape
    m = len(k)
    NI, S, D, kwords = geometry(L, m, R)
    Z0 = PB * D
    src = v[:, ::-1] if rev else v
    buf = stage(src, S, NI)
    zero = len(buf)
    mem = np.concatenate([buf, np.zeros(32)])
    kE, kO = filter_words(k, m, D, kwords)
    M = R * NI
    G = -(-M // (16 * NT))
    y = np.zeros((R, L))
    for grp in range(G):
        mbase = grp * 16 * NT
        acc = [np.zeros((32, 4)) for _ in range(NT * 4)]
        dmax = D - 1 if circular else min(D - 1, (min(mbase + 16 * NT, M) - 1) // R)
        for d in range(dmax + 1):
            for kk in range(2):
                bf = {}
                for j in range(4):
                    b0, b1 = [], []
                    words = []
                    for lane in range(32):
                        g, c = lane >> 2, lane & 3
                        base = (Z0 - g + 2 * c - (g & 1)) // 2
                        tab = kO if g & 1 else kE
                        w = base - 16 * d - 4 * j + 8 * kk
                        words.append((g & 1, w))
                        b0.append(tab[w])
                        b1.append(tab[w + 4])
                    # kO starts kwords words after kE (kwords = 16 mod 32): no two lanes on one bank
                    banks = {}
                    for par, w in words:
                        banks.setdefault((w + par * kwords) % 32, set()).add((par, w))
                    assert all(len(s) == 1 for s in banks.values()), "filter-word bank conflict"
                    bf[j] = (b0, b1)
                for t in range(NT):
                    addrs = []
                    for lane in range(32):
                        lrow = (lane & 7) + ((lane >> 3) & 1) * 8
                        lunit = lane >> 4
                        mm = mbase + 16 * t + lrow
                        ok = mm < M
                        i = mm // R if ok else 0
                        r = mm - i * R if ok else 0
                        x = i - d
                        if circular and x < 0:
                            x += NI
                        if ok and x >= 0:
                            X = r * S + x
                            addrs.append(unit_offset(X, 2 * kk + lunit) * 8)
                        else:
                            addrs.append(zero + 8 * (2 * kk + lunit) % 32)
                    a = ldmatrix(mem, addrs, zero=zero)
                    for j in range(4):
                        mma(acc[t * 4 + j], a, *bf[j])
        for t in range(NT):
            for lane in range(32):
                g, c = lane >> 2, lane & 3
                for hh in range(2):
                    mm = mbase + 16 * t + g + 8 * hh
                    if mm >= M:
                        continue
                    i, r = mm // R, mm % R
                    for j in range(4):
                        for e in range(2):
                            tt = PB * i + 8 * j + 2 * c + e
                            if tt < L:
                                y[r, L - 1 - tt if rev else tt] = acc[t * 4 + j][lane][2 * hh + e]
    return y


def live_chunks(d, M, R, chunks, circular):
    """dense.cuh live_chunks: chunks of 16 block rows whose last row has i >= d (all when circular)."""
    if circular:
        return chunks
    return 0 if d * R >= M else chunks - d * R // 16


def warp_range(w, D, M, R, chunks, circular):
    """dense.cuh warp_range: warp w's tap blocks [lo, hi), contiguous, balanced by live chunks + 2."""
    work = [live_chunks(d, M, R, chunks, circular) + 2 for d in range(D)]
    total, acc, lo, hi = sum(work), 0, D, D
    for d in range(D):
        if lo == D and 4 * acc >= w * total:
            lo = d
        if 4 * acc >= (w + 1) * total:
            hi = d
            break
        acc += work[d]
    if w == 3:
        hi = D
    return lo, max(lo, hi)


def filter_grad(v, dz, m, circular):
    """dk (m,) of one CTA as dense.cuh filter_grad_kernel computes it: each warp owns a range of tap
    blocks and runs every live chunk for each; per tap block the product A_dᵀ·DZ from ldmatrix.trans
    fragments, the warp's tile of it summed by diagonals (two per lane, the second carried to the
    next tap block), positions written once; a range's first position takes the previous range's
    carry after the barrier (the edges)."""
    R0, L = v.shape
    R = 1 << (R0 - 1).bit_length()  # plan_grad: rows per CTA a power of two, dead rows zero
    v, dz = (np.concatenate([x, np.zeros((R - R0, L))]) for x in (v, dz))
    NI, S, D, _ = geometry(L, m, R)
    mv = np.concatenate([stage(v, S, NI), np.zeros(32)])
    mz = np.concatenate([stage(dz, S, NI), np.zeros(32)])
    zero = len(mv) - 32
    M = R * NI
    chunks = -(-M // 16)
    sh = R.bit_length() - 1  # X = (m & (R - 1))·S + (m >> sh): the kernel's mask and shift
    part = np.full(m, np.nan)  # every position must be written exactly once
    written = np.zeros(m, dtype=int)
    first_s1, last_s2, ranges = np.zeros((4, 32)), np.zeros((4, 32)), []

    def put(x, val):
        if 0 <= x < m:
            part[x] = val
            written[x] += 1

    for warp in range(4):
        dlo, dhi = warp_range(warp, D, M, R, chunks, circular)
        ranges.append((dlo, dhi))
        carry = np.zeros(32)
        for d in range(dlo, dhi):
            acc = [[np.zeros((32, 4)) for _ in range(4)] for _ in range(2)]
            for ch in range(0 if circular else d * R // 16, chunks):
                m0 = ch * 16
                a_addr, b_addr = [[], []], [[], []]
                for lane in range(32):
                    arow = (lane & 7) + 8 * (lane >> 4)
                    aunit = (lane >> 3) & 1
                    brow = (lane & 7) + 8 * ((lane >> 3) & 1)
                    bunit = lane >> 4
                    mA, mB = m0 + arow, m0 + brow
                    XA = None
                    if mA < M:  # block row mA − d·R (the kernel: R a power of two, mask and shift)
                        mA -= d * R
                        if circular and mA < 0:
                            mA += M
                        if mA >= 0:
                            XA = (mA & (R - 1)) * S + (mA >> sh)
                    XB = (mB & (R - 1)) * S + (mB >> sh) if mB < M else None
                    for t in range(2):
                        a_addr[t].append(unit_offset(XA, 2 * t + aunit) * 8 if XA is not None else zero)
                        b_addr[t].append(unit_offset(XB, 2 * t + bunit) * 8 if XB is not None else zero)
                a = [ldmatrix(mv, a_addr[t], trans=True, zero=zero) for t in range(2)]
                b = [ldmatrix(mz, b_addr[t], trans=True, zero=zero) for t in range(2)]
                for qt in range(2):
                    for nt in range(4):
                        bt, br = nt >> 1, 2 * (nt & 1)
                        mma(acc[qt][nt], a[qt], b[bt][br], b[bt][br + 1])
            # the warp's G_d tile (float2 stores at q·40 + p, checked conflict-free per half warp),
            # then lane l sums diagonals l − 31 and l + 1, carrying the second into the next d
            GS = 40
            tile = np.zeros(32 * GS)
            for half in range(2):
                pairs = set()
                for lane in range(16 * half, 16 * half + 16):
                    g, c = lane >> 2, lane & 3
                    pairs.add(((g + 8 * 0) * GS + 2 * c) % 32 // 2)
                assert len(pairs) == 16, "G tile bank conflict"
            for lane in range(32):
                g, c = lane >> 2, lane & 3
                for qt in range(2):
                    for nt in range(4):
                        for hh in range(2):
                            q, p = 16 * qt + g + 8 * hh, 8 * nt + 2 * c
                            tile[q * GS + p] = acc[qt][nt][lane][2 * hh]
                            tile[q * GS + p + 1] = acc[qt][nt][lane][2 * hh + 1]
            for lane in range(32):
                s1 = sum(tile[q * GS + q + lane - 31] for q in range(32) if q >= 31 - lane)
                s2 = sum(tile[q * GS + q + lane + 1] for q in range(32) if q <= 30 - lane)
                if d == dlo:
                    first_s1[warp][lane] = s1
                else:
                    put(32 * d + lane - 31, carry[lane] + s1)
                carry[lane] = s2
        last_s2[warp] = carry
    for warp, (dlo, dhi) in enumerate(ranges):
        if dlo >= dhi:
            continue
        prev = [last_s2[w] for w in range(warp) if ranges[w][0] < ranges[w][1]]
        last = not any(ranges[w][0] < ranges[w][1] for w in range(warp + 1, 4))
        for lane in range(32):
            put(32 * dlo + lane - 31, (prev[-1][lane] if prev else 0.0) + first_s1[warp][lane])
            if last:
                put(32 * D + lane - 31, last_s2[warp][lane])
    assert (written == 1).all(), "a dk position written other than once"
    return part


def reference(v, k, circular):
    R, L = v.shape
    y = np.zeros((R, L))
    for s in range(len(k)):
        if circular:
            y += k[s] * np.roll(v, s, axis=1)
        elif s < L:
            y[:, s:] += k[s] * v[:, :L - s]
    return y


def reference_dk(v, dz, m, circular):
    R, L = v.shape
    dk = np.zeros(m)
    for x in range(m):
        if circular:
            dk[x] = np.sum(dz * np.roll(v, x, axis=1))
        elif x < L:
            dk[x] = np.sum(dz[:, x:] * v[:, :L - x])
    return dk


def check(R, L, m, circular, seed=0):
    """Relative errors of the forward, the reversed (du) pass and dk against the direct sums, and the
    worst ldmatrix bank-group sharing seen (1: conflict-free)."""
    CONFLICTS["worst"] = 1
    rng = np.random.default_rng(seed)
    v, dz, k = rng.standard_normal((R, L)), rng.standard_normal((R, L)), rng.standard_normal(m)
    y = forward(v, k, circular)
    ref = reference(v, k, circular)
    e1 = np.abs(y - ref).max() / np.abs(ref).max()
    # the du pass: the forward on reversed rows is the adjoint (correlation with k)
    yr = forward(dz, k, circular, rev=True)
    adj = reference(dz[:, ::-1], k, circular)[:, ::-1]
    e2 = np.abs(yr - adj).max() / np.abs(adj).max()
    dk = filter_grad(v, dz, m, circular)
    want = reference_dk(v, dz, m, circular)
    e3 = np.abs(dk - want).max() / np.abs(want).max()
    return e1, e2, e3, CONFLICTS["worst"]


CASES = [(3, 100, 37, False), (2, 64, 64, True), (1, 33, 33, False), (5, 96, 50, True), (17, 70, 70, False),
         (2, 40, 1, False), (16, 64, 64, False), (16, 96, 96, True), (8, 200, 100, False),
         (4, 330, 330, False), (2, 320, 300, True)]

if __name__ == "__main__":
    for R, L, m, circ in CASES:
        e1, e2, e3, worst = check(R, L, m, circ)
        print(f"R={R} L={L} m={m} {'circular' if circ else 'causal'}: errors forward {e1:.1e}, reversed {e2:.1e}, "
              f"dk {e3:.1e}; ldmatrix rows per bank group <= {worst}")
