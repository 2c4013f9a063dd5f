"""The GPU entries over the operator layer (python/src/bind_cuda_f64.cpp): float64 ks factors and
whole chains, float64 block-circulant scans (direct kernels up to their n, the array library
beyond), and the gradient for the blocks of a block Toeplitz operator on CUDA (strux.BlockToeplitz,
BlockToeplitzCUDA, strux.torch's op) against float64 references. Skipped without a GPU."""
import numpy as np
import pytest

from ks_cuda_common import DEV, dense, dense_autograd, dense_loop, needs_gpu, rnd, torch

import strux
from strux import _cuda_ks as K, _cuda_scan as S, _cuda_toeplitz as T

pytestmark = needs_gpu
F64 = torch.float64


def rel(x, ref):
    return ((x.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-300)).item()


def act(width, batch, layout):
    return rnd(batch, width, dtype=F64) if layout == "bsf" else rnd(width, batch, dtype=F64)


# ---- ks ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["bsf", "bsl"])
@pytest.mark.parametrize("p", [(1, 1, 1, 1), (3, 5, 7, 2), (2, 17, 19, 3), (1, 9, 3, 5), (5, 1, 11, 1), (1, 33, 31, 1)])
@pytest.mark.parametrize("batch", [1, 7, 301])
def test_ks_factor_f64(layout, p, batch):
    """Forward, dx and dw of one factor against the dense K built entry by entry."""
    a, b, c, d = p
    x, w = act(a * c * d, batch, layout), rnd(*p, dtype=F64)
    Kd = dense_loop(w, p)
    y = K.ks_matmul(x, w, p, layout=layout)
    ref = x @ Kd.T if layout == "bsf" else Kd @ x
    assert y.dtype == F64 and y.is_cuda and tuple(y.shape) == tuple(ref.shape) and rel(y, ref) < 1e-13
    dy = torch.randn_like(y)
    dx, dw = K.ks_matmul_vjp(dy, x, w, p, layout=layout)
    xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
    yr = xr @ dense(wr, p).T if layout == "bsf" else dense(wr, p) @ xr
    gx, gw = torch.autograd.grad(yr, [xr, wr], dy)
    assert dx.dtype == dw.dtype == F64 and dx.shape == x.shape and dw.shape == w.shape
    assert rel(dx, gx) < 1e-13 and rel(dw, gw) < 1e-13


@pytest.mark.parametrize("layout", ["bsf", "bsl"])
@pytest.mark.parametrize("chain", [
    [(1, 4, 6, 2), (2, 3, 2, 2)],
    [(3, 2, 5, 1), (1, 5, 3, 3), (3, 3, 7, 1)],            # odd sizes, three factors
    [(1, 7, 7, 1)],                                          # one factor
    [(2, 2, 2, 4), (4, 2, 2, 2), (8, 2, 2, 1), (1, 2, 2, 8)],  # butterfly-like
])
@pytest.mark.parametrize("batch", [1, 13])
def test_ks_chain_f64(layout, chain, batch):
    """The whole chain in one call (forward and vjp with recomputed intermediates) against
    autograd of the dense chain."""
    ws = [rnd(*q, dtype=F64) for q in chain]
    N = chain[-1][0] * chain[-1][2] * chain[-1][3]
    x = act(N, batch, layout)
    wr = [w.clone().requires_grad_() for w in ws]
    xr = x.clone().requires_grad_()
    Kc = dense_autograd(wr, chain)
    yr = xr @ Kc.T if layout == "bsf" else Kc @ xr
    y = K.ks_chain(x, ws, chain, layout=layout)
    assert y.dtype == F64 and tuple(y.shape) == tuple(yr.shape) and rel(y, yr.detach()) < 1e-13
    dy = torch.randn_like(y)
    grads = torch.autograd.grad(yr, [xr] + wr, dy)
    dx, dws = K.ks_chain_vjp(dy, x, ws, chain, layout=layout)
    assert dx.shape == x.shape and rel(dx, grads[0]) < 1e-13
    assert len(dws) == len(ws)
    for g, r, w in zip(dws, grads[1:], ws):
        assert g.dtype == F64 and g.shape == w.shape and rel(g, r) < 1e-13
    # strux.torch's op on the same values (the lean path and the registered op both end here)
    import strux.torch as st
    xt, wt = x.clone().requires_grad_(), [w.clone().requires_grad_() for w in ws]
    yt = st.ks_chain(xt, wt, chain, layout=layout)
    yt.backward(dy)
    assert rel(yt, yr.detach()) < 1e-13 and rel(xt.grad, grads[0]) < 1e-13
    assert all(rel(w.grad, r) < 1e-13 for w, r in zip(wt, grads[1:]))


