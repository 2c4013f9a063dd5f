"""strux.torch on CUDA tensors after the routing change: every op on the GPU against the same op
on CPU tensors (strux's CPU backend), forward and gradients; float64 gradcheck and opcheck on the
GPU; the modules (FFTConv with a float32 filter and half inputs, KSLinear with weights= and
order=, BlockToeplitz) on the GPU. Skipped without a GPU."""
import pytest

from cuda_common import needs_gpu, rel, torch

import strux.torch as st  # noqa: E402

pytestmark = needs_gpu
ops = torch.ops.strux
DEV = "cuda"
F64 = torch.float64


def rnd(*shape, dtype=F64, scale=1.0):
    return (scale * torch.randn(*shape, dtype=F64)).to(dtype)


def both(f, args, dtype, tol):
    """f on CUDA copies (in dtype) against f on float64 CPU copies: outputs and gradients (real
    floating args)."""
    cpu = [a.detach().double().requires_grad_() for a in args]
    gpu = [a.detach().to(device=DEV, dtype=dtype).requires_grad_() for a in args]
    yc, yg = f(*cpu), f(*gpu)
    assert yg.is_cuda and rel(yg, yc) < tol
    dy = torch.randn(yc.shape, dtype=yc.dtype)
    gc = torch.autograd.grad(yc, cpu, dy)
    gg = torch.autograd.grad(yg, gpu, dy.to(DEV, yg.dtype))
    for a, b in zip(gg, gc):
        assert a.is_cuda and rel(a, b) < tol


TOLS = [(torch.float32, 2e-5), (F64, 1e-12)]


@pytest.mark.parametrize("dtype,tol", TOLS)
@pytest.mark.parametrize("layout", ["bsf", "bsl"])
def test_ks_gpu_matches_cpu(dtype, tol, layout):
    p, ps = (2, 3, 5, 2), [(2, 3, 4, 3), (4, 3, 5, 2)]
    x = rnd(4, 20) if layout == "bsf" else rnd(20, 4)
    both(lambda x, w: st.ks_matmul(x, w, p, layout=layout), [x, rnd(*p)], dtype, tol)
    x2 = rnd(3, 40) if layout == "bsf" else rnd(40, 3)
    both(lambda x, w1, w2: st.ks_chain(x, [w1, w2], ps, layout=layout), [x2, rnd(*ps[0]), rnd(*ps[1])], dtype, tol)
    # the registered ops (not the eager fast path)
    both(lambda x, w: ops.ks_matmul(x, w, list(p), layout == "bsl"), [x, rnd(*p)], dtype, tol)


@pytest.mark.parametrize("dtype,tol", TOLS)
def test_scans_gpu_match_cpu(dtype, tol):
    a, b, h0 = rnd(2, 6, 3, scale=0.5), rnd(2, 6, 3), rnd(2, 3)
    both(lambda a, b, h0: ops.diag_scan(a, b, h0), [a, b, h0], dtype, tol)      # the op, not the fast path
    both(lambda a, b: st.diag_scan(a, b), [a, b], dtype, tol)
    ca, cu, ch0 = rnd(2, 5, 6, scale=0.3), rnd(2, 5, 6), rnd(2, 6)
    both(lambda a, u, h0: st.circulant_scan(a, u, h0), [ca, cu, ch0], dtype, tol)
    ba, bu = rnd(1, 4, 2, 2, 3, scale=0.2), rnd(1, 4, 6)
    both(lambda a, u: st.block_circulant_scan(a, u), [ba, bu], dtype, tol)


def test_diag_scan_complex_gpu_matches_cpu():
    a = rnd(2, 6, 3, dtype=torch.complex128, scale=0.5)
    b = rnd(2, 6, 3, dtype=torch.complex128)
    for dt, tol in ((torch.complex64, 2e-5), (torch.complex128, 1e-12)):
        ag, bg = a.to(DEV, dt).requires_grad_(), b.to(DEV, dt).requires_grad_()
        ac, bc = a.clone().requires_grad_(), b.clone().requires_grad_()
        yg, yc = ops.diag_scan(ag, bg, None), ops.diag_scan(ac, bc, None)
        assert rel(yg.cpu().to(torch.complex128), yc) < tol
        dy = torch.randn_like(yc)
        gg = torch.autograd.grad(yg, [ag, bg], dy.to(DEV, dt))
        gc = torch.autograd.grad(yc, [ac, bc], dy)
        for x, y in zip(gg, gc):
            assert rel(x.cpu().to(torch.complex128), y) < tol


def test_circulant_scan_fourier_and_half_on_gpu():
    n = 8
    u = rnd(2, 5, n)
    a = rnd(2, 5, n, scale=0.3)
    ahat = torch.fft.rfft(a, dim=-1)
    want = st.circulant_scan(a, u)
    got = st.circulant_scan(ahat.to(DEV, torch.complex64), u.to(DEV, torch.float32), fourier=True)
    assert rel(got, want) < 2e-5
    h16 = st.circulant_scan(a.to(DEV, torch.bfloat16), u.to(DEV, torch.bfloat16))
    assert h16.dtype == torch.bfloat16 and rel(h16, st.circulant_scan(a.bfloat16().double(), u.bfloat16().double())) < 3e-2


@pytest.mark.parametrize("mode", ["causal", "circular"])
def test_fftconv_gpu_matches_cpu(mode):
    args = [rnd(2, 3, 16), rnd(3, 5), rnd(2, 3, 16), rnd(2, 3, 16), rnd(3)]
    both(lambda u, k, pre, post, s: ops.fftconv(u, k, mode, pre, post, s), args, torch.float32, 2e-5)


