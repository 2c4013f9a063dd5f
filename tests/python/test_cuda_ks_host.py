"""The host path of the GPU ks products (strux._cuda_ks, python/src/bind_cuda_ks.cpp): torch calls
that pass the cheap checks give the same values as the full checks, every check is still
reached, and the strux.torch ks ops (eager fast path and registered ops) work under autograd,
opcheck, torch.compile and CUDA graph capture. Skipped without PyTorch, a GPU or the CUDA
build."""
import pytest

from ks_cuda_common import needs_gpu, K, TOL, rnd, torch
import strux

pytestmark = needs_gpu
# Two calls may differ in dw: it is summed in float32 with atomics (order varies), ~1e-7
# relative; rounding those sums to float16/bfloat16 can then flip single elements by one ulp.
DW_SAME = {torch.float32: 1e-6, torch.float16: 3e-3, torch.bfloat16: 2e-2}


def rel(x, ref):
    return ((x.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-300)).item()


def ref_ks(x, w, p, layout):
    """float64 einsum of the DESIGN formula."""
    a, b, c, d = p
    x, w = x.double(), w.double()
    if layout == "bsl":
        return torch.einsum("iljn,iklj->ikjn", x.reshape(a, c, d, -1), w).reshape(a * b * d, -1)
    return torch.einsum("nilj,iklj->nikj", x.reshape(-1, a, c, d), w).reshape(-1, a * b * d)


def boom(*args, **kwargs):
    raise RuntimeError("boom: the full checks ran")


@pytest.fixture
def no_dlpack(monkeypatch):
    """Makes the full checks (strux._cuda_ks._checked / _chain_args) raise, so a call that
    succeeds took the cheap torch checks and a call that raises 'boom' took the full ones."""
    K.fast_types(torch.empty(0))
    assert K._a.TT, "no torch types for the cheap checks"
    orig = {n: getattr(K, n) for n in ("_checked", "_chain_args")}

    def off(on=False):
        for n, f in orig.items():
            monkeypatch.setattr(K, n, f if on else boom)
    return off