def test_ks_f64_side_stream_and_options():
    """float64 launches on the caller's current stream; a forced kernel is refused (one kernel)."""
    p = (2, 8, 8, 2)
    x, w = rnd(64, 32, dtype=F64), rnd(*p, dtype=F64)
    ref = x @ dense_loop(w, p).T
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = K.ks_chain(x, [w, w], [p, p])
        y1 = K.ks_matmul(x, w, p)
    torch.cuda.current_stream().wait_stream(s)
    assert rel(y1, ref) < 1e-13
    assert rel(y, x @ (dense_loop(w, p) @ dense_loop(w, p)).T) < 1e-13
    with pytest.raises(ValueError, match="options"):
        K.ks_matmul(x, w, p, options={"path": "blas"})
    with pytest.raises(ValueError, match="options"):
        K.ks_chain_vjp(y, x, [w, w], [p, p], options={"path": "kernels"})


# ---- block-circulant scan ------------------------------------------------------------------------

def _scan_case(B, Tn, p, k, with_h0, seed):
    g = torch.Generator().manual_seed(seed)
    n = p * k
    a = torch.randn(B, Tn, p, p, k, generator=g, dtype=F64) * (0.8 / n)
    u, dh = (torch.randn(B, Tn, n, generator=g, dtype=F64) for _ in range(2))
    h0 = torch.randn(B, n, generator=g, dtype=F64) if with_h0 else None
    dl = torch.randn(B, n, generator=g, dtype=F64)
    return a, u, h0, dh, dl


def _np(x):
    return None if x is None else x.detach().cpu().numpy()


@pytest.mark.parametrize("B,Tn,p,k", [(1, 1, 1, 1), (3, 9, 2, 5), (2, 40, 5, 17), (1, 3, 7, 33)])
@pytest.mark.parametrize("with_h0", [False, True])
@pytest.mark.parametrize("library", [False, True])
def test_block_scan_f64_paths(B, Tn, p, k, with_h0, library, monkeypatch):
    """The direct kernels (n within their limit) and the array-library path (the limit patched to
    0) against the float64 CPU backend, forward and vjp with dh_last."""
    if library:
        monkeypatch.setitem(S._F64_MAX_N, torch.cuda.current_device(), 0)
    a, u, h0, dh, dl = _scan_case(B, Tn, p, k, with_h0, seed=B + Tn + p + k)
    ref_h = strux.block_circulant_scan(_np(a), _np(u), h0=_np(h0))
    ref = strux.block_circulant_scan_vjp(_np(dh), _np(a), _np(u), h0=_np(h0), dh_last=_np(dl))
    g = lambda x: None if x is None else x.to(DEV)  # noqa: E731
    h = S.block_circulant_scan(g(a), g(u), h0=g(h0))
    assert h.dtype == F64 and h.is_cuda and rel(h.cpu(), torch.from_numpy(ref_h)) < 1e-12
    got = S.block_circulant_scan_vjp(g(dh), g(a), g(u), h0=g(h0), dh_last=g(dl))
    for x, r in zip(got, ref):
        if r is None:
            assert x is None
            continue
        assert x.dtype == F64 and tuple(x.shape) == r.shape and rel(x.cpu(), torch.from_numpy(r)) < 1e-12


def test_block_scan_f64_limit():
    """The kernels' limit is the device's opt-in shared memory for two float64 states."""
    dev = torch.cuda.current_device()
    smem = getattr(torch.cuda.get_device_properties(dev), "shared_memory_per_block_optin", None)
    if smem is None:
        pytest.skip("this torch does not report the opt-in shared memory")
    assert S._ext.cuda_block_scan_f64_max_n(dev) == smem // 16


