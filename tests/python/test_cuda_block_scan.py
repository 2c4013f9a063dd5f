"""GPU block_circulant_scan forward and backward (strux._cuda_scan, the strux.scan dispatch of
CUDA arrays, the strux.torch op) against strux's float64 CPU backend. Skipped without PyTorch,
a GPU or the CUDA build."""
import functools

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import strux  # noqa: E402
from strux import _cuda_scan as K  # noqa: E402

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and K.available()),
                                reason="needs a CUDA GPU and strux built with CUDA")
DEV = "cuda"
# Forced kernels (options passed to the plan): "" = the plan's choice; "generic" = the any-p
# shared-memory kernels; "seq" = the chunked kernels (registers for p <= 4, groups of p lanes for
# p = 8, 16) in one chunk; a number = chunks of that many steps.
PATHS = ["", "generic", "seq", "3"]
_PLAIN = {n: getattr(K, n) for n in ("block_circulant_scan", "block_circulant_scan_vjp")}


def options_of(path):
    if path == "":
        return None
    if path.isdigit():
        return {"chunk": int(path)}
    return {"path": "registers" if path == "seq" else path}


CHUNKED_P = (1, 2, 3, 4, 8, 16)  # the p of the chunked kernels


def registers(path):
    """Whether a forced path needs the chunked kernels (p <= 4, 8, 16)."""
    return path not in ("", "generic")


@pytest.fixture
def use_path(monkeypatch):
    """Sets the options the K calls (and strux's dispatch to them) pass to the plans."""
    def set_path(path):
        opts = options_of(path)
        for name, f in _PLAIN.items():
            monkeypatch.setattr(K, name, functools.partial(f, options=opts) if opts else f)
    return set_path


def _np(x):
    return None if x is None else x.detach().cpu().double().numpy()


def _rel(x, ref):
    x = x.detach().cpu().double().numpy()
    nr = np.linalg.norm(ref)
    return float(np.linalg.norm(x - ref) / nr) if nr > 0 else float(np.linalg.norm(x))


def make(B, T, p, k, with_h0, seed, dtype=torch.float32):
    """a with spectral radius < 1 (entries ~ 0.8 / (p k)), u, h0, dh, dh_last; rounded to dtype."""
    g = torch.Generator().manual_seed(seed)
    n = p * k
    a = torch.randn(B, T, p, p, k, generator=g, dtype=torch.float64) * (0.8 / n)
    u, dh = (torch.randn(B, T, n, generator=g, dtype=torch.float64) for _ in range(2))
    h0, dl = (torch.randn(B, n, generator=g, dtype=torch.float64) for _ in range(2))
    cast = lambda x: x.to(DEV, dtype)
    return cast(a), cast(u), (cast(h0) if with_h0 else None), cast(dh), cast(dl)


def check_vjp(a, u, h0, dh, dl, tol, paths, use_path):
    """Forward and vjp for each forced path against the float64 CPU backend on the same values."""
    ref_h = strux.block_circulant_scan(_np(a), _np(u), h0=_np(h0))
    ref = strux.block_circulant_scan_vjp(_np(dh), _np(a), _np(u), h0=_np(h0), dh_last=_np(dl))
    for path in paths:
        use_path(path)
        if registers(path) and a.shape[2] not in CHUNKED_P and u.dtype != torch.float64:
            with pytest.raises(ValueError, match="register"):  # the chunked kernels need p <= 4, 8, 16
                strux.block_circulant_scan(a, u, h0=h0)
            continue
        h = strux.block_circulant_scan(a, u, h0=h0)
        assert h.is_cuda and h.dtype == u.dtype and _rel(h, ref_h) < tol, (path, _rel(h, ref_h))
        got = strux.block_circulant_scan_vjp(dh, a, u, h0=h0, dh_last=dl)  # CUDA arrays: the GPU
        for name, x, r, like in zip(("da", "du", "dh0"), got, ref, (a, u, h0)):
            if like is None:
                assert x is None and r is None
                continue
            assert x.is_cuda and x.dtype == like.dtype and tuple(x.shape) == r.shape, (path, name)
            assert _rel(x, r) < tol, (path, name, _rel(x, r))