@pytest.mark.parametrize("p", [(1, 1, 1, 1), (3, 5, 7, 2), (6, 64, 64, 1), (2, 17, 19, 3)])
@pytest.mark.parametrize("layout", ["bsf", "bsl"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_lean_matches_checked(p, layout, dtype, no_dlpack):
    a, b, c, d = p
    N = a * c * d
    w = rnd(*p, dtype=dtype)
    for batch in (1, 301):
        x = rnd(batch, N, dtype=dtype) if layout == "bsf" else rnd(N, batch, dtype=dtype)
        no_dlpack(on=True)
        want = K._ks_fwd(x, w, p, layout)          # one checked factor
        dy = rnd(*want.shape, dtype=dtype)
        wdx, wdw = K._ks_bwd(dy, x, w, p, layout)
        no_dlpack()
        for y in (K.ks_matmul(x, w, p, layout=layout), K.ks_matmul(x, w, list(p), layout=layout),
                  strux.ks_matmul(x, w, p, layout=layout)):
            assert y.dtype == dtype and y.shape == want.shape and rel(y, want) < 1e-6
        assert rel(y, ref_ks(x, w, p, layout)) < TOL[dtype]
        dx, dw = K.ks_matmul_vjp(dy, x, w, p, layout=layout)
        assert dx.shape == x.shape and dw.shape == w.shape and dw.dtype == dtype
        assert rel(dx, wdx) < 1e-6 and rel(dw, wdw) < DW_SAME[dtype]
        dx2, dw2 = strux.ks_matmul_vjp(dy, x, w, p, layout=layout)
        assert rel(dx2, wdx) < 1e-6 and rel(dw2, wdw) < DW_SAME[dtype]
        # a NaN reaches exactly the outputs the formula says (those of its group and batch entry)
        xn = x.clone()
        xn.view(-1)[x.numel() // 2] = float("nan")
        yn = K.ks_matmul(xn, w, p, layout=layout)
        assert torch.equal(torch.isnan(yn).cpu(), torch.isnan(ref_ks(xn, w, p, layout)).cpu())
        # non-contiguous inputs take the full checks (which copy them)
        xt = rnd(batch, 2 * N, dtype=dtype)[:, ::2] if layout == "bsf" else rnd(N, 2 * batch, dtype=dtype)[:, ::2]
        if not xt.is_contiguous():
            with pytest.raises(RuntimeError, match="boom"):
                K.ks_matmul(xt, w, p, layout=layout)
        torch.cuda.synchronize()


CHAINS = [[(2, 3, 4, 3)], [(2, 3, 4, 3), (4, 3, 5, 2)], [(1, 4, 6, 2), (2, 3, 2, 2), (4, 2, 3, 1)],
          [(1, 2, 2, 8), (2, 2, 2, 4), (4, 2, 2, 2), (8, 2, 2, 1)]]


def checked_chain(x, ws, ps, layout):
    """The chain and its vjp factor by factor through the checked entries."""
    acts = [x]
    for w, p in zip(reversed(ws), reversed(ps)):
        acts.append(K._ks_fwd(acts[-1], w, p, layout))
    return acts


@pytest.mark.parametrize("ps", CHAINS)
@pytest.mark.parametrize("layout", ["bsf", "bsl"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_lean_chain_matches_checked(ps, layout, dtype, no_dlpack):
    ws = [rnd(*p, dtype=dtype) for p in ps]
    a, _, c, d = ps[-1]
    for batch in (1, 33):
        x = rnd(batch, a * c * d, dtype=dtype) if layout == "bsf" else rnd(a * c * d, batch, dtype=dtype)
        no_dlpack(on=True)
        acts = checked_chain(x, ws, ps, layout)
        dy = rnd(*acts[-1].shape, dtype=dtype)
        g, wdws = dy, []
        for q in range(len(ps)):
            g, dw = K._ks_bwd(g, acts[len(ps) - 1 - q], ws[q], ps[q], layout)
            wdws.append(dw)
        no_dlpack()
        for y in (K.ks_chain(x, ws, ps, layout=layout), strux.ks_chain(x, ws, ps, layout=layout)):
            assert y.shape == acts[-1].shape and rel(y, acts[-1]) < 1e-6
        dx, dws = K.ks_chain_vjp(dy, x, ws, ps, layout=layout)
        assert dx.shape == x.shape and rel(dx, g) < 1e-6
        for q in range(len(ps)):
            assert dws[q].shape == ps[q] and dws[q].dtype == dtype and rel(dws[q], wdws[q]) < DW_SAME[dtype]
        torch.cuda.synchronize()


def test_checks_still_name_the_argument(no_dlpack):
    p = (2, 3, 4, 1)
    x, w = rnd(5, 8), rnd(*p)
    K.ks_matmul(x, w, p)
    np = pytest.importorskip("numpy")
    assert rel(K.ks_matmul(x, w, tuple(np.int64(v) for v in p)), ref_ks(x, w, p, "bsf")) < 1e-5
    with pytest.raises(ValueError, match="'pattern'"):
        K.ks_matmul(x, w, (True, 3, 4, 1))          # bools are not sizes, even equal to 1
    with pytest.raises(ValueError, match="'pattern'"):
        K.ks_matmul(x, w, (2, 3, 4, 0))
    with pytest.raises(ValueError, match="'layout'"):
        K.ks_matmul(x, w, p, layout="BSF")
    with pytest.raises(TypeError, match="'w'"):
        K.ks_matmul(x, w.half(), p)
    with pytest.raises(ValueError, match="'x'"):
        K.ks_matmul(x.cpu(), w, p)
    with pytest.raises(ValueError, match="'w'"):
        K.ks_matmul(x, w.cpu(), p)
    with pytest.raises(ValueError, match="'x'"):
        K.ks_matmul(rnd(0, 8), w, p)
    with pytest.raises(ValueError, match="'x'"):
        K.ks_matmul(rnd(8, 5), w, p)
    with pytest.raises(ValueError, match="'dy'"):
        K.ks_matmul_vjp(rnd(4, 6), x, w, p)
    with pytest.raises(TypeError, match="'dy'"):
        K.ks_matmul_vjp(rnd(5, 6, dtype=torch.bfloat16), x, w, p)
    with pytest.raises(ValueError, match="'patterns'"):
        K.ks_chain(x, [w, w], [p, p])
    with pytest.raises(ValueError, match="'ws'"):
        K.ks_chain(x, [w], [(1, 6, 6, 1), p])


# ---- strux.torch ks ops -----------------------------------------------------------------------

def T():
    from strux.torch import _ks
    return _ks


@pytest.mark.parametrize("layout", ["bsf", "bsl"])
@pytest.mark.parametrize("needs", [(True, True), (True, False), (False, True)])
def test_torch_eager_autograd_matches_registered_op(layout, needs):
    t = T()
    p = (3, 5, 7, 2)
    bl = layout == "bsl"
    x0 = rnd(9, 42) if layout == "bsf" else rnd(42, 9)
    w0 = rnd(*p)
    x, w = x0.clone().requires_grad_(needs[0]), w0.clone().requires_grad_(needs[1])
    y = t.ks_matmul(x, w, p, layout=layout)
    assert "KsMatmulFn" in type(y.grad_fn).__name__   # the eager fast path
    dy = rnd(*y.shape)
    y.backward(dy)
    xo, wo = x0.clone().requires_grad_(needs[0]), w0.clone().requires_grad_(needs[1])
    yo = t._ks_matmul(xo, wo, list(p), bl)             # the registered op and its autograd
    yo.backward(dy)
    assert rel(y, yo) < 1e-6
    for a, b in ((x, xo), (w, wo)):
        assert (a.grad is None) == (b.grad is None)
        if a.grad is not None:
            assert rel(a.grad, b.grad) < 1e-6
    with torch.no_grad():
        assert t.ks_matmul(x, w, p, layout=layout).grad_fn is None


@pytest.mark.parametrize("ps", CHAINS[1:])
@pytest.mark.parametrize("layout", ["bsf", "bsl"])
def test_torch_chain_and_kslinear_grads(ps, layout):
    t = T()
    m = t.KSLinear(ps, bias=True, layout=layout).cuda()
    with torch.no_grad():
        m.bias.normal_()
    x0 = rnd(7, m.in_features) if layout == "bsf" else rnd(m.in_features, 7)
    x = x0.clone().requires_grad_()
    y = m(x)
    dy = rnd(*y.shape)
    y.backward(dy)
    # the same through the registered op (float64 on the PyTorch path: gradcheck covers it)
    ws = [w.detach().double().requires_grad_() for w in m.weights]
    xd = x0.double().requires_grad_()
    b = m.bias.detach().double().requires_grad_()
    yd = t._ks_chain(xd, ws, [v for p in ps for v in p], layout == "bsl")
    yd = yd + (b[:, None] if layout == "bsl" else b)
    yd.backward(dy.double())
    assert rel(y, yd) < 1e-5 and rel(x.grad, xd.grad) < 1e-5 and rel(m.bias.grad, b.grad) < 1e-5
    for w, wd in zip(m.weights, ws):
        assert rel(w.grad, wd.grad) < 1e-5
    # 3-D input, bsf; and an input that needs no gradient (dx skipped)
    if layout == "bsf":
        x3 = rnd(2, 3, m.in_features)
        y3 = m(x3)
        assert y3.shape == (2, 3, m.out_features)
        assert rel(y3, m(x3.reshape(6, -1)).reshape(2, 3, -1)) < 1e-6
        y3.sum().backward()


def test_torch_ops_opcheck():
    T()  # registers torch.ops.strux.ks_*
    p = [2, 3, 5, 2]
    x, w = rnd(4, 20).requires_grad_(), rnd(*p).requires_grad_()
    torch.library.opcheck(torch.ops.strux.ks_matmul.default, (x, w, p, False))
    torch.library.opcheck(torch.ops.strux.ks_matmul.default, (rnd(20, 3), rnd(*p), p, True))
    torch.library.opcheck(torch.ops.strux.ks_matmul_backward.default, (rnd(4, 12), rnd(4, 20), rnd(*p), p, False))
    ps = [2, 3, 4, 3, 4, 3, 5, 2]
    ws = [rnd(2, 3, 4, 3).requires_grad_(), rnd(4, 3, 5, 2).requires_grad_()]
    torch.library.opcheck(torch.ops.strux.ks_chain.default, (rnd(3, 40).requires_grad_(), ws, ps, False))
    torch.library.opcheck(torch.ops.strux.ks_chain_backward.default,
                          (rnd(3, 18), rnd(3, 40), [w.detach() for w in ws], ps, False))


def test_torch_compile_ks():
    t = T()
    p, ps = (4, 5, 3, 2), [(2, 3, 4, 3), (4, 3, 5, 2)]   # p: 24 -> 40 features, the chain: 40 -> 18

    def f(x, w, w1, w2):
        return torch.tanh(t.ks_chain(t.ks_matmul(x, w, p) * 2, [w1, w2], ps))

    args = [rnd(6, 24), rnd(*p), rnd(*ps[0]), rnd(*ps[1])]
    a1 = [v.clone().requires_grad_() for v in args]
    a2 = [v.clone().requires_grad_() for v in args]
    y1 = torch.compile(f, fullgraph=True)(*a1)
    y2 = f(*a2)
    assert rel(y1, y2) < 1e-6
    dy = rnd(*y1.shape)
    y1.backward(dy)
    y2.backward(dy)
    for u, v in zip(a1, a2):
        assert rel(u.grad, v.grad) < 1e-6


def test_cuda_graph_kslinear_training_step():
    """Forward and backward of KSLinear captured in one CUDA graph (the eager fast path with
    autograd), replayed on new data, against the same step run eagerly."""
    t = T()
    m = t.KSLinear([(2, 3, 4, 3), (4, 3, 5, 2)], bias=True).cuda()
    x = rnd(16, 40)
    dy = rnd(16, 18)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):  # plans and cuBLAS resources exist before capture
            m.zero_grad(set_to_none=True)
            m(x).backward(dy)
    torch.cuda.current_stream().wait_stream(s)
    m.zero_grad(set_to_none=True)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = m(x)
        y.backward(dy)
    x.copy_(rnd(16, 40))
    dy.copy_(rnd(16, 18))
    g.replay()
    torch.cuda.synchronize()
    got = [y.clone()] + [w.grad.clone() for w in m.weights] + [m.bias.grad.clone()]
    m.zero_grad(set_to_none=True)
    ye = m(x)
    ye.backward(dy)
    want = [ye] + [w.grad for w in m.weights] + [m.bias.grad]
    for a, b in zip(got, want):
        assert rel(a, b) < 1e-6
    # a no-grad product captured alone
    w, p = rnd(6, 64, 64, 1), (6, 64, 64, 1)
    xb = rnd(384, 100)
    with torch.no_grad():
        t.ks_matmul(xb, w, p, layout="bsl")
        g2 = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g2):
            yb = t.ks_matmul(xb, w, p, layout="bsl")
    xb.copy_(rnd(384, 100))
    g2.replay()
    torch.cuda.synchronize()
    assert rel(yb, ref_ks(xb, w, p, "bsl")) < 1e-5
