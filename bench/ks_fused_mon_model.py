"""A float64 model of the persistent Monarch kernel (src/cuda/ks/ks_fused_mon.cuh): its indexing
taken literally, lane by lane (the weight staging with the swizzled rows and the (j, j+1) pair
split of K_1, the x tile's 16-byte chunks, the mma m16n8k16 A/B/C fragment layouts, stage 2's
packed (g, g+1) stores of the transposed intermediate, stage 1's in-place outputs, the copy-out's
8-j gathers, the persistent tile loop with partial tiles), the products done exactly. Shared
memory is modelled as 2-byte slots, word w = slots (2w, 2w+1). Checked against the dense Monarch
product y = x (K_1 K_2)^T from DESIGN.md's formula. Also counts the shared-memory bank conflicts
of every warp-wide access (the fragment loads must be conflict-free). Keep it in step with
ks_fused_mon.cuh; tests/python/test_ks_fused_mon_model.py runs it in CI.
    python bench/ks_fused_mon_model.py
"""
import numpy as np

NWARP, NTHR = 8, 256
LANES = np.arange(32)
G8, T4 = LANES >> 2, LANES & 3


def geo(S, RT):
    """Geo<S, RT> of the kernel (32-bit words)."""
    TB, N, RW = 16 * RT, S * S, S // 2
    GSW = S * RW + 1
    WW = (2 * S * GSW + 3) // 4 * 4
    ZJ = S // 2 + 1
    LDX = N // 2 + (36 - (N // 2) % 32) % 32
    LDZ = S * ZJ + (36 - (S * ZJ) % 32) % 32
    assert LDX % 32 == 4 and LDZ % 32 == 4
    return dict(TB=TB, N=N, RW=RW, GSW=GSW, WW=WW, ZJ=ZJ, LDX=LDX, LDZ=LDZ, WORDS=WW + TB * (2 * LDX + LDZ))