@pytest.mark.parametrize("layout", ["time-major", "space-major"])
def test_block_toeplitz_gpu(layout):
    Nt, Nd, Nm, R = 6, 3, 4, 2
    blocks = rnd(Nt, Nd, Nm)
    m = rnd(Nt, Nm, R) if layout == "time-major" else rnd(Nm, Nt, R)
    mc, mg = m.clone().requires_grad_(), m.to(DEV).requires_grad_()
    dc = st.toeplitz_matvec(blocks, mc, layout=layout)
    dg = st.toeplitz_matvec(blocks.to(DEV), mg, layout=layout)      # blocks need no gradient
    assert rel(dg, dc) < 1e-12
    dd = torch.randn_like(dc)
    dc.backward(dd)
    dg.backward(dd.to(DEV))
    assert rel(mg.grad, mc.grad) < 1e-12
    op = st.BlockToeplitz(blocks.to(DEV), layout=layout)
    mc = m.clone().requires_grad_()
    mod_c = st.BlockToeplitz(blocks, layout=layout)
    mod_c(mc).backward(dd)
    op(m.to(DEV)).backward(dd.to(DEV))                                 # the blocks gradient on CUDA
    assert op.blocks.grad.is_cuda and rel(op.blocks.grad, mod_c.blocks.grad) < 1e-12
    assert torch.autograd.gradcheck(lambda x: st.toeplitz_matvec(blocks.to(DEV), x, layout=layout),
                                    (m.to(DEV).requires_grad_(),))


def test_gradcheck_float64_on_gpu():
    p = (2, 3, 5, 2)
    gc = torch.autograd.gradcheck
    x, w = rnd(4, 20).to(DEV).requires_grad_(), rnd(*p).to(DEV).requires_grad_()
    assert gc(lambda x, w: ops.ks_matmul(x, w, list(p), False), (x, w))
    a, b = rnd(2, 5, 3, scale=0.5).to(DEV).requires_grad_(), rnd(2, 5, 3).to(DEV).requires_grad_()
    assert gc(lambda a, b: ops.diag_scan(a, b, None), (a, b))
    ca, cu = rnd(2, 4, 6, scale=0.3).to(DEV).requires_grad_(), rnd(2, 4, 6).to(DEV).requires_grad_()
    assert gc(lambda a, u: st.circulant_scan(a, u), (ca, cu))
    ba, bu = rnd(1, 3, 2, 2, 3, scale=0.2).to(DEV).requires_grad_(), rnd(1, 3, 6).to(DEV).requires_grad_()
    assert gc(lambda a, u: st.block_circulant_scan(a, u), (ba, bu))


def test_opcheck_new_ops_on_gpu():
    g = lambda t: t.to(DEV).requires_grad_()  # noqa: E731
    ca, cu = g(rnd(2, 4, 6, scale=0.3)), g(rnd(2, 4, 6))
    torch.library.opcheck(ops.circulant_scan.default, (ca, cu, None, False))
    torch.library.opcheck(ops.circulant_scan_backward.default,
                          (rnd(2, 4, 6).to(DEV), ca.detach(), cu.detach(), None, False))
    blocks, m = rnd(5, 3, 2).to(DEV), g(rnd(5, 2))
    torch.library.opcheck(ops.block_toeplitz_matvec.default, (blocks, m, "time-major"))
    torch.library.opcheck(ops.block_toeplitz_matvec_backward.default,
                          (rnd(5, 3).to(DEV), blocks, m.detach(), "time-major", False))
    a, b = g(rnd(2, 5, 3, scale=0.5).float()), g(rnd(2, 5, 3).float())
    h = ops.diag_scan(a.detach(), b.detach(), None)
    torch.library.opcheck(ops.diag_scan.default, (a, b, None))
    torch.library.opcheck(ops.diag_scan_backward.default, (torch.randn_like(h), a.detach(), b.detach(), h, None))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_fftconv_module_float32_filter_on_gpu(dtype):
    B, H, L = 2, 4, 256
    conv = st.FFTConv(L, dtype=dtype)
    u = torch.randn(B, H, L, device=DEV).to(dtype).requires_grad_()
    k = (torch.randn(H, L, device=DEV) / L).requires_grad_()
    y = conv(u, k)
    assert y.dtype == dtype and y.is_cuda
    want = ops.fftconv(u.detach().double().cpu(), k.detach().double().cpu(), "causal", None, None, None)
    assert rel(y, want) < (1e-2 if dtype == torch.float16 else 2e-2)
    y.float().sum().backward()
    assert u.grad.dtype == dtype and k.grad.dtype == torch.float32 and torch.isfinite(k.grad).all()


def test_kslinear_weights_and_order_on_gpu():
    ps = [(2, 3, 4, 3), (4, 3, 5, 2)]
    ws = [torch.randn(*p, device=DEV) for p in ps]
    m = st.KSLinear(ps, weights=ws, bias=False)
    mk = st.KSLinear(ps[::-1], weights=ws[::-1], order="ksmm", bias=False)
    x = torch.randn(2, 3, 40, device=DEV)
    ref = st.KSLinear(ps, weights=[w.cpu().double() for w in ws], bias=False)
    assert rel(m(x), ref(x.cpu().double())) < 2e-5 and rel(mk(x), m(x)) < 1e-6
