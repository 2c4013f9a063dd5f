"""strux.ks against the float64 dense reference (ref_ks.py): factors, chains, gradients, errors."""
import numpy as np
import pytest

import ref_ks as ref
import strux
from strux.ks import ks_chain, ks_chain_vjp, ks_dense, ks_matmul, ks_matmul_vjp

PATTERNS = [(1, 1, 1, 1), (2, 2, 2, 2), (3, 5, 7, 2), (1, 4, 4, 1), (4, 1, 3, 5), (2, 3, 1, 1),
            (1, 1, 6, 3), (5, 2, 3, 1), (1, 13, 11, 1)]
LAYOUTS = ["bsf", "bsl"]
DTYPES = [np.float32, np.float64]
TOL = {np.float32: 2e-5, np.float64: 1e-12}
# Compatible chains (cols of π_p == rows of π_{p+1}): Monarch, butterfly, rectangular, trivial.
CHAINS = [
    [(1, 4, 4, 4), (4, 4, 4, 1)],
    [(1, 2, 2, 4), (2, 2, 2, 2), (4, 2, 2, 1)],
    [(3, 5, 2, 1), (1, 3, 3, 2)],
    [(1, 3, 2, 1), (2, 1, 5, 1), (1, 10, 7, 1)],
    [(1, 1, 1, 1), (1, 1, 1, 1)],
]


def rng():
    return np.random.default_rng()


def relerr(got, want):
    want = np.asarray(want, dtype=np.float64)
    return np.linalg.norm(np.asarray(got, dtype=np.float64) - want) / max(np.linalg.norm(want), 1e-300)


def act(g, width, batch, layout, dtype=np.float64):
    shape = (batch, width) if layout == "bsf" else (width, batch)
    return g.standard_normal(shape).astype(dtype)


def rows(p):
    return p[0] * p[1] * p[3]


def cols(p):
    return p[0] * p[2] * p[3]


# ---- one factor ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("pattern", PATTERNS)
def test_matmul_matches_dense(pattern, layout, dtype):
    g = rng()
    w = g.standard_normal(pattern).astype(dtype)
    for batch in (1, 6, 37):
        x = act(g, cols(pattern), batch, layout, dtype)
        y = ks_matmul(x, w, pattern, layout=layout)
        assert y.dtype == dtype
        assert y.shape == ((batch, rows(pattern)) if layout == "bsf" else (rows(pattern), batch))
        assert relerr(y, ref.matmul(x, w, pattern, layout)) < TOL[dtype]


def test_default_layout_is_bsf():
    g, p = rng(), (2, 3, 4, 2)
    w, x = g.standard_normal(p), g.standard_normal((5, cols(p)))
    np.testing.assert_array_equal(ks_matmul(x, w, p), ks_matmul(x, w, p, layout="bsf"))
    # bsl is the transposed problem: K x.T == (x K.T).T
    assert relerr(ks_matmul(x.T.copy(), w, p, layout="bsl").T, ks_matmul(x, w, p)) < 1e-14


def test_large_batch_many_chunks():
    g = rng()
    for p, layout in [((2, 8, 8, 16), "bsf"), ((2, 8, 8, 16), "bsl"), ((1, 16, 24, 1), "bsf"),
                      ((2, 6, 9, 12), "bsf")]:
        w = g.standard_normal(p).astype(np.float32)
        x = act(g, cols(p), 1500, layout, np.float32)
        assert relerr(ks_matmul(x, w, p, layout=layout), ref.matmul(x, w, p, layout)) < TOL[np.float32]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_non_contiguous_inputs(layout):
    g, p = rng(), (3, 5, 7, 2)
    big = g.standard_normal((2 * 9, 3 * cols(p)))
    x = big[::2, ::3] if layout == "bsf" else big[::2, ::3].T  # strided, or a transposed view
    assert not x.flags.c_contiguous
    wbig = g.standard_normal((3, 5, 7, 4))
    w = wbig[..., ::2]
    assert not w.flags.c_contiguous
    assert relerr(ks_matmul(x, w, p, layout=layout), ref.matmul(x, w, p, layout)) < 1e-12
    dy = act(g, rows(p), 9, layout)[::-1]
    dx, dw = ks_matmul_vjp(dy, x, w, p, layout=layout)
    K = ref.dense(w, p)
    assert relerr(dx, dy @ K if layout == "bsf" else K.T @ dy) < 1e-12


