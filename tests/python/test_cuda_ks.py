"""GPU Kronecker-sparse products (strux._cuda_ks, strux.torch) against float64
einsum references of the DESIGN.md formula. Skipped without PyTorch, a GPU or the CUDA build."""
import functools
import sys

import pytest

torch = pytest.importorskip("torch")
from strux import _cuda_ks as K  # noqa: E402

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and K.available()),
                                reason="needs a CUDA GPU and strux built with CUDA")
DEV = "cuda"
TOL = {torch.float32: 1e-5, torch.float16: 3e-3, torch.bfloat16: 2e-2}

# Forced kernel choices are options passed to the plans (strux._cuda_options): force() makes the
# test's K calls and path queries pass them.
_PLAIN = {n: getattr(K, n) for n in ("ks_matmul", "ks_matmul_vjp", "ks_chain", "ks_chain_vjp")}
_FORCED: dict = {}


def force(monkeypatch, **options):
    """K.ks_* and ks_path / dw_path with these options (none: the plans' own choice)."""
    monkeypatch.setattr(sys.modules[__name__], "_FORCED", options)
    for name, f in _PLAIN.items():
        monkeypatch.setattr(K, name, functools.partial(f, options=options) if options else f)


def _code():
    return K._O.ks_code(_FORCED or None)


def dense_loop(w, p):
    """The dense K (M, N) of one factor, float64, entry by entry from the index formula."""
    a, b, c, d = p
    Kd = torch.zeros(a * b * d, a * c * d, dtype=torch.float64)
    wc = w.double().cpu()
    for i in range(a):
        for k in range(b):
            for l in range(c):
                for j in range(d):
                    Kd[i * b * d + k * d + j, i * c * d + l * d + j] = wc[i, k, l, j]
    return Kd.to(w.device)


def dense(w, p):
    """The same dense K through I_a ⊗ w ⊗ I_d (vectorised; checked against dense_loop)."""
    return dense_autograd([w.double()], [p])


def test_dense_reference():
    for p in [(2, 3, 4, 2), (1, 2, 5, 3)]:
        w = rnd(*p)
        assert torch.equal(dense(w, p), dense_loop(w, p))


def rel(x, ref, scale=None):
    """|x - ref| / |scale| (default: ref). For products that can cancel (a single output of a few
    terms), pass scale = the same product of absolute values: float32 rounding is relative to
    the terms, not to their sum."""
    s = ref if scale is None else scale
    return ((x.double() - ref).norm() / s.norm().clamp_min(1e-300)).item()


def rnd(*shape, dtype=torch.float32):
    return torch.randn(*shape, device=DEV, dtype=torch.float64).to(dtype)


PATTERNS = [(1, 1, 1, 1), (2, 2, 2, 4), (3, 5, 7, 2), (2, 17, 19, 3), (1, 48, 48, 16), (2, 40, 33, 1),
            (1, 100, 36, 1), (4, 6, 130, 1), (1, 9, 3, 5), (2, 3, 50, 2)]


