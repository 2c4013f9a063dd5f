"""GPU ks, the forced-only dense path (options {"path": "dense"}; src/cuda/ks/ks_dense.cu): W
expanded into the dense K, one cuBLAS GEMM, forward and dx, both layouts, float32 / float16 /
bfloat16. Checked against float64 einsums of the DESIGN.md index formula (written out here, not
through the dense K), exactly against dense_loop with identity inputs (every entry of K, bit for
bit), with NaN-poisoned output pools (every output written); plus the limits (ValueError), the
plan's words (describe) and that the default rule never takes it."""
import pytest

from ks_cuda_common import (needs_gpu, DEV, K, dense, dense_loop, dw_path, force, ks_path, nan_in_one_group,
                            poisoned_pool, rel, rnd, side_stream_product, torch)

pytestmark = needs_gpu

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# float32: FMA sums without TF32, against the sum of absolute terms (sums may cancel); halves: the
# inputs are exact in float64, the sum is float32, so the error is the output's rounding (<= u/2
# per element, u = 2^-11 / 2^-8): 4x that norm-wise. An index error errs by O(1) in every measure.
TOL = {torch.float32: 1e-6, torch.float16: 1e-3, torch.bfloat16: 8e-3}

# a*d = 1, 2, 3, 6 (and 4, 8); b != c both ways; b or c = 1; odd and prime sizes; d = 1 with a > 1
# (the group index lives in a only) and a = 1 with d > 1 (in d only); the H100 sweep's rows that
# lost to dense F.linear (bench/NOTES-gpu-ks-scan.md "ks-path-rule", whole-list sample).
PATTERNS = [(1, 1, 1, 1), (1, 5, 3, 1), (1, 1, 9, 1), (2, 7, 3, 1), (1, 4, 9, 2), (1, 9, 1, 2),
            (3, 5, 2, 1), (1, 3, 11, 3), (2, 13, 6, 3), (3, 2, 7, 2), (6, 1, 1, 1), (1, 17, 5, 6),
            (2, 3, 5, 4), (4, 6, 5, 2),
            (1, 96, 384, 3), (1, 384, 96, 2), (1, 256, 64, 6), (1, 256, 1024, 2), (1, 256, 256, 3)]
BATCHES = (1, 7, 1024)


def ref(w, t, p, layout, adjoint):
    """float64 (product, product of absolute values) by the index formula
    K[i*b*d + k*d + j, i*c*d + l*d + j] = w[i, k, l, j]: forward y = x K^T (bsf) / K x (bsl),
    adjoint dx = dy K (bsf) / K^T dy (bsl)."""
    a, b, c, d = p
    wd, td = w.double(), t.double()
    if layout == "bsf":
        n = t.shape[0]
        eq, shape, out = ("iklj,nikj->nilj", (n, a, b, d), (n, a * c * d)) if adjoint else \
            ("iklj,nilj->nikj", (n, a, c, d), (n, a * b * d))
    else:
        n = t.shape[1]
        eq, shape, out = ("iklj,ikjn->iljn", (a, b, d, n), (a * c * d, n)) if adjoint else \
            ("iklj,iljn->ikjn", (a, c, d, n), (a * b * d, n))
    return (torch.einsum(eq, wd, td.reshape(shape)).reshape(out),
            torch.einsum(eq, wd.abs(), td.abs().reshape(shape)).reshape(out))


def err(t, r, sc, dtype):
    return rel(t, r, sc) if dtype == torch.float32 else rel(t, r)