def test_float16_computed_in_float32():
    g, p = rng(), (2, 3, 4, 2)
    w = g.standard_normal(p).astype(np.float16)
    x = g.standard_normal((7, cols(p))).astype(np.float16)
    y = ks_matmul(x, w, p)
    assert y.dtype == np.float16
    assert relerr(y, ref.matmul(x, w, p)) < 2e-3
    dx, dw = ks_matmul_vjp(np.ones((7, rows(p)), np.float16), x, w, p)
    assert dx.dtype == np.float16 and dw.dtype == np.float16
    w0 = g.standard_normal((1, 3, rows(p), 1)).astype(np.float16)  # applied after p
    yc = ks_chain(x, [w0, w], [(1, 3, rows(p), 1), p])
    assert yc.dtype == np.float16 and yc.shape == (7, 3)
    assert relerr(yc, ref.chain(x, [w0, w], [(1, 3, rows(p), 1), p])) < 2e-3


@pytest.mark.parametrize("layout", LAYOUTS)
def test_nan_propagates_along_support_only(layout):
    g, p = rng(), (2, 3, 2, 2)
    w = g.standard_normal(p) + 3.0  # no zero values: NaN reaches every output in its column's support
    x = act(g, cols(p), 4, layout)
    col, t = 5, 2
    if layout == "bsf":
        x[t, col] = np.nan
    else:
        x[col, t] = np.nan
    y = ks_matmul(x, w, p, layout=layout)
    hit = ref.support(p)[:, col] > 0
    ycol = y[t] if layout == "bsf" else y[:, t]
    np.testing.assert_array_equal(np.isnan(ycol), hit)
    assert hit.sum() == p[1]
    assert np.isnan(y).sum() == p[1]  # other batch elements untouched


def test_ks_dense_matches_reference():
    g = rng()
    for p in PATTERNS:
        w = g.standard_normal(p)
        np.testing.assert_array_equal(ks_dense(w, p), ref.dense(w, p))
    assert strux.ks_dense is ks_dense


# ---- gradients --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("pattern", PATTERNS)
def test_matmul_vjp_dot_product(pattern, layout, dtype):
    """<dx, δx> == <dy, K δx> and <dw, δw> == <dy, K(δw) x> (y is linear in x and in w)."""
    g = rng()
    for batch in (1, 5):
        w = g.standard_normal(pattern)
        x, dy = act(g, cols(pattern), batch, layout), act(g, rows(pattern), batch, layout)
        dx, dw = ks_matmul_vjp(dy.astype(dtype), x.astype(dtype), w.astype(dtype), pattern, layout=layout)
        assert dx.dtype == dtype and dw.dtype == dtype
        assert dx.shape == x.shape and dw.shape == w.shape
        xd, wd = g.standard_normal(x.shape), g.standard_normal(w.shape)
        lhs_x, rhs_x = np.vdot(dx, xd), np.vdot(dy, ref.matmul(xd, w, pattern, layout))
        lhs_w, rhs_w = np.vdot(dw, wd), np.vdot(dy, ref.matmul(x, wd, pattern, layout))
        scale_x = np.abs(dy).sum() * np.abs(ref.matmul(xd, np.abs(w), pattern, layout)).max()
        scale_w = np.abs(dy).sum() * np.abs(ref.matmul(np.abs(x), np.abs(wd), pattern, layout)).max()
        assert abs(lhs_x - rhs_x) <= 5 * TOL[dtype] * scale_x
        assert abs(lhs_w - rhs_w) <= 5 * TOL[dtype] * scale_w
        # And directly: dx = dy K (bsf) / Kᵀ dy (bsl).
        K = ref.dense(w, pattern)
        assert relerr(dx, dy @ K if layout == "bsf" else K.T @ dy) < TOL[dtype]


