"""GPU scans (strux._cuda_ks_scan, strux.torch_ks_scan) against float64 loops of the DESIGN.md
recurrences. Skipped without PyTorch, a GPU or the CUDA build."""
import pytest

torch = pytest.importorskip("torch")
from strux import _cuda_ks_scan as K  # noqa: E402

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and K.available()),
                                reason="needs a CUDA GPU and strux built with CUDA")
DEV = "cuda"
TOL = {torch.float32: 2e-6 * 50, torch.complex64: 1e-4, torch.float16: 5e-3, torch.bfloat16: 3e-2}


def rel(x, ref):
    x = x.to(ref.dtype)
    return ((x - ref).abs().norm() / ref.abs().norm().clamp_min(1e-300)).item()


def coeffs(B, T, n, dtype):
    """Stable random a (|a| < 1) and b, rounded to dtype; float64/complex128 copies for references."""
    mag = 0.5 + 0.49 * torch.rand(B, T, n, device=DEV, dtype=torch.float64)
    if dtype == torch.complex64:
        a = torch.polar(mag, 6.3 * torch.rand_like(mag))
        b = torch.randn(B, T, n, device=DEV, dtype=torch.complex128)
    else:
        a = mag * torch.sign(torch.randn_like(mag))
        b = torch.randn(B, T, n, device=DEV, dtype=torch.float64)
    a, b = a.to(dtype), b.to(dtype)
    return a, b


def ref_scan(a, b, h0=None):
    wide = torch.complex128 if a.is_complex() else torch.float64
    a, b = a.to(wide), b.to(wide)
    h = torch.zeros_like(b[:, 0]) if h0 is None else h0.to(wide)
    out = torch.empty_like(b)
    for t in range(a.shape[1]):
        h = a[:, t] * h + b[:, t]
        out[:, t] = h
    return out