def swz(S, r, w):
    RW = S // 2
    Q = 1 if RW >= 32 else 32 // RW
    CM = min(RW // 4, 8) - 1
    return w ^ (((r // Q) & CM) << 2)


class Smem:
    """2-byte slots; conflict bookkeeping per access kind (max distinct words in one bank)."""

    def __init__(self, words):
        self.s = np.full(2 * words, np.nan)
        self.worst = {}

    def note(self, kind, words):
        words = np.unique(np.asarray(words))
        deg = np.bincount(words % 32, minlength=32).max()
        self.worst[kind] = max(self.worst.get(kind, 0), int(deg))

    def ld(self, kind, words):  # a warp-wide 32-bit load: (lo, hi) per lane
        words = np.asarray(words)
        self.note(kind, words)
        return self.s[2 * words], self.s[2 * words + 1]

    def st(self, kind, words, lo, hi):
        words = np.asarray(words)
        self.note(kind, words)
        self.s[2 * words], self.s[2 * words + 1] = lo, hi


def mma(acc, a, b):
    """mma.m16n8k16 row.col: a[4] (lo, hi) lane words, b[2]; acc (32, 4) in the C layout."""
    A = np.zeros((16, 16))
    B = np.zeros((16, 8))
    for i, (rows, cols) in enumerate([(G8, 2 * T4), (G8 + 8, 2 * T4), (G8, 2 * T4 + 8), (G8 + 8, 2 * T4 + 8)]):
        A[rows, cols], A[rows, cols + 1] = a[i]
    for i, ks in enumerate([2 * T4, 2 * T4 + 8]):
        B[ks, G8], B[ks + 1, G8] = b[i]
    C = A @ B
    acc[:, 0] += C[G8, 2 * T4]
    acc[:, 1] += C[G8, 2 * T4 + 1]
    acc[:, 2] += C[G8 + 8, 2 * T4]
    acc[:, 3] += C[G8 + 8, 2 * T4 + 1]


def run(x, w1, w2, S, RT, grid):
    """The kernel on x (batch, S*S); w1 (1,S,S,S), w2 (S,S,S,1) flattened as in memory."""
    g = geo(S, RT)
    TB, N, RW, GSW, ZJ, LDX, LDZ = (g[k] for k in ("TB", "N", "RW", "GSW", "ZJ", "LDX", "LDZ"))
    KS, NT = S // 16, S // 8
    batch = x.shape[0]
    xf, w1f, w2f = x.reshape(-1), w1.reshape(-1), w2.reshape(-1)
    y = np.full(batch * N, np.nan)
    tiles = -(-batch // TB)
    W2S, W1S, XB, ZS = 0, S * GSW, g["WW"], g["WW"] + 2 * TB * LDX
    for blk in range(grid):
        sm = Smem(g["WORDS"])
        # weights: thread tid handles e = tid, tid + NTHR, ...; a warp's store is 32 consecutive e
        for e0 in range(0, S * S * RW, 32):
            e = e0 + LANES
            gg, k, w = e // (S * RW), (e // RW) % S, e % RW
            sm.st("w2 staging", W2S + gg * GSW + k * RW + swz(S, k, w), w2f[2 * e], w2f[2 * e + 1])
        for e0 in range(0, S * RW * (S // 2), 32):
            e = e0 + LANES
            jp, w, k = e % (S // 2), (e // (S // 2)) % RW, e // (S // 2 * RW)
            o0 = (k * S + 2 * w) * S + 2 * jp
            o1 = o0 + S
            q = k * RW + swz(S, k, w)
            sm.st("w1 staging", W1S + 2 * jp * GSW + q, w1f[o0], w1f[o1])
            sm.st("w1 staging", W1S + (2 * jp + 1) * GSW + q, w1f[o0 + 1], w1f[o1 + 1])
        def load_x(tile, xs):  # cp.async: 16-byte chunks
            row0 = tile * TB
            for e0 in range(0, TB * (N // 8), 32):
                e = e0 + LANES
                r, c = e // (N // 8), e % (N // 8)
                for lane in range(32):
                    ok = row0 + r[lane] < batch
                    src = xf[(row0 + r[lane]) * N + 8 * c[lane]:][:8] if ok else np.zeros(8)
                    base = 2 * (xs + r[lane] * LDX + 4 * c[lane])
                    sm.s[base:base + 8] = src

        if blk < tiles:
            load_x(blk, XB)
        for it, tile in enumerate(range(blk, tiles, grid)):
            row0 = tile * TB
            XS = XB + (it & 1) * TB * LDX
            if tile + grid < tiles:
                load_x(tile + grid, XB + ((it + 1) & 1) * TB * LDX)
            for warp in range(NWARP):  # stage 2
                for g0 in range(2 * warp, S, 2 * NWARP):
                    acc = np.zeros((2, RT, NT, 32, 4))
                    for gi in range(2):
                        gg = g0 + gi
                        for ks in range(KS):
                            a = [a_frag(sm, "stage 2 A", XS + (rt * 16 + G8) * LDX + (gg * S + ks * 16) // 2 + T4, LDX)
                                 for rt in range(RT)]
                            for nt in range(NT):
                                b = b_frag(sm, "stage 2 B", W2S + gg * GSW, S, nt * 8 + G8, ks * 8 + T4, RW)
                                for rt in range(RT):
                                    mma(acc[gi, rt, nt], a[rt], b)
                    for rt in range(RT):
                        for nt in range(NT):
                            p = ZS + (rt * 16 + G8) * LDZ + (nt * 8 + 2 * T4) * ZJ + g0 // 2
                            for e in range(4):
                                sm.st("stage 2 C", p + (e >> 1) * 8 * LDZ + (e & 1) * ZJ, acc[0, rt, nt, :, e],
                                      acc[1, rt, nt, :, e])
            for warp in range(NWARP):  # stage 1
                for j in range(warp, S, NWARP):
                    acc = np.zeros((RT, NT, 32, 4))
                    for ks in range(KS):
                        a = [a_frag(sm, "stage 1 A", ZS + (rt * 16 + G8) * LDZ + j * ZJ + ks * 8 + T4, LDZ)
                             for rt in range(RT)]
                        for nt in range(NT):
                            b = b_frag(sm, "stage 1 B", W1S + j * GSW, S, nt * 8 + G8, ks * 8 + T4, RW)
                            for rt in range(RT):
                                mma(acc[rt, nt], a[rt], b)
                    for rt in range(RT):
                        for nt in range(NT):
                            p = ZS + (rt * 16 + G8) * LDZ + j * ZJ + nt * 4 + T4
                            sm.st("stage 1 C", p, acc[rt, nt, :, 0], acc[rt, nt, :, 1])
                            sm.st("stage 1 C", p + 8 * LDZ, acc[rt, nt, :, 2], acc[rt, nt, :, 3])
            for e0 in range(0, TB * S * (S // 8), 32):  # copy-out
                e = e0 + LANES
                k, q, r = e % S, (e // S) % (S // 8), e // (S * (S // 8))
                slots = 2 * ZS + r * 2 * LDZ + 8 * q * 2 * ZJ + k
                for i in range(8):
                    sm.note("copy-out", (slots + i * 2 * ZJ) // 2)
                for lane in range(32):
                    if row0 + r[lane] < batch:
                        dst = (row0 + r[lane]) * N + k[lane] * S + 8 * q[lane]
                        y[dst:dst + 8] = sm.s[slots[lane] + 2 * ZJ * np.arange(8)]
        worst = sm.worst
    return y.reshape(batch, N), worst


def a_frag(sm, name, p, ld):
    """ks_fused_mon.cuh a_frag: words p, p + 8·ld, p + 4, p + 8·ld + 4 of each lane."""
    return [sm.ld(name, p + o) for o in (0, 8 * ld, 4, 8 * ld + 4)]


def b_frag(sm, name, w, S, r, w0, rw):
    """ks_fused_mon.cuh b_frag: row r's swizzled words w0 and w0 + 4 of a group's weights w."""
    q = w + r * rw
    return [sm.ld(name, q + swz(S, r, w0)), sm.ld(name, q + swz(S, r, w0 + 4))]


def dense(w, p):
    """K (a·b·d, a·c·d) of DESIGN.md's ks formula: K[(i, k, j), (i, l, j)] = w[i, k, l, j]."""
    a, b, c, d = p
    K = np.zeros((a, b, d, a, c, d))
    for i in range(a):
        for j in range(d):
            K[i, :, j, i, :, j] = w[i, :, :, j]
    return K.reshape(a * b * d, a * c * d)


CASES = [(16, 2, 37, 2), (16, 2, 100, 2), (32, 1, 21, 2), (32, 1, 50, 1), (32, 1, 1, 1)]  # S, RT, batch, grid


def check(S, RT, batch, grid, seed=0):
    rng = np.random.default_rng(seed)
    p1, p2 = (1, S, S, S), (S, S, S, 1)
    w1, w2 = rng.standard_normal(p1), rng.standard_normal(p2)
    x = rng.standard_normal((batch, S * S))
    y, worst = run(x, w1, w2, S, RT, grid)
    ref = x @ (dense(w1, p1) @ dense(w2, p2)).T
    return float(np.abs(y - ref).max() / np.abs(ref).max()), worst


if __name__ == "__main__":
    for c in CASES:
        err, worst = check(*c)
        print(f"S, RT, batch, grid = {c}: max rel err {err:.1e}; bank conflicts (worst degree) {worst}")