# ---- chains -----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("patterns", CHAINS, ids=lambda c: "-".join("x".join(map(str, p)) for p in c))
def test_chain_matches_dense(patterns, layout, dtype):
    g = rng()
    ws = [g.standard_normal(p).astype(dtype) for p in patterns]
    for batch in (1, 7):
        x = act(g, cols(patterns[-1]), batch, layout, dtype)
        y = ks_chain(x, ws, patterns, layout=layout)
        assert y.dtype == dtype
        assert relerr(y, ref.chain(x, ws, patterns, layout)) < 2 * TOL[dtype]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("patterns", CHAINS, ids=lambda c: "-".join("x".join(map(str, p)) for p in c))
def test_chain_vjp_dot_product(patterns, layout):
    g = rng()
    for dtype in DTYPES:
        ws = [g.standard_normal(p) for p in patterns]
        batch = 3
        x = act(g, cols(patterns[-1]), batch, layout)
        dy = act(g, rows(patterns[0]), batch, layout)
        dx, dws = ks_chain_vjp(dy.astype(dtype), x.astype(dtype), [w.astype(dtype) for w in ws], patterns,
                               layout=layout)
        assert len(dws) == len(ws) and all(d.shape == w.shape and d.dtype == dtype for d, w in zip(dws, ws))
        xd = g.standard_normal(x.shape)
        scale = np.linalg.norm(dy) * np.linalg.norm(ref.chain(xd, ws, patterns, layout)) + 1e-300
        assert abs(np.vdot(dx, xd) - np.vdot(dy, ref.chain(xd, ws, patterns, layout))) < 10 * TOL[dtype] * scale
        for q in range(len(ws)):  # y is linear in each w_q
            wd = g.standard_normal(ws[q].shape)
            ws2 = list(ws)
            ws2[q] = wd
            yq = ref.chain(x, ws2, patterns, layout)
            scale = np.linalg.norm(dy) * np.linalg.norm(yq) + 1e-300
            assert abs(np.vdot(dws[q], wd) - np.vdot(dy, yq)) < 10 * TOL[dtype] * scale, q


def test_chain_single_factor_equals_matmul():
    g, p = rng(), (3, 5, 7, 2)
    w, x = g.standard_normal(p), g.standard_normal((4, cols(p)))
    np.testing.assert_allclose(ks_chain(x, [w], [p]), ks_matmul(x, w, p), rtol=1e-13, atol=1e-13)


# ---- bad input ----------------------------------------------------------------------------------

def test_bad_pattern():
    x, w = np.zeros((2, 4)), np.zeros((1, 2, 4, 1))
    for bad in [(1, 2, 4), (1, 2, 4, 1, 1), (0, 2, 4, 1), (1, -2, 4, 1), (1, 2.0, 4, 1), (True, 2, 4, 1),
                "abcd", 5, None]:
        with pytest.raises(ValueError, match="'pattern'"):
            ks_matmul(x, w, bad)
    with pytest.raises(ValueError, match="'pattern'"):
        ks_dense(w, (1, 2, 0, 1))
    assert ks_matmul(x, w, (np.int64(1), 2, 4, np.int32(1))).shape == (2, 2)