def test_f64_under_cuda_graph():
    """The float64 chain (forward and vjp) and block scan queue only work on the current stream
    (scratch from the array library's allocator): they capture in a CUDA graph and replay on new
    inputs."""
    chain = [(2, 3, 4, 2), (4, 2, 2, 2)]
    ws = [rnd(*q, dtype=F64) for q in chain]
    x, dy = rnd(9, 16, dtype=F64), rnd(9, 12, dtype=F64)
    a, u = (t.to(DEV) for t in _scan_case(2, 6, 2, 3, False, seed=3)[:2])
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up: operators cached, the kernels' limit asked
        K.ks_chain(x, ws, chain)
        K.ks_chain_vjp(dy, x, ws, chain)
        S.block_circulant_scan(a, u)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = K.ks_chain(x, ws, chain)
        dx, dws = K.ks_chain_vjp(dy, x, ws, chain)
        h = S.block_circulant_scan(a, u)
    x.copy_(rnd(9, 16, dtype=F64))
    u.copy_(torch.randn_like(u))
    g.replay()
    torch.cuda.synchronize()
    assert rel(y, K.ks_chain(x, ws, chain)) < 1e-14
    dx_ref, dws_ref = K.ks_chain_vjp(dy, x, ws, chain)
    assert rel(dx, dx_ref) < 1e-14 and all(rel(g_, r) < 1e-14 for g_, r in zip(dws, dws_ref))
    assert rel(h, S.block_circulant_scan(a, u)) < 1e-14


# ---- toeplitz blocks gradient ---------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["time-major", "space-major"])
@pytest.mark.parametrize("R", [None, 1, 3])
@pytest.mark.parametrize("dtype,tol", [(F64, 1e-12), (torch.float32, 2e-5)])
def test_toeplitz_blocks_grad(layout, R, dtype, tol):
    """dblocks (and dm) of CUDA blocks against the CPU vjp, through strux.BlockToeplitz,
    BlockToeplitzCUDA and strux.torch's op (blocks requiring grad)."""
    import strux.torch as st
    Nt, Nd, Nm = 7, 3, 5
    blocks = torch.randn(Nt, Nd, Nm, dtype=F64)
    tail = (R,) if R else ()
    m = torch.randn(*(((Nt, Nm) if layout == "time-major" else (Nm, Nt)) + tail), dtype=F64)
    dd = torch.randn(*(((Nt, Nd) if layout == "time-major" else (Nd, Nt)) + tail), dtype=F64)
    cpu = strux.BlockToeplitz(blocks.numpy(), layout=layout)
    dm_ref, db_ref = (torch.from_numpy(np.asarray(v)) for v in cpu.vjp(m.numpy(), dd.numpy()))
    g = lambda x: x.to(DEV, dtype)  # noqa: E731
    dm, db = strux.BlockToeplitz(g(blocks), layout=layout).vjp(g(m), g(dd))
    assert db.is_cuda and db.dtype == dtype and db.shape == (Nt, Nd, Nm) and dm.shape == m.shape
    assert rel(db.cpu(), db_ref) < tol and rel(dm.cpu(), dm_ref) < tol
    assert rel(T.BlockToeplitzCUDA(g(blocks), layout).grad_blocks(g(m), g(dd)).cpu(), db_ref) < tol
    bt, mt = g(blocks).requires_grad_(), g(m).requires_grad_()
    st.toeplitz_matvec(bt, mt, layout=layout).backward(g(dd))
    assert rel(bt.grad.cpu(), db_ref) < tol and rel(mt.grad.cpu(), dm_ref) < tol
    mod = st.BlockToeplitz(g(blocks), layout=layout)
    mod(g(m)).backward(g(dd))
    assert rel(mod.blocks.grad.cpu(), db_ref) < tol


def test_toeplitz_blocks_gradcheck_and_errors():
    import strux.torch as st
    Nt, Nd, Nm = 5, 2, 3
    b = torch.randn(Nt, Nd, Nm, dtype=F64, device=DEV, requires_grad=True)
    m = torch.randn(Nt, Nm, 2, dtype=F64, device=DEV, requires_grad=True)
    assert torch.autograd.gradcheck(lambda b, m: st.toeplitz_matvec(b, m), (b, m))
    op = T.BlockToeplitzCUDA(b.detach())
    with pytest.raises(ValueError, match="'dd'"):
        op.grad_blocks(m.detach(), torch.randn(Nt, Nd, 3, dtype=F64, device=DEV))
    with pytest.raises(TypeError, match="'m'"):
        op.grad_blocks(m.detach().float(), torch.randn(Nt, Nd, 2, dtype=F64, device=DEV))