@pytest.mark.parametrize("p", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("k", [1, 2, 5, 8, 17, 33])
@pytest.mark.parametrize("T", [1, 2, 17])
@pytest.mark.parametrize("with_h0", [False, True])
def test_vjp_vs_cpu_float64(p, k, T, with_h0, use_path):
    B = 1 + (p + k + T) % 3  # 1..3
    a, u, h0, dh, dl = make(B, T, p, k, with_h0, seed=p * 1000 + k * 10 + T)
    if (p + T) % 2 == 0:
        dl = None
    check_vjp(a, u, h0, dh, dl, 2e-5, PATHS, use_path)


@pytest.mark.parametrize("p", [8, 16])
@pytest.mark.parametrize("k", [1, 2, 5, 16])
@pytest.mark.parametrize("T", [1, 17])
@pytest.mark.parametrize("with_h0", [False, True])
def test_group_kernels_vs_cpu_float64(p, k, T, with_h0, use_path):
    """p = 8, 16: the group kernels (p lanes per chain), in one chunk and in chunks of 3 and 5
    steps (partial last chunks), and the generic kernels."""
    B = 1 + (p + k + T) % 3
    a, u, h0, dh, dl = make(B, T, p, k, with_h0, seed=p * 1000 + k * 10 + T)
    if (k + T) % 2 == 0:
        dl = None
    check_vjp(a, u, h0, dh, dl, 2e-5, PATHS + ["5"], use_path)


@pytest.mark.parametrize("B,T,p,k", [(2, 300, 4, 16), (1, 1000, 2, 7), (3, 257, 3, 33), (1, 130, 1, 2),
                                     (2, 300, 8, 8), (1, 257, 16, 4), (3, 129, 8, 1)])
def test_long_sequences_chunked(B, T, p, k, use_path):
    """Long T: the plan's own choice (chunked here: B * kf is small), chunks of 7 and 64 steps
    (partial last chunks), and both unchunked kernels."""
    regs, L = K.block_circulant_scan_path(B, T, p, k)
    assert regs and L < T
    a, u, h0, dh, dl = make(B, T, p, k, True, seed=T)
    check_vjp(a, u, h0, dh, dl, 1e-4, ["", "generic", "seq", "7", "64"], use_path)
    check_vjp(a, u, None, dh, None, 1e-4, ["", "7"], use_path)


def test_plan_choice():
    assert K.block_circulant_scan_path(8, 1024, 4, 64)[1] < 1024   # 264 (batch, frequency) threads
    assert K.block_circulant_scan_path(8, 1024, 5, 64) == (False, 1024)  # p 5..7, 9..15, > 16: generic kernels
    assert K.block_circulant_scan_path(16, 2048, 8, 32)[1] < 2048  # group kernels, 272 chains
    assert K.block_circulant_scan_path(16, 2048, 16, 16)[1] < 2048
    assert K.block_circulant_scan_path(2, 17, 16, 8, options={"path": "registers"}) == (True, 17)
    assert "group kernels" in K.block_circulant_scan_describe(16, 2048, 8, 32)
    assert "register kernels" in K.block_circulant_scan_describe(16, 2048, 4, 64)
    assert K.block_circulant_scan_path(4096, 64, 4, 128)[1] == 64   # the sequence fills the GPU
    assert K.block_circulant_scan_path(2, 17, 3, 8, options={"chunk": 5}) == (True, 5)
    assert K.block_circulant_scan_path(2, 17, 3, 8, options={"path": "registers"}) == (True, 17)
    assert K.block_circulant_scan_path(2, 17, 3, 8, options={"path": "generic"}) == (False, 17)
    assert "generic" in K.block_circulant_scan_describe(2, 17, 3, 8, options={"path": "generic"})
    with pytest.raises(ValueError, match="path"):
        K.block_circulant_scan_path(2, 17, 3, 9, options={"path": "bogus"})
    with pytest.raises(ValueError, match="register"):
        K.block_circulant_scan_path(2, 17, 5, 9, options={"chunk": 3})


@pytest.mark.parametrize("dtype,tol", [(torch.float16, 5e-3), (torch.bfloat16, 3e-2)])
@pytest.mark.parametrize("p,k,T", [(2, 8, 17), (4, 33, 40), (3, 1, 5)])
def test_half_types(dtype, tol, p, k, T, use_path):
    a, u, h0, dh, dl = make(2, T, p, k, True, seed=7, dtype=dtype)
    check_vjp(a, u, h0, dh, dl, tol, ["", "generic", "3"], use_path)


@pytest.mark.parametrize("path", ["", "generic", "3"])
@pytest.mark.parametrize("p,k,T", [(1, 5, 17), (2, 8, 40), (4, 6, 33)])
def test_dot_identities(path, p, k, T, use_path):
    """Adjoint identities in float32 on the GPU: h is linear in (u, h0), so
    <dh, h> + <dl, h_{T-1}> = <du, u> + <dh0, h0> exactly; along a direction v of a the central
    difference of <dh, h> + <dl, h_{T-1}> matches <da, v>."""
    use_path(path)
    a, u, h0, dh, dl = make(2, T, p, k, True, seed=11)
    dot = lambda x, y: float((x.double() * y.double()).sum())
    loss = lambda a_: (lambda h: dot(dh, h) + dot(dl, h[:, -1]))(K.block_circulant_scan(a_, u, h0=h0))
    da, du, dh0 = K.block_circulant_scan_vjp(dh, a, u, h0=h0, dh_last=dl)
    h = K.block_circulant_scan(a, u, h0=h0)
    scale = dot(dh.abs(), h.abs()) + dot(dl.abs(), h[:, -1].abs())  # the sum's size without cancellation
    lhs, rhs = loss(a), dot(du, u) + dot(dh0, h0)
    assert abs(lhs - rhs) <= 1e-5 * scale, (lhs, rhs, scale)
    v = torch.randn(a.shape, generator=torch.Generator().manual_seed(3)).to(DEV) * (0.8 / (p * k))
    eps = 1e-2
    fd = (loss(a + eps * v) - loss(a - eps * v)) / (2 * eps)
    assert abs(fd - dot(da, v)) <= 2e-3 * max(abs(fd), 1.0), (fd, dot(da, v))


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("with_h0", [False, True])
def test_nan_propagation(path, with_h0, use_path):
    """A NaN reaches exactly the outputs that depend on it (batch 1 and unrelated steps stay
    finite): in dh[0, 5] -> du, da of batch 0 at steps <= 5; in u[0, 4] -> h[0, 4:]; in a[0, 4] ->
    h[0, 4:], du[0, :4], da[0, 1:4] and da[0, 5:] (da[0, 4] = g_4 h_3 stays finite)."""
    use_path(path)
    B, T, p, k = 2, 12, 2, 6
    a, u, h0, dh, dl = make(B, T, p, k, with_h0, seed=5)
    nan = float("nan")
    steps_nan = lambda x, b=0: [bool(torch.isnan(x[b, t]).any()) for t in range(T)]
    finite = lambda x: bool(torch.isfinite(x[1]).all())

    dh1 = dh.clone()
    dh1[0, 5, 3] = nan
    da, du, dh0 = K.block_circulant_scan_vjp(dh1, a, u, h0=h0)
    assert steps_nan(du) == [t <= 5 for t in range(T)] and finite(du)
    assert steps_nan(da) == [(t <= 5 and (t > 0 or with_h0)) for t in range(T)] and finite(da)
    if with_h0:
        assert torch.isnan(dh0[0]).any() and torch.isfinite(dh0[1]).all()

    u1 = u.clone()
    u1[0, 4, 7] = nan
    h = K.block_circulant_scan(a, u1, h0=h0)
    assert steps_nan(h) == [t >= 4 for t in range(T)] and finite(h)

    a1 = a.clone()
    a1[0, 4, 1, 0, 2] = nan
    h = K.block_circulant_scan(a1, u, h0=h0)
    assert steps_nan(h) == [t >= 4 for t in range(T)] and finite(h)
    da, du, dh0 = K.block_circulant_scan_vjp(dh, a1, u, h0=h0)
    assert steps_nan(du) == [t < 4 for t in range(T)] and finite(du)
    assert steps_nan(da) == [(0 < t < 4 or t > 4 or (t == 0 and with_h0)) for t in range(T)] and finite(da)


def test_bad_inputs():
    a, u, h0, dh, dl = make(2, 5, 2, 3, True, seed=1)
    with pytest.raises(ValueError, match="'dh'"):
        K.block_circulant_scan_vjp(dh[:, :3], a, u)
    with pytest.raises(ValueError, match="'dh_last'"):
        K.block_circulant_scan_vjp(dh, a, u, dh_last=dl[:, :4])
    with pytest.raises(TypeError, match="'dh'"):
        K.block_circulant_scan_vjp(dh.half(), a, u)
    with pytest.raises(ValueError, match="'h0'"):
        K.block_circulant_scan_vjp(dh, a, u, h0=h0[:1])
    with pytest.raises(ValueError, match="'a'"):
        K.block_circulant_scan_vjp(dh, a[:, :, :1], u)


@pytest.mark.parametrize("with_h0", [False, True])
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-5), (torch.bfloat16, 3e-2)])
def test_torch_autograd_native(with_h0, dtype, tol, monkeypatch):
    """strux.torch's op on CUDA runs the native backward (the CPU path is patched to
    fail) and matches the op's float64 CPU path (its time-loop formulas, gradchecked in
    test_cuda_scan.test_torch_ops)."""
    from strux.torch import _scan as TS
    B, T, p, k = 2, 23, 3, 10
    a, u, h0, dh, dl = make(B, T, p, k, with_h0, seed=2, dtype=dtype)
    cpu = [None if x is None else x.detach().cpu().double().requires_grad_() for x in (a, u, h0)]
    y64, yl64 = TS.block_circulant_scan(*cpu, return_final=True)
    l64 = (y64 * dh.cpu().double()).sum() + (yl64 * dl.cpu().double()).sum()
    ref = torch.autograd.grad(l64, [x for x in cpu if x is not None])

    def fail(*args):
        raise AssertionError("the CPU path ran for CUDA tensors")
    monkeypatch.setattr(TS, "_cpu_block_scan", fail)
    monkeypatch.setattr(TS, "_cpu_block_scan_bwd", fail)
    gpu = [None if x is None else x.detach().clone().requires_grad_() for x in (a, u, h0)]
    y, yl = TS.block_circulant_scan(*gpu, return_final=True)
    assert y.dtype == dtype and _rel(y, y64.detach().numpy()) < tol
    ((y * dh).sum() + (yl * dl).sum()).backward()
    for x, r in zip([x for x in gpu if x is not None], ref):
        assert x.grad.dtype == dtype and _rel(x.grad, r.numpy()) < tol
    # torch.compile-style tracing of the op: fake kernels give the shapes
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        fa = torch.empty(B, T, p, p, k, device=DEV)
        fu = torch.empty(B, T, p * k, device=DEV)
        assert TS._block_scan(fa, fu, None).shape == (B, T, p * k)
        assert [t.shape for t in TS._block_scan_bwd(fu, fa, fu, None)][:2] == [fa.shape, fu.shape]


@pytest.mark.parametrize("p,k,T", [(1, 1, 1), (2, 5, 9), (3, 4, 2), (4, 33, 5)])
@pytest.mark.parametrize("with_h0", [False, True])
def test_float64_on_gpu(p, k, T, with_h0, use_path):
    """float64 CUDA arrays (the direct float64 kernels; the array-library path beyond their n is
    in test_cuda_f64_ops.py), to float64 rounding against the CPU backend, forward and vjp with
    dh_last."""
    a, u, h0, dh, dl = make(2, T, p, k, with_h0, seed=7 + p + k + T, dtype=torch.float64)
    check_vjp(a, u, h0, dh, dl, 1e-12, [""], use_path)
    with pytest.raises(TypeError, match="'a'"):
        strux.block_circulant_scan(a.float(), u, h0=h0)
