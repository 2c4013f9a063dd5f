"""GPU ks half types and backward: float16 / bfloat16 forward, dx and dw on cuBLAS (batch-last,
batch-first d == 1) and on the transposition path (batch-first d > 1), float32 dw on cuBLAS and
tr with its chunked sums, NaN and stream placement of dw, and the fused backward (dx and dw
together) against the separate ones."""
import pytest

from ks_cuda_common import (needs_gpu, DEV, K, TOL, acts, dense, dw_err, dw_path, dw_tol, force,
                            ks_path, poisoned_pool, refs, rel, rnd, torch)

pytestmark = needs_gpu


# Half types and dw on cuBLAS (options path "blas"): b or c = 1, 2, odd, prime; d = 1, 2, 3, 16.
HALF_DW_PATTERNS = [(1, 1, 1, 1), (2, 1, 5, 3), (3, 7, 1, 2), (2, 2, 2, 16), (1, 13, 17, 1),
                    (2, 40, 33, 2), (3, 5, 7, 3), (1, 48, 48, 16), (4, 6, 130, 1), (1, 96, 64, 1), (5, 2, 3, 1)]


@pytest.mark.parametrize("p", HALF_DW_PATTERNS)
@pytest.mark.parametrize("layout", ["bsf", "bsl"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("path", ["blas", "auto"])
def test_half_types_on_blas(p, layout, dtype, path, monkeypatch):
    """float16 / bfloat16 forward, dx and dw on cuBLAS GemmEx (tensor cores, float32
    accumulation) wherever the strided views apply (batch-last any d, batch-first d == 1), by
    default and forced, against float64: only the rounding of inputs and outputs to the half
    type remains (TOL). Batches with tails of every tile, one chunk and several chunks of the dw
    sum (2051: a 3-row last chunk; 4096: chunks that divide the batch); no output left unwritten."""
    force(monkeypatch, **({"path": "blas"} if path == "blas" else {}))
    name = str(dtype)[6:]
    applies = layout == "bsl" or p[3] == 1
    if path == "blas" and not applies:  # a forced path that applies to no operation of the plan
        with pytest.raises(ValueError, match="path"):
            ks_path(p, 7, layout, name)
        return
    want = "blas" if applies else "kernels"
    assert ks_path(p, 7, layout, name) == (want, want) and dw_path(p, 7, layout, name)[0] == want
    w = rnd(*p, dtype=dtype)
    batches = (1, 7, 301, 2051, 4096) if p[0] * p[2] * p[3] <= 300 else (1, 7, 301, 2051)
    for batch in batches:
        x, dy = acts(p, batch, layout, dtype)
        ry, rdx, rdw = refs(x, w, dy, p, layout)
        poisoned_pool(2 * dy.numel())
        y = K.ks_matmul(x, w, p, layout=layout)
        poisoned_pool(2 * x.numel())
        dx, dw = K.ks_matmul_vjp(dy, x, w, p, layout=layout)
        assert y.dtype == dx.dtype == dw.dtype == dtype
        for got, ref in ((y, ry), (dx, rdx)):
            assert not torch.isnan(got).any() and rel(got, ref) < TOL[dtype], (batch, rel(got, ref))
        assert not torch.isnan(dw).any() and dw_err(dw, rdw) < TOL[dtype], (batch, dw_err(dw, rdw))


F32_DW_PATTERNS = [(1, 1, 1, 1), (2, 1, 5, 3), (3, 7, 1, 2), (2, 2, 2, 16), (1, 13, 17, 1), (3, 5, 7, 3),
                   (1, 48, 48, 16), (2, 40, 33, 2), (4, 6, 130, 1), (6, 64, 64, 1)]


@pytest.mark.parametrize("p", F32_DW_PATTERNS)
@pytest.mark.parametrize("layout", ["bsf", "bsl"])
@pytest.mark.parametrize("loop", [False, True])
def test_float32_dw_on_blas(p, layout, loop, monkeypatch):
    """float32 dw on cuBLAS (default rule: batch-last any d, batch-first d == 1) against
    float64, for batches of one chunk (direct beta = 1 GEMM into dw when d == 1), several chunks
    with a short last one (1029 = 2*512 + 5) and chunks that divide the batch (1536), with the
    GEMMs that one strided call cannot cover as one pointer-array call (default) or a host loop
    (options dw_ptrs=False); the old kernel (path "kernels") agrees."""
    if loop:
        force(monkeypatch, dw_ptrs=False)
    a, b, c, d = p
    applies = layout == "bsl" or d == 1
    for batch in (1, 7, 301, 1029, 1536):
        path, chunk = dw_path(p, batch, layout)
        assert path == ("blas" if applies else "kernels")
        if not applies:
            return
        assert chunk == (batch if batch <= 512 else 512)
        x, dy = acts(p, batch, layout, torch.float32)
        _, _, rdw = refs(x, x.new_zeros(p), dy, p, layout)
        _, dw = K.ks_matmul_vjp(dy, x, rnd(*p), p, layout=layout)
        assert not torch.isnan(dw).any() and dw_err(dw, rdw) < dw_tol(chunk), (batch, dw_err(dw, rdw))
    force(monkeypatch, path="kernels")
    assert dw_path(p, batch, layout) == ("kernels", 0)
    _, dwk = K.ks_matmul_vjp(dy, x, rnd(*p), p, layout=layout)
    assert dw_err(dwk, rdw) < 1e-5 and dw_err(dw, (dwk.double(), rdw[1])) < 1e-5


@pytest.mark.parametrize("p,layout", [((1, 48, 48, 16), "bsl"), ((2, 40, 33, 2), "bsl"),
                                      ((1, 96, 64, 1), "bsf"), ((4, 6, 130, 1), "bsl")])
def test_float32_dw_long_batch(p, layout):
    """The bench's batch (25088 rows summed): within ~1e-6 of float64 (512-row chunks)."""
    path, chunk = dw_path(p, 25088, layout)
    assert path == "blas" and chunk == 512
    x, dy = acts(p, 25088, layout, torch.float32)
    _, _, rdw = refs(x, x.new_zeros(p), dy, p, layout)
    _, dw = K.ks_matmul_vjp(dy, x, rnd(*p), p, layout=layout)
    assert dw_err(dw, rdw) < dw_tol(chunk), dw_err(dw, rdw)


@pytest.mark.parametrize("layout", ["bsf", "bsl"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_blas_dw_nan_and_stream(layout, dtype):
    """A NaN in x reaches exactly dw[i, :, l, j] of its column (every chunk slot is summed, so a
    NaN in a middle chunk of the 1300 rows counts); on a side stream dx and dw equal those of
    the default stream."""
    p = (2, 64, 40, 1) if layout == "bsf" else (2, 64, 40, 3)
    a, b, c, d = p
    assert dw_path(p, 1300, layout, str(dtype)[6:])[0] == "blas"
    w = rnd(*p, dtype=dtype)
    x, dy = acts(p, 1300, layout, dtype)
    i, l, j = 1, 3, d - 1
    f = i * c * d + l * d + j
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        dx1, dw1 = K.ks_matmul_vjp(dy, x, w, p, layout=layout)
    s.synchronize()
    dx0, dw0 = K.ks_matmul_vjp(dy, x, w, p, layout=layout)
    assert torch.equal(dw0, dw1) and torch.equal(dx0, dx1)
    if layout == "bsf":
        x[700, f] = float("nan")
    else:
        x[f, 700] = float("nan")
    _, dw = K.ks_matmul_vjp(dy, x, w, p, layout=layout)
    bad = torch.isnan(dw)
    assert bad[i, :, l, j].all() and bad.sum() == b


# Half types and dw for batch-first d > 1 on the transposition path (options path "tr"): b or c
# = 1, 2, odd, prime; d = 2, 3, 5, 16; segments with and without 16-byte passes.
TRD_PATTERNS = [(1, 1, 1, 2), (2, 2, 2, 2), (3, 5, 7, 3), (2, 17, 19, 5), (1, 48, 48, 16), (1, 1, 7, 3),
                (2, 7, 1, 2), (1, 13, 11, 16), (3, 2, 50, 2), (2, 31, 37, 4), (1, 96, 385, 2), (4, 3, 2, 5)]


@pytest.mark.parametrize("p", TRD_PATTERNS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("path", ["tr", "auto"])
def test_half_tr_path(p, dtype, path, monkeypatch):
    """float16 / bfloat16 batch-first d > 1 on the transposition path (GemmEx, float32
    accumulation; dw on transposed copies of x and dy, chunked float32 sums), forced and by the
    default rule (tr from batch 1024, the FFMA kernels below; the forward at batch 1 on the small
    path), forward, dx and dw against float64
    within the half type's output rounding (TOL); every output written (NaN-poisoned pool)."""
    force(monkeypatch, **({"path": "tr"} if path == "tr" else {}))
    name = str(dtype)[6:]
    w = rnd(*p, dtype=dtype)
    for batch in (1, 7, 301, 2051):
        want = "tr" if path == "tr" or batch >= 1024 else "kernels"
        fwd = "small" if path == "auto" and batch == 1 else want  # halves at batch 1: the small path
        assert ks_path(p, batch, "bsf", name) == (fwd, want), batch
        assert dw_path(p, batch, "bsf", name)[0] == want, batch
        x, dy = acts(p, batch, "bsf", dtype)
        ry, rdx, rdw = refs(x, w, dy, p, "bsf")
        poisoned_pool(2 * dy.numel())
        y = K.ks_matmul(x, w, p)
        poisoned_pool(2 * x.numel())
        dx, dw = K.ks_matmul_vjp(dy, x, w, p)
        assert y.dtype == dx.dtype == dw.dtype == dtype
        for got, ref in ((y, ry), (dx, rdx)):
            assert not torch.isnan(got).any() and rel(got, ref) < TOL[dtype], (batch, rel(got, ref))
        assert not torch.isnan(dw).any() and dw_err(dw, rdw) < TOL[dtype], (batch, dw_err(dw, rdw))


@pytest.mark.parametrize("p", TRD_PATTERNS)
@pytest.mark.parametrize("path", ["tr", "auto"])
def test_float32_dw_tr(p, path, monkeypatch):
    """float32 dw for batch-first d > 1 on transposed copies + chunked cuBLAS (forced, and by
    default from batch 1024), against float64 in the units of the cuBLAS dw tests (dw_err, dw_tol:
    512-row chunks keep ~4e-7); batches of one chunk, several with a short last one (1029,
    2051) and chunks that divide the batch (1536); the old kernel agrees."""
    force(monkeypatch, **({"path": "tr"} if path == "tr" else {}))
    w = rnd(*p)
    for batch in (1, 7, 301, 1029, 1536, 2051):
        want = "tr" if path == "tr" or batch >= 1024 else "kernels"
        got_path, chunk = dw_path(p, batch, "bsf")
        assert got_path == want, batch
        x, dy = acts(p, batch, "bsf", torch.float32)
        _, _, rdw = refs(x, x.new_zeros(p), dy, p, "bsf")
        _, dw = K.ks_matmul_vjp(dy, x, w, p)
        tol = dw_tol(chunk) if want == "tr" else 1e-5
        if want == "tr":
            assert chunk == (batch if batch <= 512 else 512)
        assert not torch.isnan(dw).any() and dw_err(dw, rdw) < tol, (batch, dw_err(dw, rdw))
    force(monkeypatch, path="kernels")
    assert dw_path(p, batch, "bsf") == ("kernels", 0)
    _, dwk = K.ks_matmul_vjp(dy, x, w, p)
    assert dw_err(dwk, rdw) < 1e-5 and dw_err(dw, (dwk.double(), rdw[1])) < 1e-5


def test_float32_dw_tr_long_batch():
    """The bench's batch (25088 rows) at a bench pattern: within ~1e-6 of float64."""
    p = (2, 192, 48, 4)
    path, chunk = dw_path(p, 25088, "bsf")
    assert path == "tr" and chunk == 512
    x, dy = acts(p, 25088, "bsf", torch.float32)
    _, _, rdw = refs(x, x.new_zeros(p), dy, p, "bsf")
    _, dw = K.ks_matmul_vjp(dy, x, rnd(*p), p)
    assert dw_err(dw, rdw) < dw_tol(chunk), dw_err(dw, rdw)


def test_dw_tr_workspace_passes(monkeypatch):
    """Rows of (8192 + 48) floats of x and dy: the 256 MB buffer takes 8144 rows, so batch 8300
    runs dw in two equal passes (4150 rows) that both add into dw; within dw_tol of float64."""
    force(monkeypatch, path="tr")
    p = (1, 3, 512, 16)
    path, chunk = dw_path(p, 8300, "bsf")
    assert path == "tr"
    x, dy = acts(p, 8300, "bsf", torch.float32)
    a, b, c, d = p
    xd, dyd = x.double(), dy.double()
    r = torch.einsum("nikj,nilj->iklj", dyd.reshape(-1, a, b, d), xd.reshape(-1, a, c, d))
    T = torch.einsum("nikj,nilj->iklj", dyd.reshape(-1, a, b, d) ** 2, xd.reshape(-1, a, c, d) ** 2).sqrt()
    del xd, dyd
    poisoned_pool(4 * x.numel())
    _, dw = K.ks_matmul_vjp(dy, x, rnd(*p), p)
    assert not torch.isnan(dw).any() and dw_err(dw, (r, T)) < dw_tol(chunk), dw_err(dw, (r, T))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_tr_halves_and_dw_nan_and_stream(dtype, monkeypatch):
    """tr path, every dtype: a NaN in x reaches exactly the y outputs of its group and row and
    exactly dw[i, :, l, j] (a middle chunk of 1300 rows); dy's NaN exactly dx's group row; on a
    side stream behind a long sleep the input written just before is the one used (forward, dx,
    dw), and results equal those of the default stream."""
    force(monkeypatch, path="tr")
    p = (2, 64, 40, 2)
    a, b, c, d = p
    name = str(dtype)[6:]
    assert ks_path(p, 1300, "bsf", name) == ("tr", "tr") and dw_path(p, 1300, "bsf", name)[0] == "tr"
    w = rnd(*p, dtype=dtype)
    x, dy = acts(p, 1300, "bsf", dtype)
    dx0, dw0 = K.ks_matmul_vjp(dy, x, w, p)
    y0 = K.ks_matmul(x, w, p)
    x1, dy1 = torch.zeros_like(x), torch.zeros_like(dy)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        torch.cuda._sleep(20_000_000)  # ~10 ms of GPU time before x1, dy1 get their values
        x1.copy_(x)
        dy1.copy_(dy)
        y1 = K.ks_matmul(x1, w, p)
        dx1, dw1 = K.ks_matmul_vjp(dy1, x1, w, p)
        y2 = y1.clone()
    s.synchronize()
    assert torch.equal(y0, y1) and torch.equal(y0, y2) and torch.equal(dx0, dx1) and torch.equal(dw0, dw1)
    i, l, j = 1, 3, 1
    xn = x.clone()
    xn[700, i * c * d + l * d + j] = float("nan")
    y = K.ks_matmul(xn, w, p)
    bad = torch.isnan(y)
    cols = torch.tensor([i * b * d + k * d + j for k in range(b)], device=DEV)
    assert bad[700, cols].all() and bad.sum() == b
    _, dw = K.ks_matmul_vjp(dy, xn, w, p)
    bad = torch.isnan(dw)
    assert bad[i, :, l, j].all() and bad.sum() == b
    dyn = dy.clone()
    k = 5
    dyn[11, i * b * d + k * d + j] = float("nan")
    dx, _ = K.ks_matmul_vjp(dyn, x, w, p)
    bad = torch.isnan(dx)
    cols = torch.tensor([i * c * d + ll * d + j for ll in range(c)], device=DEV)
    assert bad[11, cols].all() and bad.sum() == c


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("p", [(2, 17, 19, 5), (1, 48, 48, 16), (3, 2, 50, 2)])
def test_tr_backward_fused_equals_separate(p, dtype):
    """dx and dw together on tr transpose dy once for both (KsPlan::backward); dx alone and dw
    alone (backward_x / backward_w) give the same bits; a chain's backward (two factors, both
    batch-first d > 1 on tr) matches float64."""
    batch = 2051
    name = str(dtype)[6:]
    assert ks_path(p, batch, "bsf", name)[1] == "tr" and dw_path(p, batch, "bsf", name)[0] == "tr"
    w = rnd(*p, dtype=dtype)
    x, dy = acts(p, batch, "bsf", dtype)
    poisoned_pool(x.element_size() * x.numel())
    dx, dw = K._ks_bwd(dy, x, w, p, "bsf")
    dx1 = K._ks_bwd(dy, x, w, p, "bsf", need_dw=False)[0]
    dw1 = K._ks_bwd(dy, x, w, p, "bsf", need_dx=False)[1]
    assert torch.equal(dx, dx1) and torch.equal(dw, dw1)
    _, rdx, rdw = refs(x, w, dy, p, "bsf")
    tol = 1e-6 if dtype == torch.float32 else TOL[dtype]
    assert rel(dx, rdx) < tol and dw_err(dw, rdw) < (dw_tol(512) if dtype == torch.float32 else tol)
    chain = [(1, 4, 6, 2), (2, 3, 2, 2)]  # a*c*d of the first == a*b*d of the second
    ws = [rnd(*q, dtype=dtype) for q in chain]
    xc = rnd(batch, 8, dtype=dtype)
    dyc = rnd(batch, 8, dtype=dtype)
    dxc, dwc = K.ks_chain_vjp(dyc, xc, ws, chain)
    wd = [w_.double().requires_grad_() for w_ in ws]
    xd = xc.double().requires_grad_()
    yd = xd @ (dense(wd[0], chain[0]) @ dense(wd[1], chain[1])).T
    gx, *gw = torch.autograd.grad(yd, [xd] + wd, dyc.double())
    tol = 1e-5 if dtype == torch.float32 else 3 * TOL[dtype]
    assert rel(dxc, gx) < tol and all(rel(g, r) < tol for g, r in zip(dwc, gw))