@pytest.mark.parametrize("p", PATTERNS)
@pytest.mark.parametrize("layout", ["bsf", "bsl"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_forward_and_vjp(p, layout, dtype):
    a, b, c, d = p
    N, M = a * c * d, a * b * d
    for batch in (1, 7, 300):
        x = rnd(batch, N, dtype=dtype) if layout == "bsf" else rnd(N, batch, dtype=dtype)
        w = rnd(*p, dtype=dtype)
        Kd = dense(w, p)
        y = K.ks_matmul(x, w, p, layout=layout)
        assert y.dtype == dtype and y.shape == ((batch, M) if layout == "bsf" else (M, batch))
        ref = x.double() @ Kd.T if layout == "bsf" else Kd @ x.double()
        assert rel(y, ref) < TOL[dtype]
        dy = rnd(*y.shape, dtype=dtype)
        dx, dw = K.ks_matmul_vjp(dy, x, w, p, layout=layout)
        refdx = dy.double() @ Kd if layout == "bsf" else Kd.T @ dy.double()
        assert rel(dx, refdx) < TOL[dtype]
        dyb = dy.double() if layout == "bsf" else dy.double().T
        xb = x.double() if layout == "bsf" else x.double().T
        refdw = torch.einsum("nikj,nilj->iklj", dyb.reshape(-1, a, b, d), xb.reshape(-1, a, c, d))
        assert dw.dtype == dtype and rel(dw, refdw) < 3 * TOL[dtype]


def test_noncontiguous_and_nan():
    p = (2, 17, 19, 3)
    N = 2 * 19 * 3
    big = rnd(40, 2 * N)
    x = big[:, ::2]                                   # strided columns
    w = rnd(*p)
    ref = x.double() @ dense(w, p).T
    assert rel(K.ks_matmul(x, w, p), ref) < 1e-5
    xt = rnd(N, 40).T                                 # a transposed view
    assert rel(K.ks_matmul(xt, w, p), xt.double() @ dense(w, p).T) < 1e-5
    x = rnd(5, N)
    x[2, 4] = float("nan")
    y = K.ks_matmul(x, w, p)
    assert torch.isnan(y[2]).any() and torch.isfinite(y[[0, 1, 3, 4]]).all()


@pytest.mark.parametrize("layout", ["bsf", "bsl"])
def test_chain_and_vjp(layout):
    for ps in ([(2, 3, 4, 3), (4, 3, 5, 2)], [(1, 2, 2, 8), (2, 2, 2, 4), (4, 2, 2, 2), (8, 2, 2, 1)]):
        ws = [rnd(*p) for p in ps]
        Kd = dense(ws[0], ps[0])
        for w, p in zip(ws[1:], ps[1:]):
            Kd = Kd @ dense(w, p)
        N = Kd.shape[1]
        x = rnd(33, N) if layout == "bsf" else rnd(N, 33)
        y = K.ks_chain(x, ws, ps, layout=layout)
        ref = x.double() @ Kd.T if layout == "bsf" else Kd @ x.double()
        assert rel(y, ref) < 1e-5
        dy = rnd(*y.shape)
        dx, dws = K.ks_chain_vjp(dy, x, ws, ps, layout=layout)
        assert rel(dx, dy.double() @ Kd if layout == "bsf" else Kd.T @ dy.double()) < 1e-5
        # dw against autograd of the float64 dense chain
        wd = [w.double().requires_grad_() for w in ws]
        Kt = dense_autograd(wd, ps)
        out = x.double() @ Kt.T if layout == "bsf" else Kt @ x.double()
        g = torch.autograd.grad((out * dy.double()).sum(), wd)
        for q in range(len(ps)):
            assert rel(dws[q], g[q]) < 1e-5


def dense_autograd(wd, ps):
    Kt = None
    for w, p in zip(wd, ps):
        a, b, c, d = p
        eye_a, eye_d = torch.eye(a, dtype=w.dtype, device=w.device), torch.eye(d, dtype=w.dtype, device=w.device)
        D = torch.einsum("iklj,ie,jf->ikjelf", w, eye_a, eye_d).reshape(a * b * d, a * c * d)
        Kt = D if Kt is None else Kt @ D
    return Kt


def test_torch_ops_autograd_and_gradcheck():
    from strux.torch import _ks as T
    p = (2, 3, 5, 2)
    # float64 takes the PyTorch path of the same op: gradcheck checks its backward op.
    x = torch.randn(4, 20, dtype=torch.float64, requires_grad=True)
    w = torch.randn(*p, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w: T.ks_matmul(x, w, p), (x, w))
    xl = torch.randn(20, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w: T.ks_matmul(x, w, p, layout="bsl"), (xl, w))
    ps = [(2, 3, 4, 3), (4, 3, 5, 2)]
    ws = [torch.randn(*q, dtype=torch.float64, requires_grad=True) for q in ps]
    x2 = torch.randn(3, 40, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w1, w2: T.ks_chain(x, [w1, w2], ps), (x2, *ws))
    # float32 on the GPU kernels against the float64 path's gradients.
    xg = [t.detach().cuda().float().requires_grad_() for t in (x2, *ws)]
    y = T.ks_chain(xg[0], xg[1:], ps)
    dy = torch.randn_like(y)
    g32 = torch.autograd.grad(y, xg, dy)
    y64 = T.ks_chain(x2, ws, ps)
    g64 = torch.autograd.grad(y64, [x2, *ws], dy.double().cpu())
    for a32, a64 in zip(g32, g64):
        assert rel(a32.cpu(), a64) < 1e-5


def test_kslinear():
    from strux.torch import _ks as T
    m = T.KSLinear([(2, 3, 4, 3), (4, 3, 5, 2)], bias=True).cuda()
    assert (m.in_features, m.out_features) == (40, 18)
    x = torch.randn(2, 5, 40, device=DEV, requires_grad=True)
    y = m(x)
    assert y.shape == (2, 5, 18)
    Kd = dense_autograd([w.double() for w in m.weights], m.patterns)
    assert rel(y, x.double() @ Kd.T + m.bias.double()) < 1e-5
    y.sum().backward()
    assert all(w.grad is not None and torch.isfinite(w.grad).all() for w in m.weights)
    assert m.bias.grad is not None and x.grad.shape == x.shape


def test_bad_inputs():
    p = (2, 3, 4, 1)
    x, w = rnd(5, 8), rnd(*p)
    with pytest.raises(ValueError, match="'x'"):
        K.ks_matmul(rnd(5, 9), w, p)
    with pytest.raises(ValueError, match="'x'"):
        K.ks_matmul(rnd(5, 8, 1), w, p)
    with pytest.raises(ValueError, match="'w'"):
        K.ks_matmul(x, rnd(2, 3, 4, 2), p)
    with pytest.raises(ValueError, match="'pattern'"):
        K.ks_matmul(x, w, (2, 3, 4))
    with pytest.raises(ValueError, match="'pattern'"):
        K.ks_matmul(x, w, (2, 0, 4, 1))
    with pytest.raises(ValueError, match="'layout'"):
        K.ks_matmul(x, w, p, layout="rows")
    with pytest.raises(TypeError, match="'x'"):
        K.ks_matmul(x.to(torch.int32), w, p)
    with pytest.raises(TypeError, match="'w'"):
        K.ks_matmul(x.double(), w, p)
    with pytest.raises(TypeError, match="'w'"):
        K.ks_matmul(x, w.half(), p)
    with pytest.raises(ValueError, match="'x'"):
        K.ks_matmul(x.cpu(), w, p)
    with pytest.raises(ValueError, match="'x'"):
        K.ks_matmul(rnd(0, 8), w, p)
    with pytest.raises(ValueError, match="'patterns'"):
        K.ks_chain(x, [w, w], [p, p])
    with pytest.raises(ValueError, match="'dy'"):
        K.ks_matmul_vjp(rnd(4, 6), x, w, p)


# Patterns for the float32 tensor-core (3xTF32) kernel: out tiles 32..128 wide with tails
# (b = 130, 70, 33, 5), l tails that divide neither the stage (16) nor a 16-byte quad (c = 37,
# 129, 9), d > 1 (strided columns), and the bench's large patterns at small batch.
TC_PATTERNS = [(1, 130, 70, 1), (2, 64, 64, 3), (3, 33, 37, 2), (1, 200, 129, 1), (2, 5, 9, 1), (2, 40, 36, 1),
               (1, 48, 48, 16), (1, 96, 96, 2), (2, 192, 48, 4), (1, 768, 64, 1), (1, 64, 768, 1),
               (1, 96, 385, 2), (1, 200, 1031, 1)]


def poisoned_pool(nbytes):
    """Leaves a freed NaN-filled block in PyTorch's cache so that the next output allocation of
    that size reuses it: an output element the kernel never writes stays NaN."""
    torch.full((nbytes // 4 + 64,), float("nan"), device=DEV)


@pytest.mark.parametrize("p", TC_PATTERNS)
@pytest.mark.parametrize("layout", ["bsf", "bsl"])
@pytest.mark.parametrize("path", ["tc", "auto"])
def test_float32_tensor_core_accuracy(p, layout, path, monkeypatch):
    """float32 keeps ~1e-6 relative accuracy (3xTF32 split) at every batch tail and alignment.
    The mma accumulates in float32 with truncation, a bias that grows with the sum length K:
    measured ~7e-9 * K on the H200 with one running accumulator (5.4e-6 at K = 768); the kernel
    now sums each k8 step afresh and adds it with rounding, so every K (here up to 1031, forward
    and dx) must stay within 2e-6."""
    if path == "tc":  # the kernels even where the plan's rule picks cuBLAS (batch-last)
        force(monkeypatch, path="kernels")
    a, b, c, d = p
    tol = lambda k: 2e-6  # noqa: E731
    N, M = a * c * d, a * b * d
    w = rnd(*p)
    Kd = dense(w, p)
    for batch in (1, 6, 132, 1029):
        for offset in (0, 1):  # 1: a contiguous view 4 bytes past the allocation (no 16-byte copies)
            n = batch * N
            x = rnd(n + offset)[offset:].view(batch, N) if layout == "bsf" else \
                rnd(n + offset)[offset:].view(N, batch)
            poisoned_pool(4 * batch * M)
            y = K.ks_matmul(x, w, p, layout=layout)
            ref = x.double() @ Kd.T if layout == "bsf" else Kd @ x.double()
            sc = x.double().abs() @ Kd.abs().T if layout == "bsf" else Kd.abs() @ x.double().abs()
            assert not torch.isnan(y).any()
            e = rel(y, ref, sc)
            assert e < tol(c), (batch, offset, e)
            dy = rnd(*y.shape)
            poisoned_pool(4 * batch * N)
            dx, _ = K.ks_matmul_vjp(dy, x, w, p, layout=layout)
            refdx = dy.double() @ Kd if layout == "bsf" else Kd.T @ dy.double()
            scdx = dy.double().abs() @ Kd.abs() if layout == "bsf" else Kd.abs().T @ dy.double().abs()
            assert not torch.isnan(dx).any() and rel(dx, refdx, scdx) < tol(b)


def test_float32_large_values_and_nan():
    """Magnitudes far from 1 keep their relative accuracy (the lo part is relative to each
    value), and a NaN reaches exactly the outputs of its group."""
    p = (2, 64, 40, 2)
    a, b, c, d = p
    w = rnd(*p) * 1e-20
    x = rnd(300, a * c * d) * 1e25
    y = K.ks_matmul(x, w, p)
    assert rel(y, x.double() @ dense(w, p).T) < 2e-6
    x = rnd(300, a * c * d)
    x[7, 1 * c * d + 3 * d + 1] = float("nan")  # group (i=1, j=1)
    y = K.ks_matmul(x, w, p)
    bad = torch.isnan(y)
    cols = torch.tensor([1 * b * d + k * d + 1 for k in range(b)], device=DEV)
    assert bad[7, cols].all() and bad.sum() == b


@pytest.mark.parametrize("p", [(2, 64, 40, 2), (1, 48, 96, 1)])
def test_float32_infinity_stays_infinite(p):
    """An infinite input with finite weights of one sign gives +-inf outputs, never NaN."""
    a, b, c, d = p
    w = torch.rand(*p, device="cuda") + 0.1
    x = torch.rand(5, a * c * d, device="cuda")
    x[2, 0] = float("inf")
    y = K.ks_matmul(x, w, p)
    want = x.double().cpu() @ dense(w, p).T.cpu()
    assert torch.equal(torch.isinf(y).cpu(), torch.isinf(want)) and not torch.isnan(y).any()


def ks_path(p, batch, layout, dtype="float32"):
    """(forward, backward_x) path a plan picks: "blas" (cuBLAS on strided views) or "kernels"."""
    return tuple(K._ext.cuda_ks_path(list(p), batch, layout == "bsl", K._DTYPE_CODE[dtype], _code()))


BLAS_PATTERNS = [(1, 1, 1, 1), (3, 5, 7, 2), (2, 17, 19, 3), (1, 48, 48, 16), (2, 40, 33, 1),
                 (6, 64, 64, 1), (1, 100, 36, 1), (4, 6, 130, 1), (1, 9, 3, 5), (3, 2, 50, 2),
                 (1, 192, 96, 2), (1, 1, 7, 1)]


@pytest.mark.parametrize("p", BLAS_PATTERNS)
@pytest.mark.parametrize("layout", ["bsf", "bsl"])
def test_float32_blas_path(p, layout, monkeypatch):
    """cuBLAS on strided views (options path "blas"): taken for batch-last (any d) and batch-first
    d == 1, float32 accuracy (no TF32) vs float64 for forward and dx, odd batches, no output left
    unwritten; batch-first d > 1 stays on the kernels."""
    force(monkeypatch, path="blas")
    a, b, c, d = p
    N, M = a * c * d, a * b * d
    applies = layout == "bsl" or d == 1
    if not applies:  # a forced path that applies to no operation of the plan
        for dt in ("float32", "float16"):
            with pytest.raises(ValueError, match="path"):
                ks_path(p, 7, layout, dt)
        return
    assert ks_path(p, 7, layout) == ("blas",) * 2
    assert ks_path(p, 7, layout, "float16") == ("blas",) * 2
    w = rnd(*p)
    Kd = dense(w, p)
    for batch in (1, 7, 301):
        x = rnd(batch, N) if layout == "bsf" else rnd(N, batch)
        poisoned_pool(4 * batch * M)
        y = K.ks_matmul(x, w, p, layout=layout)
        ref = x.double() @ Kd.T if layout == "bsf" else Kd @ x.double()
        sc = x.double().abs() @ Kd.abs().T if layout == "bsf" else Kd.abs() @ x.double().abs()
        assert not torch.isnan(y).any() and rel(y, ref, sc) < 1e-6, rel(y, ref, sc)
        dy = rnd(*y.shape)
        poisoned_pool(4 * batch * N)
        dx, dw = K.ks_matmul_vjp(dy, x, w, p, layout=layout)
        refdx = dy.double() @ Kd if layout == "bsf" else Kd.T @ dy.double()
        scdx = dy.double().abs() @ Kd.abs() if layout == "bsf" else Kd.abs().T @ dy.double().abs()
        assert not torch.isnan(dx).any() and rel(dx, refdx, scdx) < 1e-6
    # forcing the kernels gives the same values to float32 accuracy
    force(monkeypatch, path="kernels")
    assert ks_path(p, 7, layout) == ("kernels", "kernels")
    assert rel(K.ks_matmul(x, w, p, layout=layout), y.double()) < 2e-6


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_knob_forces_half_types(dtype, monkeypatch):
    """Forcing the kernels puts half types back on the FFMA kernels (forward, dx and dw), =blas on
    cuBLAS; both give the same product to half accuracy."""
    p = (2, 40, 33, 2)
    x, w = rnd(2 * 33 * 2, 9, dtype=dtype), rnd(*p, dtype=dtype)
    name = str(dtype)[6:]
    for path, want in (("kernels", "kernels"), ("blas", "blas")):
        force(monkeypatch, path=path)
        assert ks_path(p, 9, "bsl", name) == (want, want) and dw_path(p, 9, "bsl", name)[0] == want
        y = K.ks_matmul(x, w, p, layout="bsl")
        assert y.dtype == dtype and rel(y, dense(w, p) @ x.double()) < TOL[dtype]


@pytest.mark.parametrize("layout", ["bsf", "bsl"])
def test_float32_blas_nan_and_stream(layout, monkeypatch):
    """A NaN reaches exactly the outputs of its group and batch column; work goes on the caller's
    stream."""
    force(monkeypatch, path="blas")
    p = (2, 64, 40, 1) if layout == "bsf" else (2, 64, 40, 2)
    a, b, c, d = p
    w = rnd(*p)
    x = rnd(300, a * c * d) if layout == "bsf" else rnd(a * c * d, 300)
    jj = d - 1
    f = 1 * c * d + 3 * d + jj  # group (i=1, j=d-1)
    if layout == "bsf":
        x[7, f] = float("nan")
    else:
        x[f, 7] = float("nan")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = K.ks_matmul(x, w, p, layout=layout)
    s.synchronize()
    yb = y if layout == "bsf" else y.T
    bad = torch.isnan(yb)
    cols = torch.tensor([1 * b * d + k * d + jj for k in range(b)], device=DEV)
    assert bad[7, cols].all() and bad.sum() == b
    x2 = torch.nan_to_num(x)
    y2 = K.ks_matmul(x2, w, p, layout=layout)
    ref = x2.double() @ dense(w, p).T if layout == "bsf" else dense(w, p) @ x2.double()
    assert rel(y2, ref) < 1e-6


# The batch-last streaming kernel (options path "stream"; W of a group held in shared memory):
# b or c of 1, 2, odd, primes, not multiples of the 16 x 8 mma tile, b = c = 128, c large with
# b small, more groups than resident blocks (a block's run of items crosses groups).
STREAM_PATTERNS = [(1, 1, 1, 1), (2, 2, 2, 4), (3, 5, 7, 2), (2, 17, 19, 3), (1, 1, 13, 3),
                   (1, 13, 1, 2), (2, 31, 97, 1), (1, 48, 48, 16), (6, 64, 64, 1), (1, 128, 128, 1),
                   (2, 192, 48, 4), (1, 33, 200, 1), (3, 16, 8, 5), (64, 16, 16, 8), (1, 96, 96, 2)]


def stream_check(p, batch, offset=0, tol=2e-6):
    """Forward and dx of one pattern at one batch (offset 1: x, dy 4 bytes past an allocation,
    so no 16-byte copies) vs float64; no output left unwritten."""
    a, b, c, d = p
    N, M = a * c * d, a * b * d
    w = rnd(*p)
    Kd = dense(w, p)
    x = rnd(N * batch + offset)[offset:].view(N, batch)
    poisoned_pool(4 * batch * M)
    y = K.ks_matmul(x, w, p, layout="bsl")
    ref, sc = Kd @ x.double(), Kd.abs() @ x.double().abs()
    assert not torch.isnan(y).any() and rel(y, ref, sc) < tol, (p, batch, offset, rel(y, ref, sc))
    dy = rnd(M * batch + offset)[offset:].view(M, batch)
    poisoned_pool(4 * batch * N)
    dx, _ = K.ks_matmul_vjp(dy, x, w, p, layout="bsl")
    refdx, scdx = Kd.T @ dy.double(), Kd.abs().T @ dy.double().abs()
    assert not torch.isnan(dx).any() and rel(dx, refdx, scdx) < tol, (p, batch, offset, rel(dx, refdx, scdx))
    return y


@pytest.mark.parametrize("p", STREAM_PATTERNS)
def test_float32_stream_path(p, monkeypatch):
    """Forced streaming path: taken for batch-last float32 (forward and dx), never batch-first or
    half types (they keep their own rule); float32 accuracy vs float64 at batch tails of every
    tile width, aligned or not."""
    force(monkeypatch, path="stream")
    assert ks_path(p, 7, "bsl") == ("stream", "stream")
    with pytest.raises(ValueError, match="path"):  # batch-last only
        ks_path(p, 7, "bsf")
    with pytest.raises(ValueError, match="path"):  # float32 only
        ks_path(p, 7, "bsl", "bfloat16")
    for batch in (1, 7, 32, 301, 300):
        for offset in (0, 1):
            y = stream_check(p, batch, offset)
    # the kernels give the same values to float32 accuracy
    force(monkeypatch, path="kernels")
    x = rnd(p[0] * p[2] * p[3], 300)
    w = rnd(*p)
    y = K.ks_matmul(x, w, p, layout="bsl")
    force(monkeypatch, path="stream")
    assert rel(K.ks_matmul(x, w, p, layout="bsl"), y.double()) < 2e-6


@pytest.mark.parametrize("mt", ["1", "2"])
@pytest.mark.parametrize("tn", ["32", "64", "128"])
@pytest.mark.parametrize("p", [(2, 17, 19, 3), (6, 64, 64, 1), (64, 16, 16, 8), (1, 48, 33, 2)])
def test_float32_stream_tiles(p, tn, mt, monkeypatch):
    """Every batch tile width and warp item height (options stream_tn, stream_mt), at batches that
    divide none of the tiles."""
    force(monkeypatch, path="stream", stream_tn=int(tn), stream_mt=int(mt))
    for batch in (33, 97, 300, 1029):
        stream_check(p, batch)


@pytest.mark.parametrize("batch", [25088, 25091])
def test_float32_stream_large_batch(batch, monkeypatch):
    """The bench shapes at full batch (16-byte copies) and one past it (4-byte copies)."""
    force(monkeypatch, path="stream")
    for p in [(6, 64, 64, 1), (2, 192, 48, 4)]:
        stream_check(p, batch, tol=1e-6)


def test_float32_stream_nan_inf_and_stream(monkeypatch):
    """A NaN reaches exactly the outputs of its group and batch column; an infinite input with
    positive weights gives infinities, never NaN; work goes on the caller's stream."""
    force(monkeypatch, path="stream")
    p = (2, 64, 40, 2)
    a, b, c, d = p
    w = rnd(*p)
    x = rnd(a * c * d, 300)
    f = 1 * c * d + 3 * d + 1  # group (i=1, j=1)
    x[f, 7] = float("nan")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = K.ks_matmul(x, w, p, layout="bsl")
    s.synchronize()
    bad = torch.isnan(y)
    rows = torch.tensor([1 * b * d + k * d + 1 for k in range(b)], device=DEV)
    assert bad[rows, 7].all() and bad.sum() == b
    for w in (torch.rand(*p, device=DEV) + 0.1,  # and weights exact in tf32 (lo part 0)
              torch.randint(1, 8, p, device=DEV).float() / 4):
        x = torch.rand(a * c * d, 301, device=DEV)
        x[0, 2] = float("inf")
        y = K.ks_matmul(x, w, p, layout="bsl")
        want = dense(w, p).cpu() @ x.double().cpu()
        assert torch.equal(torch.isinf(y).cpu(), torch.isinf(want)) and not torch.isnan(y).any()


def test_stream_is_the_default_for_small_batch_last_groups():
    """The plan's rule (ks_plan.cu, pick_path) at the bench shapes."""
    for p in [(6, 64, 64, 1), (16, 64, 64, 1), (1, 48, 48, 16), (4, 64, 64, 4), (4, 96, 96, 2)]:
        assert ks_path(p, 25088, "bsl") == ("stream", "stream")
        # batch-first: d = 1 forward on the kernels, dx on cuBLAS (ks v5d: 0.116 vs 0.138 ms at
        # (16,64,64,1)); d > 1 on the transposition path (ks v5b)
        assert ks_path(p, 25088, "bsf") == (("kernels", "blas") if p[3] == 1 else ("tr",) * 2)
    # dx of (2,192,48,4) is the (2,48,192,4) product: only a 64-column tile fits, the kernels win
    # (ks v5d: 0.120 vs cuBLAS 0.142 ms); dx of the one big group (1,768,768,1) runs cuBLAS
    # (0.629 vs 0.809 ms), its forward the 3xTF32 kernels
    assert ks_path((2, 192, 48, 4), 25088, "bsl") == ("stream", "kernels")
    assert ks_path((1, 768, 768, 1), 25088, "bsl") == ("kernels", "blas")
    assert ks_path((1, 768, 192, 2), 25088, "bsl") == ("blas", "blas")


# ---- ks v5c: half types and dw on cuBLAS -----------------------------------------------------

def dw_path(p, batch, layout, dtype="float32"):
    """backward_w's path and batch chunk: ("blas", rows per GEMM accumulation) or ("kernels", 0)."""
    return tuple(K._ext.cuda_ks_dw_path(list(p), batch, layout == "bsl", K._DTYPE_CODE[dtype], _code()))


def refs(x, w, dy, p, layout):
    """float64 y, dx, dw of the DESIGN.md formula (dense K; dw by einsum over the batch), and the
    scale of dw's rounding errors, T = sqrt(sum over the batch of (dy x)^2) per element: a sum's
    float32 error is relative to T, not to the sum itself, which may cancel (see dw_err)."""
    a, b, c, d = p
    Kd = dense(w, p)
    xd, dyd = x.double(), dy.double()
    if layout == "bsf":
        y, dx, xb, dyb = xd @ Kd.T, dyd @ Kd, xd, dyd
    else:
        y, dx, xb, dyb = Kd @ xd, Kd.T @ dyd, xd.T, dyd.T
    dw = torch.einsum("nikj,nilj->iklj", dyb.reshape(-1, a, b, d), xb.reshape(-1, a, c, d))
    T = torch.einsum("nikj,nilj->iklj", dyb.reshape(-1, a, b, d) ** 2, xb.reshape(-1, a, c, d) ** 2).sqrt()
    return y, dx, (dw, T)


def dw_err(dw, ref):
    """||dw - dw64|| / ||T||: the norm-wise error in units of the sums' rounding scale T (refs);
    equals the relative error for sums without cancellation, stays meaningful for one element
    whose sum cancels (a 7-row single-element dw measured 1.3e-6 'relative' on the H200 with a
    correct float32 sum)."""
    r, T = ref
    return ((dw.double() - r).norm() / T.norm().clamp_min(1e-300)).item()


def acts(p, batch, layout, dtype):
    a, b, c, d = p
    N, M = a * c * d, a * b * d
    if layout == "bsf":
        return rnd(batch, N, dtype=dtype), rnd(batch, M, dtype=dtype)
    return rnd(N, batch, dtype=dtype), rnd(M, batch, dtype=dtype)


# b or c = 1, 2, odd, prime; d = 1, 2, 3, 16.
V5C_PATTERNS = [(1, 1, 1, 1), (2, 1, 5, 3), (3, 7, 1, 2), (2, 2, 2, 16), (1, 13, 17, 1), (2, 40, 33, 2),
                (3, 5, 7, 3), (1, 48, 48, 16), (4, 6, 130, 1), (1, 96, 64, 1), (5, 2, 3, 1)]


@pytest.mark.parametrize("p", V5C_PATTERNS)
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


def dw_tol(chunk):
    """float32 dw vs float64 (dw_err): one sequential float32 accumulation of n products errs by
    ~0.3-0.4 u sqrt(n) T (u = 2^-24; the running sum grows like a random walk), the chunk sums
    add ~u T more; 1.5 u sqrt(chunk) + 2e-7 leaves a factor ~4 over the mean (a float32 simulation
    of these patterns and batches, 20 seeds: at most 0.53 of it, for single elements; many
    elements average out: 0.19). 512-row chunks: 2.2e-6 (measured 4.3e-7 on the H200); one
    25088-row sum would measure ~3e-6 and fail."""
    return 1.5 * 2.0 ** -24 * chunk ** 0.5 + 2e-7


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


@pytest.mark.parametrize("layout", ["bsf", "bsl"])
def test_float64_on_gpu(layout):
    """float64 (cuBLAS DGEMM through einsum): forward, vjp and chains to float64 rounding,
    against the dense matrix built entry by entry, non-contiguous input included."""
    import strux
    for p in [(1, 1, 1, 1), (3, 5, 7, 2), (2, 17, 19, 3), (1, 9, 3, 5)]:
        a, b, c, d = p
        N, M = a * c * d, a * b * d
        for batch in (1, 13):
            x = rnd(batch, 2 * N, dtype=torch.float64)[:, ::2] if layout == "bsf" else rnd(N, batch, dtype=torch.float64)
            w = rnd(*p, dtype=torch.float64)
            Kd = dense_loop(w, p)
            y = strux.ks_matmul(x, w, p, layout=layout)
            ref = x @ Kd.T if layout == "bsf" else Kd @ x
            assert y.dtype == torch.float64 and y.is_cuda and rel(y, ref) < 1e-13
            dy = torch.randn_like(y)
            dx, dw = strux.ks_matmul_vjp(dy, x, w, p, layout=layout)
            xr = x.detach().clone().requires_grad_()
            wr = w.detach().clone().requires_grad_()
            yr = xr @ dense(wr, p).T if layout == "bsf" else dense(wr, p) @ xr
            gx, gw = torch.autograd.grad(yr, [xr, wr], dy)
            assert dx.dtype == dw.dtype == torch.float64
            assert rel(dx, gx) < 1e-13 and rel(dw, gw) < 1e-13
    chain = [(1, 4, 6, 2), (2, 3, 2, 2)]          # a*c*d of the first == a*b*d of the second
    ws = [rnd(*q, dtype=torch.float64) for q in chain]
    Kc = dense_loop(ws[0], chain[0]) @ dense_loop(ws[1], chain[1])
    x = rnd(5, Kc.shape[1], dtype=torch.float64) if layout == "bsf" else rnd(Kc.shape[1], 5, dtype=torch.float64)
    y = strux.ks_chain(x, ws, chain, layout=layout)
    assert rel(y, x @ Kc.T if layout == "bsf" else Kc @ x) < 1e-13


# ks v5b: batch-first d > 1 through in-row transpositions + cuBLAS (options path "tr").
# b or c = 1, 2, odd, primes, d = 2, 3, 5, 16; segment sizes with and without 16-byte passes.
TR_PATTERNS = [(1, 1, 1, 2), (2, 2, 2, 2), (3, 5, 7, 3), (2, 17, 19, 5), (1, 48, 48, 16), (1, 1, 7, 3),
               (2, 7, 1, 2), (1, 13, 11, 16), (3, 2, 50, 2), (1, 192, 96, 2), (2, 31, 37, 4),
               (1, 96, 385, 2), (4, 3, 2, 5)]


@pytest.mark.parametrize("p", TR_PATTERNS)
def test_float32_tr_path(p, monkeypatch):
    """Forced tr path: forward and dx within 1e-6 of float64 at batches 1 / 7 / 301, every output
    written (NaN-poisoned pool), same values as the kernels to float32 accuracy."""
    force(monkeypatch, path="tr")
    a, b, c, d = p
    N, M = a * c * d, a * b * d
    assert ks_path(p, 7, "bsf") == ("tr", "tr")
    with pytest.raises(ValueError, match="path"):  # batch-first only
        ks_path(p, 7, "bsl")
    assert ks_path(p, 7, "bsf", "float16") == ("tr", "tr")  # every dtype since ks v5d
    w = rnd(*p)
    Kd = dense(w, p)
    for batch in (1, 7, 301):
        x = rnd(batch, N)
        poisoned_pool(4 * batch * M)
        y = K.ks_matmul(x, w, p)
        ref = x.double() @ Kd.T
        sc = x.double().abs() @ Kd.abs().T
        assert not torch.isnan(y).any() and rel(y, ref, sc) < 1e-6, (batch, rel(y, ref, sc))
        dy = rnd(batch, M)
        poisoned_pool(4 * batch * N)
        dx, _ = K.ks_matmul_vjp(dy, x, w, p)
        assert not torch.isnan(dx).any() and rel(dx, dy.double() @ Kd, dy.double().abs() @ Kd.abs()) < 1e-6
    force(monkeypatch, path="kernels")
    assert ks_path(p, 7, "bsf") == ("kernels", "kernels")
    assert rel(K.ks_matmul(x, w, p), y.double()) < 2e-6


def test_tr_rule_and_limits(monkeypatch):
    """The default rule takes tr for the bench's batch-first d > 1 patterns at batch 25088, every
    dtype, forward, dx and dw (ks v5d: halves and dw too; not for d == 1 or batch-last), the
    kernels below batch 1024; segments too large for one block's shared memory keep the kernels
    and forcing tr there is a ValueError."""
    for p in [(1, 48, 48, 16), (2, 96, 384, 4), (2, 192, 48, 4), (1, 768, 192, 2), (4, 64, 64, 4),
              (1, 256, 256, 4), (4, 96, 96, 2)]:
        for dt in ("float32", "float16", "bfloat16"):
            assert ks_path(p, 25088, "bsf", dt) == ("tr", "tr"), (p, dt)
            assert dw_path(p, 25088, "bsf", dt)[0] == "tr", (p, dt)
            assert ks_path(p, 1000, "bsf", dt) == ("kernels", "kernels"), (p, dt)
            assert dw_path(p, 1000, "bsf", dt) == ("kernels", 0), (p, dt)
            assert "tr" not in ks_path(p, 25088, "bsl", dt) and dw_path(p, 25088, "bsl", dt)[0] == "blas"
    assert ks_path((1, 768, 768, 1), 25088, "bsf")[0] != "tr"
    force(monkeypatch, path="tr")
    big = (1, 7000, 7, 2)  # y segment 2 x 7000 > 12288 floats padded: no tr forward, dx or dw
    with pytest.raises(ValueError, match="path"):
        ks_path(big, 7, "bsf")
    force(monkeypatch)
    assert ks_path(big, 7, "bsf")[0] == "kernels"
    x, w = rnd(3, 14), rnd(*big)
    assert rel(K.ks_matmul(x, w, big), x.double() @ dense(w, big).T) < 2e-6


def test_float32_tr_workspace_passes(monkeypatch):
    """Rows of 8192 input floats: the 256 MB x' workspace takes 8192 rows, so batch 8300 runs in
    two equal passes (4150 rows), forward and dx; both within 1e-6 of float64."""
    force(monkeypatch, path="tr")
    p = (1, 3, 512, 16)
    a, b, c, d = p
    assert ks_path(p, 8300, "bsf") == ("tr", "tr")
    w = rnd(*p)
    Kd = dense(w, p)
    x = rnd(8300, a * c * d)
    poisoned_pool(4 * 8300 * a * b * d)
    y = K.ks_matmul(x, w, p)
    assert not torch.isnan(y).any() and rel(y, x.double() @ Kd.T) < 1e-6
    dy = rnd(8300, a * b * d)
    poisoned_pool(4 * 8300 * a * c * d)
    dx, _ = K.ks_matmul_vjp(dy, x, w, p)
    assert not torch.isnan(dx).any() and rel(dx, dy.double() @ Kd) < 1e-6


def test_float32_tr_nan_inf_and_stream(monkeypatch):
    """tr path: a NaN reaches exactly the outputs of its group and row; an infinite input with
    positive weights gives inf, never NaN; the call is ordered on the caller's (side) stream:
    an input written just before on that stream behind a long sleep is the one used, and a copy
    of y enqueued right after sees the finished result."""
    force(monkeypatch, path="tr")
    p = (2, 64, 40, 2)
    a, b, c, d = p
    w = rnd(*p)
    x = rnd(300, a * c * d)
    x[7, 1 * c * d + 3 * d + 1] = float("nan")  # group (i=1, j=1)
    y = K.ks_matmul(x, w, p)
    bad = torch.isnan(y)
    cols = torch.tensor([1 * b * d + k * d + 1 for k in range(b)], device=DEV)
    assert bad[7, cols].all() and bad.sum() == b
    wp = torch.rand(*p, device=DEV) + 0.1
    xi = torch.rand(5, a * c * d, device=DEV)
    xi[2, 0] = float("inf")
    yi = K.ks_matmul(xi, wp, p)
    want = xi.double().cpu() @ dense(wp, p).T.cpu()
    assert torch.equal(torch.isinf(yi).cpu(), torch.isinf(want)) and not torch.isnan(yi).any()
    q = (1, 48, 48, 16)
    wq = rnd(*q)
    x0, x1 = rnd(4096, 768), rnd(4096, 768)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        torch.cuda._sleep(20_000_000)  # ~10 ms of GPU time before x0 becomes x1
        x0.copy_(x1)
        y = K.ks_matmul(x0, wq, q)
        y2 = y.clone()
    s.synchronize()
    ref = x1.double() @ dense(wq, q).T
    assert rel(y, ref) < 1e-6 and rel(y2, ref) < 1e-6


# ---- ks v5d: halves and dw for batch-first d > 1 ---------------------------------------------
# b or c = 1, 2, odd, prime; d = 2, 3, 5, 16; segments with and without 16-byte passes.
TRD_PATTERNS = [(1, 1, 1, 2), (2, 2, 2, 2), (3, 5, 7, 3), (2, 17, 19, 5), (1, 48, 48, 16), (1, 1, 7, 3),
                (2, 7, 1, 2), (1, 13, 11, 16), (3, 2, 50, 2), (2, 31, 37, 4), (1, 96, 385, 2), (4, 3, 2, 5)]


@pytest.mark.parametrize("p", TRD_PATTERNS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("path", ["tr", "auto"])
def test_half_tr_path(p, dtype, path, monkeypatch):
    """float16 / bfloat16 batch-first d > 1 on the transposition path (GemmEx, float32
    accumulation; dw on transposed copies of x and dy, chunked float32 sums), forced and by the
    default rule (tr from batch 1024, the FFMA kernels below), forward, dx and dw against float64
    within the half type's output rounding (TOL); every output written (NaN-poisoned pool)."""
    force(monkeypatch, **({"path": "tr"} if path == "tr" else {}))
    name = str(dtype)[6:]
    w = rnd(*p, dtype=dtype)
    for batch in (1, 7, 301, 2051):
        want = "tr" if path == "tr" or batch >= 1024 else "kernels"
        assert ks_path(p, batch, "bsf", name) == (want, want), batch
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
    default from batch 1024), against float64 in the units of the v5c dw tests (dw_err, dw_tol:
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


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_two_streams_from_one_thread(dtype):
    """The cuBLAS paths' buffers (re-laid-out weights, the transposition workspace, dw partial
    sums, cuBLAS's workspace) are one set per host thread: products issued back to back on two
    streams, each with its own weights, must not rewrite them under a running reader."""
    cases = [((2, 96, 384, 4), "bsl"), ((2, 192, 48, 4), "bsf"), ((1, 256, 256, 4), "bsf")]
    batch = 25088
    for p, layout in cases:
        a, b, c, d = p
        shape = (batch, a * c * d) if layout == "bsf" else (a * c * d, batch)
        xs = [rnd(*shape, dtype=dtype) for _ in range(2)]
        ws = [rnd(*p, dtype=dtype) for _ in range(2)]
        dys = [rnd(*((batch, a * b * d) if layout == "bsf" else (a * b * d, batch)), dtype=dtype) for _ in range(2)]
        refs = [K.ks_matmul(x, w, p, layout=layout) for x, w in zip(xs, ws)]
        grefs = [K.ks_matmul_vjp(dy, x, w, p, layout=layout) for dy, x, w in zip(dys, xs, ws)]
        torch.cuda.synchronize()
        streams = [torch.cuda.Stream(), torch.cuda.Stream()]
        for _ in range(3):
            outs, gouts = [None, None], [None, None]
            for q in (0, 1):
                with torch.cuda.stream(streams[q]):
                    outs[q] = K.ks_matmul(xs[q], ws[q], p, layout=layout)
            for q in (0, 1):
                with torch.cuda.stream(streams[q]):
                    gouts[q] = K.ks_matmul_vjp(dys[q], xs[q], ws[q], p, layout=layout)
            torch.cuda.synchronize()
            for q in (0, 1):
                assert rel(outs[q], refs[q].double()) < 1e-6, (p, layout, q)
                assert rel(gouts[q][0], grefs[q][0].double()) < 1e-6, (p, layout, q, "dx")
                assert rel(gouts[q][1], grefs[q][1].double()) < 1e-6, (p, layout, q, "dw")
