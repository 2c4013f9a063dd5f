"""The blocks fftconv solver (CPU, options={"solver": "blocks"}: overlap-save over blocks of an FFT
size of a few times the taps used) against the float64 direct-sum reference of DESIGN.md, forward
and every gradient, causal and circular; its agreement with the FFT solver; strided and
byte-swapped inputs; where a NaN goes."""
import numpy as np
import pytest

import strux
from ref_fftconv import ref_fftconv, ref_fftconv_vjp

BLOCKS = {"solver": "blocks"}
# Block sizes: Lk <= 32 gives N = 256 (S = 257 - Lk outputs per block), so L = 252, 504 (Lk = 5) and
# 256, 512 (Lk = 1) fill their blocks exactly and 253, 505, 257 end in a partial one.
LS = [1, 2, 5, 17, 97, 252, 253, 256, 257, 504, 505, 512, 1000, 4099]
LKS = [1, 5, 33, 100, 257, 1000, 5000]


def cases():
    for mode in ("causal", "circular"):
        for L in LS:
            for Lk in LKS:
                if mode == "circular" and Lk > L:
                    continue
                yield mode, L, Lk
    yield "causal", 300, 300  # Lk = L
    yield "circular", 300, 300


def rel(a, b):
    return np.linalg.norm(np.asarray(a, np.float64) - b) / max(np.linalg.norm(b), 1e-300)


@pytest.mark.parametrize("mode,L,Lk", list(cases()))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_forward_and_vjp_against_reference(mode, L, Lk, dtype):
    rng = np.random.default_rng(L * 7919 + Lk)
    B, H = 2, 3
    u, pre, post, dy = (rng.standard_normal((B, H, L)) for _ in range(4))
    k, skip = rng.standard_normal((H, Lk)), rng.standard_normal(H)
    c = [x.astype(dtype) for x in (u, k, pre, post, skip, dy)]
    r = [x.astype(np.float64) for x in c]  # the reference sees the rounded inputs
    op = strux.FFTConv(c[1], L, mode=mode, solver="blocks")
    assert op.solver == "blocks"
    tol = 2e-5 if dtype == np.float32 else 1e-12
    y = strux.fftconv(c[0], c[1], mode=mode, pregate=c[2], postgate=c[3], skip=c[4], options=BLOCKS)
    assert y.dtype == dtype
    assert rel(y, ref_fftconv(r[0], r[1], mode, r[2], r[3], r[4])) < tol
    got = strux.fftconv_vjp(c[5], c[0], c[1], mode=mode, pregate=c[2], postgate=c[3], skip=c[4], options=BLOCKS)
    want = ref_fftconv_vjp(r[5], r[0], r[1], mode, r[2], r[3], r[4])
    for name, g, w in zip(("du", "dk", "dpregate", "dpostgate", "dskip"), got, want):
        assert g.dtype == dtype and g.shape == w.shape, name
        assert rel(g, w) < 10 * tol, name
    if mode == "causal" and Lk > L:
        assert np.all(got[1][:, L:] == 0)  # taps s >= L never reach an output
    # without gates and skip (the other branches of the row passes)
    y0 = strux.fftconv(c[0], c[1], mode=mode, options=BLOCKS)
    assert rel(y0, ref_fftconv(r[0], r[1], mode)) < tol
    g0 = strux.fftconv_vjp(c[5], c[0], c[1], mode=mode, options=BLOCKS)
    w0 = ref_fftconv_vjp(r[5], r[0], r[1], mode)
    for g, w in zip(g0, w0):
        assert (g is None) == (w is None)
        if g is not None:
            assert rel(g, w) < 10 * tol


