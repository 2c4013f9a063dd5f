"""GPU Kronecker-sparse products (strux._cuda_ks, strux.torch) against float64 einsum
references of the DESIGN.md formula: every dtype and layout, chains, the torch ops, bad inputs,
float64 and two streams. The forced paths are in test_cuda_ks_paths.py, the half types and dw on
cuBLAS / tr in test_cuda_ks_backward.py. Skipped without PyTorch, a GPU or the CUDA build."""
import pytest

from ks_cuda_common import (needs_gpu, DEV, K, TOL, dense, dense_autograd, dense_loop, rel, rnd,
                            torch)

pytestmark = needs_gpu


def test_dense_reference():
    for p in [(2, 3, 4, 2), (1, 2, 5, 3)]:
        w = rnd(*p)
        assert torch.equal(dense(w, p), dense_loop(w, p))


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
        # dw sums over the batch: its rounding scales with the sum of |terms|, not with |dw| (which
        # cancels: (1,1,1,1) at batch 300 is one such sum)
        absdw = torch.einsum("nikj,nilj->iklj", dyb.abs().reshape(-1, a, b, d), xb.abs().reshape(-1, a, c, d))
        assert dw.dtype == dtype and (dw.double() - refdw).norm() <= 3 * TOL[dtype] * absdw.norm()


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


@pytest.mark.parametrize("layout", ["bsf", "bsl"])
def test_float64_on_gpu(layout):
    """float64 (the operator layer's direct kernels): forward, vjp and chains to float64 rounding,
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
