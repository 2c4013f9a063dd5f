"""Fuzz/property suite, valid inputs: every public function over random shapes (1, odd, prime),
dtypes (float16, float32, float64, byte-swapped), memory layouts (C, Fortran, strided slices,
negative strides, unaligned data, byte-swapped order) and non-finite values, against float64
references of the DESIGN.md formulas (fuzz_common.py says what counts as an outcome)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import strux
from fuzz_common import DTYPES, FUZZ, FUZZ_SMALL, LAYOUTS, SIZES, expect_close, f64, lay_out, make, run, tol
from ref_fftconv import ref_fftconv, ref_fftconv_vjp
from ref_ks import chain_dense, dense
from ref_scan import block_matrix, circ_matrix, dense_jvp, diag_matrix, naive_irfft, ref_block_circulant_scan, ref_circulant_scan, ref_diag_scan, re_dot
from ref_toeplitz import ref_grad_blocks, ref_matvec, ref_rmatvec

POISON = st.sampled_from([None, None, None, "nan", "inf"])


def poison(rng, a, how):
    """`a` with one NaN or inf at a random place (same layout kind: a strided copy stays strided)."""
    if how is None:
        return a, False
    b = np.array(a, copy=True)
    b.flat[rng.integers(b.size)] = np.nan if how == "nan" else np.inf
    return b, True


def cat(base, dtype, layout, poisoned):
    if poisoned:
        return f"{base}: non-finite values"
    if layout != "c":
        return f"{base}: layouts and strides"
    return f"{base}: dtypes and shapes"


# ---- fftconv -----------------------------------------------------------------------------------
@FUZZ
@given(B=SIZES, H=st.sampled_from([1, 2, 3]), L=SIZES, Lk=SIZES, mode=st.sampled_from(["causal", "circular"]),
       dt=st.sampled_from(DTYPES), lay=st.sampled_from(LAYOUTS), gates=st.integers(0, 7),
       pois=POISON, seed=st.integers(0, 2**16), cls=st.booleans())
def test_fftconv(B, H, L, Lk, mode, dt, lay, gates, pois, seed, cls):
    rng = np.random.default_rng(seed)
    u = make(rng, (B, H, L), dt, lay)
    u, bad = poison(rng, u, pois)
    k = make(rng, (H, Lk), dt, "c")
    pre = make(rng, (B, H, L), dt, lay) if gates & 1 else None
    post = make(rng, (B, H, L), dt, "c") if gates & 2 else None
    skip = make(rng, (H,), dt, lay) if gates & 4 else None
    valid = mode == "causal" or Lk <= L

    def call():
        if cls:
            return strux.FFTConv(k, L, mode=mode)(u, pregate=pre, postgate=post, skip=skip)
        return strux.fftconv(u, k, mode=mode, pregate=pre, postgate=post, skip=skip)

    ref = ref_fftconv(u, k, mode, pre, post, skip) if valid else None
    run(cat("fftconv", dt, lay, bad), call, ["k"], expect_error=not valid,
        check=lambda y: expect_close(y, ref, dt, scale=10))


@FUZZ_SMALL
@given(B=SIZES, H=st.sampled_from([1, 2]), L=SIZES, Lk=SIZES, mode=st.sampled_from(["causal", "circular"]),
       dt=st.sampled_from(DTYPES), lay=st.sampled_from(LAYOUTS), gates=st.integers(0, 7), seed=st.integers(0, 2**16),
       cls=st.booleans())
def test_fftconv_vjp(B, H, L, Lk, mode, dt, lay, gates, seed, cls):
    rng = np.random.default_rng(seed)
    if mode == "circular" and Lk > L:
        Lk = L
    u, dy = make(rng, (B, H, L), dt, lay), make(rng, (B, H, L), dt, "c")
    k = make(rng, (H, Lk), dt, lay)
    pre = make(rng, (B, H, L), dt, "c") if gates & 1 else None
    post = make(rng, (B, H, L), dt, lay) if gates & 2 else None
    skip = make(rng, (H,), dt, "c") if gates & 4 else None
    refs = ref_fftconv_vjp(dy, u, k, mode, pre, post, skip)

    def call():
        if cls:
            return strux.FFTConv(k, L, mode=mode).vjp(dy, u, pregate=pre, postgate=post, skip=skip)
        return strux.fftconv_vjp(dy, u, k, mode=mode, pregate=pre, postgate=post, skip=skip)

    def check(gs):
        for g, r, name in zip(gs, refs, ("du", "dk", "dpregate", "dpostgate", "dskip")):
            assert (g is None) == (r is None), name
            if r is not None:
                expect_close(g, r, dt, scale=30, what=name)

    run(cat("fftconv_vjp", dt, lay, False), call, [], check=check)


# ---- toeplitz ----------------------------------------------------------------------------------
@FUZZ
@given(nt=SIZES, nd=st.sampled_from([1, 2, 3]), nm=st.sampled_from([1, 2, 3]), R=st.sampled_from([0, 1, 3]),
       layout=st.sampled_from(["time-major", "space-major"]), dt=st.sampled_from(DTYPES),
       lay=st.sampled_from(LAYOUTS), pois=POISON, seed=st.integers(0, 2**16), op=st.sampled_from(["mv", "rmv", "vjp", "dense"]))
def test_toeplitz(nt, nd, nm, R, layout, dt, lay, pois, seed, op):
    rng = np.random.default_rng(seed)
    blocks = make(rng, (nt, nd, nm), dt, lay)
    tail = (R,) if R else ()
    m_tm = make(rng, (nt, nm) + tail, dt, "c")
    d_tm = make(rng, (nt, nd) + tail, dt, "c")
    m_tm, bad = poison(rng, m_tm, pois if op == "mv" else None)
    sm = layout == "space-major"
    to_l = (lambda x: lay_out(np.swapaxes(x, 0, 1), lay)) if sm else (lambda x: lay_out(x, lay))
    from_l = (lambda y: np.swapaxes(y, 0, 1)) if sm else (lambda y: y)
    T = strux.BlockToeplitz(blocks, layout=layout)
    if op == "mv":
        ref = ref_matvec(blocks, m_tm)
        run(cat("toeplitz", dt, lay, bad), lambda: from_l(T.matvec(to_l(m_tm))), [],
            check=lambda y: expect_close(y, ref, dt, scale=10))
    elif op == "rmv":
        ref = ref_rmatvec(blocks, d_tm)
        run(cat("toeplitz", dt, lay, False), lambda: from_l(T.rmatvec(to_l(d_tm))), [],
            check=lambda y: expect_close(y, ref, dt, scale=10))
    elif op == "vjp":
        rdm, rdb = ref_rmatvec(blocks, d_tm), ref_grad_blocks(m_tm, d_tm)

        def check(g):
            expect_close(from_l(g[0]), rdm, dt, scale=10, what="dm")
            expect_close(g[1], rdb, dt, scale=10, what="dblocks")

        run(cat("toeplitz_vjp", dt, lay, False), lambda: T.vjp(to_l(m_tm), to_l(d_tm)), [], check=check)
    else:
        ref = np.zeros((nt * nd, nt * nm))
        for i in range(nt):
            for j in range(i + 1):
                ref[i * nd:(i + 1) * nd, j * nm:(j + 1) * nm] = f64(blocks[i - j])
        if sm:  # to_dense() is in the operator's own layout: rows a*Nt + i, columns b*Nt + j
            ref = ref.reshape(nt, nd, nt, nm).transpose(1, 0, 3, 2).reshape(nd * nt, nm * nt)
        run(cat("toeplitz", dt, lay, False), lambda: T.to_dense(), [], check=lambda y: expect_close(y, ref, dt))


@FUZZ_SMALL
@given(ns=SIZES, nd=st.sampled_from([1, 2, 3]), nm=st.sampled_from([1, 2, 3]), nt=SIZES, withD=st.booleans(),
       dt=st.sampled_from(DTYPES), lay=st.sampled_from(LAYOUTS), seed=st.integers(0, 2**16))
def test_toeplitz_from_lti(ns, nd, nm, nt, withD, dt, lay, seed):
    rng = np.random.default_rng(seed)
    A = make(rng, (ns, ns), dt, lay, scale=0.5 / ns)
    B, C = make(rng, (ns, nm), dt, "c"), make(rng, (nd, ns), dt, lay)
    D = make(rng, (nd, nm), dt, lay) if withD else None
    ref = np.stack([f64(C) @ np.linalg.matrix_power(f64(A), t) @ f64(B) for t in range(nt)])
    if withD:
        ref[0] += f64(D)
    run(cat("toeplitz_lti", dt, lay, False), lambda: strux.BlockToeplitz.from_lti(A, B, C, nt, D=D).blocks, [],
        check=lambda b: expect_close(b.astype(np.dtype(dt).newbyteorder("=")), ref, dt, scale=10))


# ---- ks ----------------------------------------------------------------------------------------
PAT = st.tuples(*(st.sampled_from([1, 2, 3]) for _ in range(4)))
KS_DT = ["float64", "float32", ">f8", ">f4", "float16"]


def ks_sparse(x, w, pat, layout):
    """y[n, (i, k, j)] = sum_l w[i, k, l, j] x[n, (i, l, j)] (DESIGN.md), float64."""
    a, b, c, d = pat
    if layout == "bsf":
        xr = f64(x).reshape(-1, a, c, d)
        return np.einsum("nilj,iklj->nikj", xr, f64(w)).reshape(xr.shape[0], a * b * d)
    xr = f64(x).reshape(a, c, d, -1)
    return np.einsum("iljn,iklj->ikjn", xr, f64(w)).reshape(a * b * d, xr.shape[-1])


@FUZZ
@given(pat=PAT, batch=SIZES, layout=st.sampled_from(["bsf", "bsl"]), dt=st.sampled_from(KS_DT),
       lay=st.sampled_from(LAYOUTS), pois=POISON, seed=st.integers(0, 2**16), op=st.sampled_from(["mm", "vjp", "dense"]))
def test_ks(pat, batch, layout, dt, lay, pois, seed, op):
    rng = np.random.default_rng(seed)
    a, b, c, d = pat
    M, N = a * b * d, a * c * d
    w = make(rng, pat, dt, lay)
    xs = (batch, N) if layout == "bsf" else (N, batch)
    x = make(rng, xs, dt, lay)
    K = dense(w, pat)
    if op == "mm":
        x, bad = poison(rng, x, pois)
        ref = ks_sparse(x, w, pat, layout)  # over the support only: NaN * structural 0 never happens
        run(cat("ks", dt, lay, bad), lambda: strux.ks_matmul(x, w, pat, layout=layout), [],
            check=lambda y: expect_close(y, ref, dt, scale=10))
    elif op == "vjp":
        dy = make(rng, (batch, M) if layout == "bsf" else (M, batch), dt, "c")
        G = f64(dy).T @ f64(x) if layout == "bsf" else f64(dy) @ f64(x).T  # (M, N) = dL/dK
        rdx = f64(dy) @ K if layout == "bsf" else K.T @ f64(dy)
        rdw = np.zeros(pat)
        for i in range(a):
            for k in range(b):
                for l in range(c):
                    for j in range(d):
                        rdw[i, k, l, j] = G[i * b * d + k * d + j, i * c * d + l * d + j]

        def check(g):
            expect_close(g[0], rdx, dt, scale=10, what="dx")
            expect_close(g[1], rdw, dt, scale=10, what="dw")

        run(cat("ks_vjp", dt, lay, False), lambda: strux.ks_matmul_vjp(dy, x, w, pat, layout=layout), [], check=check)
    else:
        run(cat("ks", dt, lay, False), lambda: strux.ks_dense(w, pat), [], check=lambda y: expect_close(y, K, dt))


@FUZZ_SMALL
@given(p1=PAT, c2=st.sampled_from([1, 2, 3]), batch=SIZES, layout=st.sampled_from(["bsf", "bsl"]),
       dt=st.sampled_from(KS_DT), lay=st.sampled_from(LAYOUTS), seed=st.integers(0, 2**16), vjp=st.booleans())
def test_ks_chain(p1, c2, batch, layout, dt, lay, seed, vjp):
    rng = np.random.default_rng(seed)
    a1, b1, c1, d1 = p1
    p2 = (a1, c1, c2, d1)  # rows of p2 = a1 c1 d1 = columns of p1
    pats = [p1, p2]
    ws = [make(rng, p1, dt, lay), make(rng, p2, dt, "c")]
    K = chain_dense(ws, pats)
    M, N = K.shape
    x = make(rng, (batch, N) if layout == "bsf" else (N, batch), dt, lay)
    if not vjp:
        ref = f64(x) @ K.T if layout == "bsf" else K @ f64(x)
        run(cat("ks_chain", dt, lay, False), lambda: strux.ks_chain(x, ws, pats, layout=layout), [],
            check=lambda y: expect_close(y, ref, dt, scale=10))
        return
    dy = make(rng, (batch, M) if layout == "bsf" else (M, batch), dt, "c")
    # adjoint identity: <dx, e_x> + sum <dw_p, e_p> = <dy, d/dt chain(x + t e_x, ws + t e_w)>
    ex = rng.standard_normal(x.shape)
    es = [rng.standard_normal(p) for p in pats]
    K1, K2 = dense(ws[0], p1), dense(ws[1], p2)
    dK = dense(es[0], p1) @ K2 + K1 @ dense(es[1], p2)
    jv = (ex @ K.T + f64(x) @ dK.T) if layout == "bsf" else (K @ ex + dK @ f64(x))
    rhs = float(np.sum(f64(dy) * jv))

    def check(g):
        dx, dws = g
        assert dx.shape == x.shape and [w.shape for w in dws] == [tuple(p) for p in pats]
        lhs = float(np.sum(f64(dx) * ex) + sum(np.sum(f64(dw) * e) for dw, e in zip(dws, es)))
        size = float(np.sum(np.abs(f64(dy)) * (np.abs(ex) @ np.abs(K).T if layout == "bsf" else np.abs(K) @ np.abs(ex)))) + 1.0
        assert abs(lhs - rhs) <= 50 * tol(dt) * size, (lhs, rhs)

    run(cat("ks_chain_vjp", dt, lay, False), lambda: strux.ks_chain_vjp(dy, x, ws, pats, layout=layout), [], check=check)


# ---- scans -------------------------------------------------------------------------------------
SCAN_DT = ["float64", "float32", ">f8", "float16", "complex128", "complex64"]


def scan_in(rng, shape, dt, lay, scale=1.0):
    if np.dtype(dt).kind == "c":
        a = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)) * scale
        return lay_out(a.astype(dt), lay)
    return make(rng, shape, dt, lay, scale)


def adjoint_check(grads, dirs, dh, jvp, dt):
    lhs = sum(re_dot(g, e) for g, e in zip(grads, dirs) if g is not None)
    rhs = re_dot(dh, jvp)
    size = float(np.sum(np.abs(f64(dh)) * np.abs(jvp))) + sum(
        float(np.sum(np.abs(f64(g)) * np.abs(e))) for g, e in zip(grads, dirs) if g is not None) + 1e-30
    assert abs(lhs - rhs) <= 50 * tol(dt) * size, (lhs, rhs)


@FUZZ
@given(B=SIZES, T=SIZES, n=SIZES, dt=st.sampled_from(SCAN_DT), lay=st.sampled_from(LAYOUTS), h0=st.booleans(),
       pois=POISON, seed=st.integers(0, 2**16), vjp=st.booleans())
def test_diag_scan(B, T, n, dt, lay, h0, pois, seed, vjp):
    rng = np.random.default_rng(seed)
    a = scan_in(rng, (B, T, n), dt, lay, 0.5)
    b = scan_in(rng, (B, T, n), dt, "c")
    hz = scan_in(rng, (B, n), dt, lay) if h0 else None
    if not vjp:
        b, bad = poison(rng, b, pois)
        ref = ref_diag_scan(f64(a), f64(b), f64(hz))
        run(cat("diag_scan", dt, lay, bad), lambda: strux.diag_scan(a, b, h0=hz), [],
            check=lambda h: expect_close(h, ref, dt, scale=10))
        return
    dh = scan_in(rng, (B, T, n), dt, "c")
    dirs = [scan_in(rng, (B, T, n), "complex128" if np.dtype(dt).kind == "c" else "float64", "c") for _ in range(2)]
    dirs.append(scan_in(rng, (B, n), dirs[0].dtype, "c") if h0 else None)
    jv = dense_jvp(diag_matrix(f64(a)), diag_matrix(dirs[0]), f64(b), dirs[1], f64(hz), dirs[2])
    run(cat("diag_scan_vjp", dt, lay, False), lambda: strux.diag_scan_vjp(dh, a, b, h0=hz), [],
        check=lambda g: adjoint_check(g, dirs, dh, jv, dt))


@FUZZ
@given(B=SIZES, T=SIZES, n=SIZES, dt=st.sampled_from(["float64", "float32", ">f8", "float16"]),
       lay=st.sampled_from(LAYOUTS), h0=st.booleans(), fourier=st.booleans(), pois=POISON,
       seed=st.integers(0, 2**16), vjp=st.booleans())
def test_circulant_scan(B, T, n, dt, lay, h0, fourier, pois, seed, vjp):
    rng = np.random.default_rng(seed)
    a_sp = make(rng, (B, T, n), dt, "c", 0.5 / n)
    cdt = np.complex128 if np.dtype(dt).itemsize == 8 else np.complex64
    a = lay_out(np.fft.rfft(f64(a_sp), axis=-1).astype(cdt), lay) if fourier else lay_out(a_sp, lay)
    a_ref = naive_irfft(f64(a), n) if fourier else f64(a)
    u = make(rng, (B, T, n), dt, lay)
    hz = make(rng, (B, n), dt, lay) if h0 else None
    if not vjp:
        u, bad = poison(rng, u, pois)
        ref = ref_circulant_scan(a_ref, f64(u), f64(hz))
        run(cat("circulant_scan", dt, lay, bad), lambda: strux.circulant_scan(a, u, h0=hz, fourier=fourier), [],
            check=lambda h: expect_close(h, ref, dt, scale=10))
        return
    dh = make(rng, (B, T, n), dt, "c")
    e_a = rng.standard_normal((B, T, n))
    e_u = rng.standard_normal((B, T, n))
    e_0 = rng.standard_normal((B, n)) if h0 else None
    jv = dense_jvp(circ_matrix(a_ref), circ_matrix(e_a), f64(u), e_u, f64(hz), e_0)

    # Fourier form: the direction of a_hat is rfft(e_a) (then irfft moves a by exactly e_a), and
    # da = dL/dRe + i dL/dIm pairs with it as Re sum conj(da) e_hat.
    e_dir = np.fft.rfft(e_a, axis=-1) if fourier else e_a
    check = lambda g: adjoint_check(list(g), [e_dir, e_u, e_0], dh, jv, dt)

    run(cat("circulant_scan_vjp", dt, lay, False),
        lambda: strux.circulant_scan_vjp(dh, a, u, h0=hz, fourier=fourier), [], check=check)


@FUZZ_SMALL
@given(B=st.sampled_from([1, 2]), T=SIZES, p=st.sampled_from([1, 2, 3]), k=st.sampled_from([1, 2, 3, 5]),
       dt=st.sampled_from(["float64", "float32", ">f8", "float16"]), lay=st.sampled_from(LAYOUTS),
       h0=st.booleans(), seed=st.integers(0, 2**16), vjp=st.booleans())
def test_block_circulant_scan(B, T, p, k, dt, lay, h0, seed, vjp):
    rng = np.random.default_rng(seed)
    n = p * k
    a = make(rng, (B, T, p, p, k), dt, lay, 0.5 / n)
    u = make(rng, (B, T, n), dt, lay)
    hz = make(rng, (B, n), dt, "c") if h0 else None
    if not vjp:
        ref = ref_block_circulant_scan(f64(a), f64(u), f64(hz))
        run(cat("block_circulant_scan", dt, lay, False), lambda: strux.block_circulant_scan(a, u, h0=hz), [],
            check=lambda h: expect_close(h, ref, dt, scale=10))
        return
    dh = make(rng, (B, T, n), dt, "c")
    e_a, e_u = rng.standard_normal(a.shape), rng.standard_normal(u.shape)
    e_0 = rng.standard_normal((B, n)) if h0 else None
    jv = dense_jvp(block_matrix(f64(a)), block_matrix(e_a), f64(u), e_u, f64(hz), e_0)
    run(cat("block_circulant_scan_vjp", dt, lay, False),
        lambda: strux.block_circulant_scan_vjp(dh, a, u, h0=hz), [],
        check=lambda g: adjoint_check(list(g), [e_a, e_u, e_0], dh, jv, dt))


# ---- files -------------------------------------------------------------------------------------
@pytest.mark.skipif(not strux._ext.has_hdf5, reason="no HDF5")
@FUZZ_SMALL
@given(nt=SIZES, nd=st.sampled_from([1, 2, 3]), nm=st.sampled_from([1, 2, 3]), dt=st.sampled_from(DTYPES),
       lay=st.sampled_from(LAYOUTS), prefix=st.sampled_from(["adj/vec_", "F_", "a/b/c_"]), seed=st.integers(0, 2**16))
def test_files_round_trip(tmp_path_factory, nt, nd, nm, dt, lay, prefix, seed):
    rng = np.random.default_rng(seed)
    d = tmp_path_factory.mktemp("fm")
    blocks = make(rng, (nt, nd, nm), dt, lay)
    x = make(rng, (nm, nt), dt, lay)

    def call():
        strux.BlockToeplitz(blocks).save_fftmatvec(d, prefix=prefix)
        strux.write_vector(d / "x.h5", x)
        return strux.BlockToeplitz.from_fftmatvec(d).blocks, strux.read_vector(d / "x.h5")

    def check(r):
        assert np.array_equal(r[0], f64(blocks)) and np.array_equal(r[1][0], f64(x)) and r[1][1] == "param"

    run(cat("files", dt, lay, False), call, [], check=check)