@pytest.mark.parametrize("p", PATTERNS)
@pytest.mark.parametrize("layout", ["bsf", "bsl"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_dense_forward_and_dx(p, layout, dtype, monkeypatch):
    """Forced dense: forward and dx against the float64 index formula at batches 1 / 7 / 1024,
    every output written (NaN-poisoned pool), output in the input dtype; backward_w keeps its own
    path and its values."""
    force(monkeypatch, path="dense")
    name = str(dtype)[6:]
    a, b, c, d = p
    N, M = a * c * d, a * b * d
    es = dtype.itemsize
    w = rnd(*p, dtype=dtype)
    for batch in BATCHES:
        assert ks_path(p, batch, layout, name) == ("dense", "dense"), (batch,)
        assert dw_path(p, batch, layout, name)[0] != "dense"
        x = rnd(batch, N, dtype=dtype) if layout == "bsf" else rnd(N, batch, dtype=dtype)
        poisoned_pool(es * batch * M)
        y = K.ks_matmul(x, w, p, layout=layout)
        assert y.dtype == dtype and tuple(y.shape) == ((batch, M) if layout == "bsf" else (M, batch))
        r, sc = ref(w, x, p, layout, False)
        assert not torch.isnan(y).any(), (batch, "y")
        assert err(y, r, sc, dtype) < TOL[dtype], (batch, "y", err(y, r, sc, dtype))
        dy = rnd(*y.shape, dtype=dtype)
        poisoned_pool(es * batch * N)
        dx, dw = K.ks_matmul_vjp(dy, x, w, p, layout=layout)
        assert dx.dtype == dtype and dx.shape == x.shape
        r, sc = ref(w, dy, p, layout, True)
        assert not torch.isnan(dx).any(), (batch, "dx")
        assert err(dx, r, sc, dtype) < TOL[dtype], (batch, "dx", err(dx, r, sc, dtype))
        # dw (not on the dense path): the batch sum of dy x over each group, loosely
        xb, dyb = (x, dy) if layout == "bsf" else (x.T, dy.T)
        rdw = torch.einsum("nikj,nilj->iklj", dyb.double().reshape(-1, a, b, d),
                           xb.double().reshape(-1, a, c, d))
        sdw = torch.einsum("nikj,nilj->iklj", dyb.double().abs().reshape(-1, a, b, d),
                           xb.double().abs().reshape(-1, a, c, d))
        assert rel(dw, rdw, sdw) < (1e-5 if dtype == torch.float32 else 2e-2), (batch, "dw")


@pytest.mark.parametrize("p", [(1, 1, 1, 1), (2, 3, 4, 1), (1, 3, 4, 2), (3, 2, 5, 2), (1, 7, 2, 3),
                               (2, 1, 3, 3), (2, 5, 1, 4)])
@pytest.mark.parametrize("layout", ["bsf", "bsl"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_dense_identity_gives_k_exactly(p, layout, dtype, monkeypatch):
    """Identity inputs read K out entry by entry: x = I_N gives y = K^T (bsf) / K (bsl), dy = I_M
    gives dx = K (bsf) / K^T (bsl). Every output is one weight times 1 plus exact zeros, so the
    result equals dense_loop (the formula, entry by entry) bit for bit in every dtype."""
    force(monkeypatch, path="dense")
    a, b, c, d = p
    N, M = a * c * d, a * b * d
    w = rnd(*p, dtype=dtype)
    Kd = dense_loop(w, p)  # float64, exact copies of w's values
    eye_n = torch.eye(N, device=DEV, dtype=dtype)
    eye_m = torch.eye(M, device=DEV, dtype=dtype)
    poisoned_pool(dtype.itemsize * N * M)
    y = K.ks_matmul(eye_n, w, p, layout=layout)
    assert torch.equal(y.double(), Kd.T if layout == "bsf" else Kd)
    poisoned_pool(dtype.itemsize * N * M)
    x = rnd(M, N, dtype=dtype) if layout == "bsf" else rnd(N, M, dtype=dtype)  # (batch M; dx ignores it)
    dx, _ = K.ks_matmul_vjp(eye_m, x, w, p, layout=layout)
    assert torch.equal(dx.double(), Kd if layout == "bsf" else Kd.T)


def test_dense_buffer_grows_and_shrinks(monkeypatch):
    """K lives in a buffer that plans grow: a small plan, a larger one, the small one again (its
    call must not depend on the buffer's size), all correct; interleaved with the blas path,
    which re-lays W out in the same buffer."""
    force(monkeypatch, path="dense")
    out = []
    for p in [(1, 3, 5, 2), (1, 256, 1024, 2), (1, 3, 5, 2), (2, 13, 6, 3)]:
        a, b, c, d = p
        w, x = rnd(*p), rnd(33, a * c * d)
        y = K.ks_matmul(x, w, p)
        r, sc = ref(w, x, p, "bsf", False)
        assert rel(y, r, sc) < 1e-6, p
        out.append((p, w, x, r, sc))
    force(monkeypatch, path="blas")  # (bsl: the weight buffer holds the re-laid-out W)
    for p, w, x, _, _ in out:
        K.ks_matmul(x.T.contiguous(), w, p, layout="bsl")
    force(monkeypatch, path="dense")
    for p, w, x, r, sc in out:
        assert rel(K.ks_matmul(x, w, p), r, sc) < 1e-6, p


def test_dense_nan_and_stream(monkeypatch):
    """A NaN in x reaches its group's outputs (and, through K's zeros, possibly every output of its
    batch entry: 0 * NaN; the documented difference from the ks paths), never another batch entry;
    the call runs on the caller's stream: an input written just before on that stream behind a
    long sleep is the one used, and a copy enqueued right after sees the finished result."""
    force(monkeypatch, path="dense")
    bad, cols, _ = nan_in_one_group()
    assert bad[7, cols].all() and not bad[:7].any() and not bad[8:].any()
    q = (1, 256, 256, 3)
    y, y2, x1, wq = side_stream_product(q)
    r, sc = ref(wq, x1, q, "bsf", False)
    assert rel(y, r, sc) < 1e-6 and rel(y2, r, sc) < 1e-6


def test_dense_limits_and_errors(monkeypatch):
    """A forced dense K over 2^28 elements, or a batch past cuBLAS's int, is a ValueError that
    names the argument, the limit and what came; float64 takes no options; an unknown path name
    lists the choices."""
    force(monkeypatch, path="dense")
    big = (1, 16384, 16384, 2)  # K 32768 x 32768 = 2^30 elements
    with pytest.raises(ValueError, match=r"argument 'path'.*'dense'.*2\^28.*\(1, 16384, 16384, 2\)"):
        ks_path(big, 7, "bsf")
    with pytest.raises(ValueError, match=r"argument 'path'.*'dense'.*batch 2147483648"):
        ks_path((1, 4, 4, 2), 2**31, "bsl")
    assert ks_path((1, 4, 4, 2), 2**31 - 1, "bsl") == ("dense", "dense")  # a query: nothing runs
    # at the limit: K 16384 x 16384 = 2^28 applies, one column more does not (queries only; the
    # plan reserves the buffer, 512 MiB in bfloat16)
    assert ks_path((1, 8192, 8192, 2), 1, "bsf", "bfloat16") == ("dense", "dense")
    with pytest.raises(ValueError, match="2\\^28"):
        ks_path((1, 8192, 8193, 2), 1, "bsf", "bfloat16")
    force(monkeypatch)
    x64, w64 = rnd(5, 8, dtype=torch.float64), rnd(1, 4, 4, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match="options"):
        K.ks_matmul(x64, w64, (1, 4, 4, 2), options={"path": "dense"})
    with pytest.raises(ValueError, match="'dense'"):  # the list of choices names it
        K.ks_matmul(rnd(5, 8), rnd(1, 4, 4, 2), (1, 4, 4, 2), options={"path": "Dense"})


@pytest.mark.parametrize("layout", ["bsf", "bsl"])
def test_dense_describe_and_never_default(layout):
    """describe() names the forced path with K's shape on forward and backward_x (backward_w
    keeps its own); without options no plan takes it (the table's default entries end before it)."""
    for p in [(1, 96, 384, 3), (1, 256, 1024, 2), (2, 3, 5, 1)]:
        a, b, c, d = p
        for dt in ("float32", "float16", "bfloat16"):
            s = K.ks_describe(p, 1024, layout=layout, dtype=dt, options={"path": "dense"})
            k = f"dense (K {a * b * d} x {a * c * d})"
            assert f"forward {k}" in s and f"backward_x {k}" in s, s
            assert "backward_w dense" not in s, s
            assert "dense" not in K.ks_describe(p, 1024, layout=layout, dtype=dt), p
    for p in PATTERNS:
        for dt in ("float32", "float16", "bfloat16"):
            for batch in (1, 7, 1024, 25088):
                assert "dense" not in ks_path(p, batch, layout, dt), (p, dt, batch)
                assert dw_path(p, batch, layout, dt)[0] != "dense"


def test_dense_agrees_with_default(monkeypatch):
    """The same inputs through the default path and the forced dense path agree to the dtype's
    accuracy (both layouts, forward and dx)."""
    for dtype in DTYPES:
        for p in [(1, 96, 384, 3), (2, 13, 6, 3)]:
            a, b, c, d = p
            w = rnd(*p, dtype=dtype)
            for layout in ("bsf", "bsl"):
                x = rnd(1024, a * c * d, dtype=dtype)
                dy = rnd(1024, a * b * d, dtype=dtype)
                if layout == "bsl":
                    x, dy = x.T.contiguous(), dy.T.contiguous()
                got = {}
                for path in (None, "dense"):
                    force(monkeypatch, **({"path": path} if path else {}))
                    got[path] = (K.ks_matmul(x, w, p, layout=layout),
                                 K.ks_matmul_vjp(dy, x, w, p, layout=layout)[0])
                tol = 1e-5 if dtype == torch.float32 else (2e-3 if dtype == torch.float16 else 1.6e-2)
                for u, v in zip(got[None], got["dense"]):
                    assert rel(v, u.double()) < tol, (dtype, p, layout, rel(v, u.double()))
                assert rel(got["dense"][0], (x.double() @ dense(w, p).T) if layout == "bsf"
                           else dense(w, p) @ x.double()) < tol