@pytest.mark.parametrize("mode", ["causal", "circular"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_agrees_with_fft_solver(mode, dtype):
    """Many blocks per row, B·H rows in parallel, H chunks of the backward's batch split."""
    rng = np.random.default_rng(11)
    B, H, L, Lk = 5, 4, 20000, 150
    u, pre, post, dy = (rng.standard_normal((B, H, L)).astype(dtype) for _ in range(4))
    k, skip = (rng.standard_normal((H, Lk)) / 10).astype(dtype), rng.standard_normal(H).astype(dtype)
    assert strux.FFTConv(k, L, mode=mode, solver="blocks").nfft < L // 4
    tol = 1e-5 if dtype == np.float32 else 1e-12
    kw = dict(mode=mode, pregate=pre, postgate=post, skip=skip)
    y = strux.fftconv(u, k, options=BLOCKS, **kw)
    f = strux.fftconv(u, k, options={"solver": "fft"}, **kw)
    assert rel(y, f.astype(np.float64)) < tol
    for a, b in zip(strux.fftconv_vjp(dy, u, k, options=BLOCKS, **kw),
                    strux.fftconv_vjp(dy, u, k, options={"solver": "fft"}, **kw)):
        assert rel(a, b.astype(np.float64)) < 10 * tol


def test_noncontiguous_and_byteswapped():
    """Strided, Fortran-ordered and big-endian inputs give the bits of the C-ordered native ones."""
    rng = np.random.default_rng(7)
    u, pre, post, dy = (rng.standard_normal((2, 3, 2 * 700)) for _ in range(4))
    k, skip = rng.standard_normal((3, 2 * 40)), rng.standard_normal(2 * 3)
    odd = [u[..., ::2], k[:, ::2], pre[..., ::2], post[..., ::2], skip[::2], dy[..., ::2]]
    plain = [np.ascontiguousarray(x) for x in odd]

    def run(a):
        y = strux.fftconv(a[0], a[1], pregate=a[2], postgate=a[3], skip=a[4], options=BLOCKS)
        return [y, *strux.fftconv_vjp(a[5], a[0], a[1], pregate=a[2], postgate=a[3], skip=a[4], options=BLOCKS)]

    want = run(plain)
    for args in (odd, [np.asfortranarray(x) for x in plain], [x.astype(">f8") for x in plain]):
        for g, w in zip(run(args), want):
            assert np.array_equal(g, w)


def test_nan_stays_in_its_blocks():
    """A NaN input sample reaches every output its taps reach, nothing outside its row, and no
    output of a block whose frame does not hold it (frames: v[jS - m + 1, jS + S))."""
    rng = np.random.default_rng(3)
    B, H, L, Lk, t0 = 2, 3, 3000, 20, 1400
    u, k = rng.standard_normal((B, H, L)), rng.standard_normal((H, Lk))
    u[1, 2, t0] = np.nan
    N = strux.FFTConv(k, L, solver="blocks").nfft
    S = N - Lk + 1
    for mode in ("causal", "circular"):
        y = strux.fftconv(u, k, mode=mode, options=BLOCKS)
        bad = np.isnan(y)
        assert bad[1, 2, t0:t0 + Lk].all()
        assert bad.sum() == bad[1, 2].sum()
        frames = [j for j in range((L + S - 1) // S) if j * S - (Lk - 1) <= t0 < j * S + S]
        inside = np.zeros(L, bool)
        for j in frames:
            inside[j * S:(j + 1) * S] = True
        assert not bad[1, 2, ~inside].any()
    dy = np.zeros_like(u)
    dy[0, 1, t0] = np.nan
    u[1, 2, t0] = 1.0
    du, dk, *_ = strux.fftconv_vjp(dy, u, k, options=BLOCKS)
    assert np.isnan(du[0, 1, t0 - Lk + 1:t0 + 1]).all() and np.isnan(dk[1]).all()
    assert np.isfinite(np.delete(du.reshape(B * H, L), 1, axis=0)).all()
    assert np.isfinite(dk[[0, 2]]).all()
    assert np.isfinite(du[0, 1, :max(0, (t0 - N + 1) // S * S)]).all()  # blocks whose dz frame misses t0


def test_automatic_rule():
    """"auto" takes blocks from L = 16384 where more than 16 taps are used and the block FFT is at
    most an eighth of the whole row's (bench/NOTES-cpu.md "fftconv-blocks"), and gives its bits."""
    for L, Lk, mode, want in ((16384, 17, "causal", "blocks"), (16384, 16, "causal", "direct"),
                              (16383, 17, "causal", "fft"), (65536, 1024, "causal", "blocks"),
                              (16384, 4096, "causal", "fft"), (16384, 1024, "circular", "fft"),
                              (65536, 4096, "causal", "fft"), (20011, 200, "circular", "blocks"),
                              (4096, 64, "circular", "fft")):
        assert strux.FFTConv(np.ones((1, Lk)), L, mode=mode).solver == want, (L, Lk, mode)
    rng = np.random.default_rng(5)
    u, k, dy = rng.standard_normal((1, 2, 16384)), rng.standard_normal((2, 40)), rng.standard_normal((1, 2, 16384))
    assert np.array_equal(strux.fftconv(u, k), strux.fftconv(u, k, options=BLOCKS))
    for a, b in zip(strux.fftconv_vjp(dy, u, k), strux.fftconv_vjp(dy, u, k, options=BLOCKS)):
        assert (a is None and b is None) or np.array_equal(a, b)


def test_names_and_object_api():
    rng = np.random.default_rng(1)
    k = rng.standard_normal((3, 50))
    op = strux.FFTConv(k, 10000, solver="blocks")
    assert op.solver == "blocks" and "blocks" in repr(op) and 256 <= op.nfft < 10000
    u = rng.standard_normal((2, 3, 10000))
    import pickle
    op2 = pickle.loads(pickle.dumps(op))
    assert op2.solver == "blocks" and np.array_equal(op2(u), op(u))
    assert np.array_equal(op(u), strux.fftconv(u, k, options=BLOCKS))
    with pytest.raises(ValueError, match="solver"):
        strux.FFTConv(k, 10000, solver="block")