def test_bad_w():
    x = np.zeros((2, 4))
    with pytest.raises(ValueError, match="'w'"):
        ks_matmul(x, np.zeros((1, 2, 4)), (1, 2, 4, 1))
    with pytest.raises(ValueError, match="'w'"):
        ks_matmul(x, np.zeros((1, 4, 2, 1)), (1, 2, 4, 1))
    with pytest.raises(TypeError, match="'w'"):
        ks_matmul(x, np.zeros((1, 2, 4, 1), np.int32), (1, 2, 4, 1))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_bad_x(layout):
    p, w = (1, 2, 4, 1), np.zeros((1, 2, 4, 1))
    with pytest.raises(ValueError, match="'x'"):
        ks_matmul(np.zeros(4), w, p, layout=layout)
    with pytest.raises(ValueError, match="'x'"):
        ks_matmul(np.zeros((2, 4, 1)), w, p, layout=layout)
    wrong = np.zeros((4, 3)) if layout == "bsf" else np.zeros((3, 4))  # N along the wrong axis
    with pytest.raises(ValueError, match="'x'"):
        ks_matmul(wrong, w, p, layout=layout)
    with pytest.raises(ValueError, match="'x'"):
        ks_matmul(np.zeros((0, 4)) if layout == "bsf" else np.zeros((4, 0)), w, p, layout=layout)
    with pytest.raises(TypeError, match="'x'"):
        ks_matmul(np.zeros((2, 4), np.int64) if layout == "bsf" else np.zeros((4, 2), np.int64), w, p,
                  layout=layout)
    with pytest.raises(TypeError, match="'x'"):
        ks_matmul(np.zeros((2, 4), np.complex128), w, p)


def test_bad_layout_and_dtypes():
    p, w, x = (1, 2, 4, 1), np.zeros((1, 2, 4, 1)), np.zeros((2, 4))
    for bad in ["BSF", "bsx", "", None, 0]:
        with pytest.raises(ValueError, match="'layout'"):
            ks_matmul(x, w, p, layout=bad)
        with pytest.raises(ValueError, match="'layout'"):
            ks_chain(x, [w], [p], layout=bad)
    with pytest.raises(TypeError, match="'w'"):
        ks_matmul(x.astype(np.float32), w, p)
    with pytest.raises(TypeError):
        ks_matmul_vjp(np.zeros((2, 2), np.float32), x, w, p)
    with pytest.raises(ValueError, match="'dy'"):
        ks_matmul_vjp(np.zeros((3, 2)), x, w, p)
    with pytest.raises(ValueError, match="'dy'"):
        ks_matmul_vjp(np.zeros((2, 4)), x, w, p)


def test_bad_chain():
    g = rng()
    ps = [(1, 2, 2, 1), (1, 2, 2, 1), (1, 3, 2, 1)]  # entries 1 and 2 incompatible (2 vs 3)
    ws = [g.standard_normal(p) for p in ps]
    x = np.zeros((2, 2))
    with pytest.raises(ValueError, match=r"'patterns'.*entries 1 and 2"):
        ks_chain(x, ws, ps)
    with pytest.raises(ValueError, match=r"'patterns'.*entries 1 and 2"):
        ks_chain_vjp(np.zeros((2, 2)), x, ws, ps)
    with pytest.raises(ValueError, match="patterns"):
        ks_chain(x, [], [])
    with pytest.raises(ValueError, match=r"patterns\[1\]"):
        ks_chain(x, ws[:2], [(1, 2, 2, 1), (1, 2, 0, 1)])
    good = ps[:2]
    with pytest.raises(ValueError, match="'ws'"):
        ks_chain(x, ws[:1], good)
    with pytest.raises(ValueError, match=r"ws\[1\]"):
        ks_chain(x, [ws[0], np.zeros((1, 2, 3, 1))], good)
    with pytest.raises(TypeError, match=r"ws\[1\]"):
        ks_chain(x, [ws[0], ws[1].astype(np.float32)], good)
    with pytest.raises(ValueError, match="'x'"):
        ks_chain(np.zeros((2, 3)), ws[:2], good)
    with pytest.raises(ValueError, match="'dy'"):
        ks_chain_vjp(np.zeros((3, 2)), x, ws[:2], good)


# ---- the CPU solvers, forced through the binding (tests, benchmarks) ------------------------------

def _flat(ps):
    return [int(v) for p in ps for v in p]


SOLVER_CHAINS = [strux.patterns.butterfly(64, 2), strux.patterns.butterfly(256, 4),
                 [(1, 4, 4, 4), (4, 4, 4, 1)], [(2, 2, 2, 1), (1, 2, 1, 2)]]