SHAPES = [(1, 1, 1), (2, 7, 3), (3, 300, 37), (2, 1000, 65), (1, 4097, 5)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("with_h0", [False, True])
def test_diag_scan_forward_backward(shape, dtype, with_h0):
    B, T, n = shape
    a, b = coeffs(B, T, n, dtype)
    h0 = coeffs(B, 1, n, dtype)[1][:, 0] if with_h0 else None
    h, hl = K.diag_scan(a, b, h0=h0, return_final=True)
    ref = ref_scan(a, b, h0)
    assert h.dtype == dtype and rel(h, ref) < TOL[dtype]
    assert torch.equal(hl, h[:, -1])
    # backward against autograd of the float64 loop (PyTorch's conjugate convention)
    wide = ref.dtype
    aw, bw = a.to(wide).requires_grad_(), b.to(wide).requires_grad_()
    h0w = h0.to(wide).requires_grad_() if with_h0 else None
    hw = ref_scan(aw, bw, h0w)
    dh = coeffs(B, T, n, dtype)[1]
    loss = (hw * dh.to(wide).conj()).real.sum()
    grads = torch.autograd.grad(loss, [aw, bw] + ([h0w] if with_h0 else []))
    da, db, dh0 = K.diag_scan_vjp(dh, a, b, h0=h0, h=h)
    tol = 3 * TOL[dtype]
    assert rel(da, grads[0]) < tol and rel(db, grads[1]) < tol
    if with_h0:
        assert rel(dh0, grads[2]) < tol
    else:
        assert dh0 is None


def test_deterministic_and_noncontiguous_and_nan():
    a, b = coeffs(4, 5000, 300, torch.complex64)
    h1, h2 = K.diag_scan(a, b), K.diag_scan(a, b)
    assert torch.equal(h1, h2)  # a race in the look-back would show as a difference
    big_a, big_b = coeffs(2, 50, 20, torch.float32)
    at, bt = big_a[:, ::2, ::3], big_b[:, ::2, ::3]
    assert rel(K.diag_scan(at, bt), ref_scan(at, bt)) < 1e-5
    a, b = coeffs(1, 300, 40, torch.float32)
    b[0, 150, 7] = float("nan")
    h = K.diag_scan(a, b)
    assert torch.isnan(h[0, 150:, 7]).all() and torch.isfinite(h[0, :150]).all()
    assert torch.isfinite(h[0, :, 8]).all()


def test_dh_last():
    a, b = coeffs(2, 130, 9, torch.complex64)
    dh = coeffs(2, 130, 9, torch.complex64)[1]
    dl = coeffs(2, 1, 9, torch.complex64)[1][:, 0]
    da, db, _ = K.diag_scan_vjp(dh, a, b, dh_last=dl)
    dh2 = dh.clone()
    dh2[:, -1] += dl
    da2, db2, _ = K.diag_scan_vjp(dh2, a, b)
    assert rel(da, da2.to(torch.complex128)) < 1e-6 and rel(db, db2.to(torch.complex128)) < 1e-6


def circ_ref(a, u, h0=None):
    a, u = a.double(), u.double()
    B, T, n = a.shape
    idx = (torch.arange(n)[:, None] - torch.arange(n)[None, :]) % n
    h = torch.zeros(B, n, dtype=torch.float64, device=a.device) if h0 is None else h0.double()
    out = torch.empty_like(u)
    for t in range(T):
        C = a[:, t][:, idx.to(a.device)]            # (B, n, n) circulant matrices
        h = (C @ h[..., None])[..., 0] + u[:, t]
        out[:, t] = h
    return out


@pytest.mark.parametrize("n", [1, 2, 7, 16, 33])
def test_circulant_scan(n):
    B, T = 2, 150
    a = torch.randn(B, T, n, device=DEV) * (0.9 / n)  # spectral radius < 0.9
    u = torch.randn(B, T, n, device=DEV)
    h0 = torch.randn(B, n, device=DEV)
    for hh in (None, h0):
        h = K.circulant_scan(a, u, h0=hh)
        assert rel(h, circ_ref(a, u, hh)) < 1e-4
    h16 = K.circulant_scan(a.half(), u.half())
    assert h16.dtype == torch.float16 and rel(h16, circ_ref(a.half(), u.half())) < 5e-3


def test_torch_ops():
    from strux import torch_ks_scan as TS
    # complex128 / float64 run the PyTorch path of the same op: gradcheck checks its backward op
    a = (0.5 * torch.randn(2, 6, 3, dtype=torch.complex128)).requires_grad_()
    b = torch.randn(2, 6, 3, dtype=torch.complex128, requires_grad=True)
    h0 = torch.randn(2, 3, dtype=torch.complex128, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b, h0: TS.diag_scan(a, b, h0), (a, b, h0))
    ar = (0.3 * torch.randn(2, 5, 6, dtype=torch.float64)).requires_grad_()
    ur = torch.randn(2, 5, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, u: TS.circulant_scan(a, u), (ar, ur))
    ab = (0.2 * torch.randn(1, 4, 2, 2, 3, dtype=torch.float64)).requires_grad_()
    ub = torch.randn(1, 4, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, u: TS.block_circulant_scan(a, u), (ab, ub))
    # GPU kernels (complex64) through the op, against the complex128 path
    ag, bg, h0g = [t.detach().to(DEV, torch.complex64).requires_grad_() for t in (a, b, h0)]
    y = TS.diag_scan(ag, bg, h0g)
    dy = torch.randn_like(y)
    g = torch.autograd.grad(y, [ag, bg, h0g], dy)
    y64 = TS.diag_scan(a, b, h0)
    g64 = torch.autograd.grad(y64, [a, b, h0], dy.cpu().to(torch.complex128))
    assert rel(y.cpu(), y64.detach()) < 1e-5
    for x, r in zip(g, g64):
        assert rel(x.cpu(), r) < 1e-5
    # block-circulant forward against the dense recurrence
    B, T, p, k = 2, 5, 3, 4
    A = 0.2 * torch.randn(B, T, p, p, k, dtype=torch.float64)
    U = torch.randn(B, T, p * k, dtype=torch.float64)
    idx = (torch.arange(k)[:, None] - torch.arange(k)[None, :]) % k
    h = torch.zeros(B, p * k, dtype=torch.float64)
    for t in range(T):
        M = A[:, t][..., idx].permute(0, 1, 3, 2, 4).reshape(B, p * k, p * k)
        h = (M @ h[..., None])[..., 0] + U[:, t]
    assert rel(TS.block_circulant_scan(A, U)[:, -1], h) < 1e-12


def test_bad_inputs():
    a, b = coeffs(2, 5, 3, torch.float32)
    with pytest.raises(ValueError, match="'b'"):
        K.diag_scan(a, b[:, :4])
    with pytest.raises(ValueError, match="'a'"):
        K.diag_scan(a[0], b[0])
    with pytest.raises(TypeError, match="'b'"):
        K.diag_scan(a, b.half())
    with pytest.raises(TypeError, match="'a'"):
        K.diag_scan(a.double(), b.double())
    with pytest.raises(TypeError, match="'a'"):
        K.diag_scan(a.to(torch.int64), b)
    with pytest.raises(ValueError, match="'h0'"):
        K.diag_scan(a, b, h0=a[:, 0, :2])
    with pytest.raises(ValueError, match="'a'"):
        K.diag_scan(a.cpu(), b)
    with pytest.raises(ValueError, match="'a'"):
        K.diag_scan(a[:, :0], b[:, :0])
    with pytest.raises(TypeError, match="'return_final'"):
        K.diag_scan(a, b, return_final=1)
    with pytest.raises(ValueError, match="'dh'"):
        K.diag_scan_vjp(a[:, :2], a, b)
    with pytest.raises(TypeError, match="'a'"):
        K.circulant_scan(a.to(torch.complex64), b)