@pytest.mark.parametrize("solver", ["", "fused", "factors", "gemm"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("patterns", SOLVER_CHAINS, ids=lambda c: "-".join("x".join(map(str, p)) for p in c))
def test_chain_solvers(patterns, layout, solver):
    from strux import _ext
    g = rng()
    for dtype, sfx in ((np.float32, "_f32"), (np.float64, "_f64")):
        ws = [g.standard_normal(p).astype(dtype) for p in patterns]
        for batch in (1, 33):
            x = act(g, cols(patterns[-1]), batch, layout, dtype)
            dy = act(g, rows(patterns[0]), batch, layout, dtype)
            y = getattr(_ext, "ks_chain" + sfx)(x, ws, _flat(patterns), layout, solver)
            assert relerr(y, ref.chain(x, ws, patterns, layout)) < 2 * TOL[dtype]
            dx, dws = getattr(_ext, "ks_chain_vjp" + sfx)(dy, x, ws, _flat(patterns), layout, solver)
            dx0, dws0 = ks_chain_vjp(dy.astype(np.float64), x.astype(np.float64),
                                     [w.astype(np.float64) for w in ws], patterns, layout=layout)
            assert relerr(dx, dx0) < 2 * TOL[dtype]
            for d, d0 in zip(dws, dws0):
                assert relerr(d, d0) < 4 * TOL[dtype]


@pytest.mark.parametrize("solver", ["gemm", "tiles"])
@pytest.mark.parametrize("pattern", [(2, 2, 2, 8), (4, 4, 4, 1), (1, 8, 8, 3), (3, 5, 7, 2)])
def test_matmul_solvers(pattern, solver):
    from strux import _ext
    g = rng()
    w = g.standard_normal(pattern).astype(np.float32)
    x = act(g, cols(pattern), 41, "bsf", np.float32)
    dy = act(g, rows(pattern), 41, "bsf", np.float32)
    assert relerr(_ext.ks_matmul_f32(x, w, list(pattern), "bsf", solver), ref.matmul(x, w, pattern)) < TOL[np.float32]
    dx, dw = _ext.ks_matmul_vjp_f32(dy, x, w, list(pattern), "bsf", solver)
    dx0, dw0 = ks_matmul_vjp(dy.astype(np.float64), x.astype(np.float64), w.astype(np.float64), pattern)
    assert relerr(dx, dx0) < TOL[np.float32] and relerr(dw, dw0) < TOL[np.float32]


def test_bad_solver():
    from strux import _ext
    x, w = np.zeros((2, 4), np.float32), np.zeros((1, 2, 4, 1), np.float32)
    with pytest.raises(ValueError, match="'solver'"):
        _ext.ks_matmul_f32(x, w, [1, 2, 4, 1], "bsf", "fused")
    with pytest.raises(ValueError, match="'solver'"):
        _ext.ks_chain_f32(x, [w], [1, 2, 4, 1], "bsf", "tiles")


def test_chain_fused_many_weights():
    """A chain whose dw accumulators exceed the lane budget (one lane per weight) and one within
    it: the fused backward against the GEMM path, float64."""
    from strux import _ext
    g = rng()
    for n in (4096, 256):
        ps = strux.patterns.butterfly(n, 2)
        ws = [g.standard_normal(p) / np.sqrt(2) for p in ps]
        x, dy = g.standard_normal((33, n)), g.standard_normal((33, n))
        dx, dws = _ext.ks_chain_vjp_f64(dy, x, ws, _flat(ps), "bsf", "fused")
        dx0, dws0 = _ext.ks_chain_vjp_f64(dy, x, ws, _flat(ps), "bsf", "gemm")
        assert relerr(dx, dx0) < 1e-12
        for d, d0 in zip(dws, dws0):
            assert relerr(d, d0) < 1e-12


# ---- the radix-2 pair kernels (solver "pairs", the automatic choice for radix-2 chains) ---------

PAIR_CHAINS = [strux.patterns.butterfly(16, 2), strux.patterns.butterfly(256, 2),
               [(2, 2, 2, 4), (8, 2, 2, 1), (4, 2, 2, 2)],   # d in any order
               [(8, 2, 2, 1), (8, 2, 2, 1), (4, 2, 2, 2)]]   # a repeated d


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("patterns", PAIR_CHAINS, ids=lambda c: "-".join("x".join(map(str, p)) for p in c))
def test_chain_pairs(patterns, layout):
    from strux import _ext
    g = rng()
    for dtype, sfx in ((np.float32, "_f32"), (np.float64, "_f64")):
        ws = [g.standard_normal(p).astype(dtype) for p in patterns]
        for batch in (1, 5, 37, 130, 208):  # one row / column, a prime, several row blocks and column
            # tiles; 208: bsl rows of whole cache lines (streaming stores, a short tile before the grid)
            x = act(g, cols(patterns[-1]), batch, layout, dtype)
            dy = act(g, rows(patterns[0]), batch, layout, dtype)
            y = getattr(_ext, "ks_chain" + sfx)(x, ws, _flat(patterns), layout, "pairs")
            assert relerr(y, ref.chain(x, ws, patterns, layout)) < 2 * TOL[dtype]
            dx, dws = getattr(_ext, "ks_chain_vjp" + sfx)(dy, x, ws, _flat(patterns), layout, "pairs")
            w64 = [w.astype(np.float64) for w in ws]
            dx0, dws0 = getattr(_ext, "ks_chain_vjp_f64")(dy.astype(np.float64), x.astype(np.float64), w64,
                                                         _flat(patterns), layout, "gemm")
            assert relerr(dx, dx0) < 2 * TOL[dtype]
            for d, d0 in zip(dws, dws0):
                assert relerr(d, d0) < 4 * TOL[dtype]


@pytest.mark.parametrize("batch", [19, 208])  # 208: bsl rows of whole lines (streaming stores)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_chain_pairs_public_api_non_contiguous(layout, batch):
    """ks_chain / ks_chain_vjp (the automatic rule picks the pair kernels) on strided views."""
    g = rng()
    ps = strux.patterns.butterfly(64, 2)
    ws = [g.standard_normal(p) for p in ps]
    big = g.standard_normal((2 * batch, 2 * 64))
    x = big[::2, ::2] if layout == "bsf" else big[::2, ::2].T
    for dtype in DTYPES:
        bigd = big.astype(dtype)
        xd = bigd[::2, ::2] if layout == "bsf" else bigd[::2, ::2].T  # strided, or a transposed view
        assert not xd.flags.c_contiguous
        wd = [w.astype(dtype) for w in ws]
        y = ks_chain(xd, wd, ps, layout=layout)
        assert relerr(y, ref.chain(x, ws, ps, layout)) < 2 * TOL[dtype]
        dy = act(g, 64, batch, layout)[::-1]
        dx, dws = ks_chain_vjp(dy.astype(dtype), xd, wd, ps, layout=layout)
        dx0, dws0 = ks_chain_vjp(dy, x, ws, ps, layout=layout)  # float64 runs the same kernels
        K = ref.dense(ws[0], ps[0])
        for w, p in zip(ws[1:], ps[1:]):
            K = K @ ref.dense(w, p)
        assert relerr(dx, dy @ K if layout == "bsf" else K.T @ dy) < 2 * TOL[dtype]
        for d, d0 in zip(dws, dws0):
            assert relerr(d, d0) < 4 * TOL[dtype]


def test_chain_pairs_refuses_other_chains():
    from strux import _ext
    x = np.zeros((3, 24), np.float32)
    ps = [(3, 2, 2, 4), (6, 2, 2, 2), (12, 2, 2, 1)]  # 24 float32 values: not whole vectors (bsf)
    ws = [np.zeros(p, np.float32) for p in ps]
    with pytest.raises(ValueError, match="'solver'.*pairs"):
        _ext.ks_chain_f32(x, ws, _flat(ps), "bsf", "pairs")
    ps4 = strux.patterns.butterfly(16, 4)
    with pytest.raises(ValueError, match="'solver'.*pairs"):
        _ext.ks_chain_f32(np.zeros((3, 16), np.float32), [np.zeros(p, np.float32) for p in ps4], _flat(ps4),
                          "bsf", "pairs")
