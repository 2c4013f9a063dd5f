"""GPU scans (strux._cuda_scan, strux.torch) against float64 loops of the DESIGN.md
recurrences. Skipped without PyTorch, a GPU or the CUDA build."""
import functools

import pytest

torch = pytest.importorskip("torch")
from strux import _cuda_scan as K  # noqa: E402

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and K.available()),
                                reason="needs a CUDA GPU and strux built with CUDA")
DEV = "cuda"
TOL = {torch.float32: 2e-6 * 50, torch.complex64: 1e-4, torch.float16: 5e-3, torch.bfloat16: 3e-2,
       torch.float64: 1e-12, torch.complex128: 1e-12}


def rel(x, ref):
    x = x.to(ref.dtype)
    return ((x - ref).abs().norm() / ref.abs().norm().clamp_min(1e-300)).item()


def coeffs(B, T, n, dtype):
    """Stable random a (|a| < 1) and b, rounded to dtype; float64/complex128 copies for references."""
    mag = 0.5 + 0.49 * torch.rand(B, T, n, device=DEV, dtype=torch.float64)
    if dtype.is_complex:
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


SHAPES = [(1, 1, 1), (2, 7, 3), (3, 300, 37), (2, 1000, 65), (1, 4097, 5), (2, 37, 16), (1, 53, 24)]
# options={"path": ...} forces a kernel: the chunked look-back kernel, or the streaming one with
# one channel (seq1) or 16 bytes of channels (seqv) per thread; "" = the plan's own choice.
ALGOS = ["", "lookback", "seq1", "seqv"]
_PLAIN = {n: getattr(K, n) for n in ("diag_scan", "diag_scan_vjp")}


def force(monkeypatch, path):
    """K.diag_scan / diag_scan_vjp with options {"path": path} ("": the plan's own choice)."""
    for name, f in _PLAIN.items():
        monkeypatch.setattr(K, name, functools.partial(f, options={"path": path}) if path else f)


def forced_applies(algo, dtype, n):
    """Whether a forced kernel exists for this dtype and n (else the plan raises ValueError)."""
    if algo in ("", "lookback"):
        return True
    if dtype in (torch.float64, torch.complex128):
        return False
    return algo != "seqv" or n % (16 // dtype.itemsize) == 0


@pytest.fixture
def algo(request, monkeypatch):
    force(monkeypatch, request.param)
    return request.param


@pytest.mark.parametrize("algo", ALGOS, indirect=True)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64, torch.float16, torch.bfloat16,
                                   torch.float64, torch.complex128])
@pytest.mark.parametrize("with_h0", [False, True])
def test_diag_scan_forward_backward(shape, dtype, with_h0, algo):
    B, T, n = shape
    a, b = coeffs(B, T, n, dtype)
    h0 = coeffs(B, 1, n, dtype)[1][:, 0] if with_h0 else None
    if not forced_applies(algo, dtype, n):
        with pytest.raises(ValueError, match="algo"):
            K.diag_scan(a, b, h0=h0)
        return
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


@pytest.mark.parametrize("dtype", [torch.complex64, torch.float32, torch.bfloat16])
def test_streaming_kernel_chosen_by_size(dtype, monkeypatch):
    """Enough channels (B*n >= 96 per SM) take the streaming kernel without forcing; a misaligned
    h0 (storage offset of one element) must make the 16-byte form fall back, not misread."""
    force(monkeypatch, "")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    B, T, n = 2, 21, 512 * sms // 2 + 8    # > one resident wave: the vector form when aligned
    a, b = coeffs(B, T, n, dtype)
    h = K.diag_scan(a, b)
    ref = ref_scan(a, b)
    assert rel(h, ref) < TOL[dtype]
    flat = coeffs(1, 1, B * n + 1, dtype)[1].reshape(-1)
    h0 = flat[1:].view(B, n)             # contiguous, but 1 element off 16-byte alignment
    assert rel(K.diag_scan(a, b, h0=h0), ref_scan(a, b, h0)) < TOL[dtype]
    dh = coeffs(B, T, n, dtype)[1]
    da, db, dh0 = K.diag_scan_vjp(dh, a, b, h0=h0)
    force(monkeypatch, "lookback")
    da2, db2, dh02 = K.diag_scan_vjp(dh, a, b, h0=h0)
    tol = 3 * TOL[dtype]
    for x, y in ((da, da2), (db, db2), (dh0, dh02)):
        assert rel(x, y.to(torch.complex128 if dtype == torch.complex64 else torch.float64)) < tol


@pytest.mark.parametrize("algo", ["seq1", "seqv"], indirect=True)
def test_streaming_nan_and_in_place(algo):
    a, b = coeffs(2, 70, 32, torch.float32)
    b[1, 20, 5] = float("nan")
    h = K.diag_scan(a, b)
    assert torch.isnan(h[1, 20:, 5]).all() and torch.isfinite(h[1, :20]).all()
    assert torch.isfinite(h[0]).all() and torch.isfinite(h[1, :, 6]).all()
    # in place (b's buffer as h), as circulant_scan's spectra use it
    a, b = coeffs(3, 45, 16, torch.complex64)
    ref = ref_scan(a, b)
    K._diag_fwd(a, b, None, 1.0, K._O.diag_scan_code({"path": algo}), out=b)
    assert rel(b, ref) < TOL[torch.complex64]


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
    from strux.torch import _scan as TS
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
    with pytest.raises(TypeError, match="'b'"):
        K.diag_scan(a.double(), b)
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


def _np(x):
    return x.detach().cpu().double().numpy() if not x.is_complex() else x.detach().cpu().to(torch.complex128).numpy()


def _rel_np(x, ref):
    import numpy as np
    x = x.detach().cpu().numpy()
    return float(np.linalg.norm(x - ref) / max(np.linalg.norm(ref), 1e-300))


@pytest.mark.parametrize("n", [1, 2, 7, 16, 33])
@pytest.mark.parametrize("fourier", [False, True])
@pytest.mark.parametrize("with_h0", [False, True])
def test_circulant_gpu_vs_cpu_float64(n, fourier, with_h0):
    """Forward (spatial and Fourier form) and the native backward against strux's float64 CPU
    backend (the public dispatch: CUDA tensors route to the GPU, numpy arrays to the CPU)."""
    import strux
    B, T = 2, 131
    a = torch.randn(B, T, n, device=DEV) * (0.9 / n)
    u = torch.randn(B, T, n, device=DEV)
    h0 = torch.randn(B, n, device=DEV) if with_h0 else None
    dh = torch.randn(B, T, n, device=DEV)
    dl = torch.randn(B, n, device=DEV)
    if fourier:  # a half spectrum with junk imaginary parts at 0 and n/2, which must be ignored
        a = torch.fft.rfft(a, dim=-1)
        a = a + 1j * 0.3 * torch.randn_like(a.real)
        a[..., 1:(n + 1) // 2] = torch.fft.rfft(torch.randn(B, T, n, device=DEV) * (0.9 / n), dim=-1)[..., 1:(n + 1) // 2]
        a = a.to(torch.complex64)
    h0n = None if h0 is None else _np(h0)
    ref = strux.circulant_scan(_np(a), _np(u), h0=h0n, fourier=fourier)
    h = strux.circulant_scan(a, u, h0=h0, fourier=fourier)
    assert h.is_cuda and h.dtype == torch.float32 and _rel_np(h, ref) < 1e-4
    rda, rdu, rdh0 = strux.circulant_scan_vjp(_np(dh), _np(a), _np(u), h0=h0n, fourier=fourier, dh_last=_np(dl))
    da, du, dh0 = strux.circulant_scan_vjp(dh, a, u, h0=h0, fourier=fourier, dh_last=dl)
    assert da.dtype == (torch.complex64 if fourier else torch.float32) and tuple(da.shape) == rda.shape
    assert _rel_np(da, rda) < 1e-4 and _rel_np(du, rdu) < 1e-4
    if with_h0:
        assert _rel_np(dh0, rdh0) < 1e-4
    else:
        assert dh0 is None and rdh0 is None


@pytest.mark.parametrize("n", [1, 2, 9, 16])
@pytest.mark.parametrize("fourier", [False, True])
def test_circulant_gpu_float64(n, fourier):
    """float64 runs cuFFT D2Z/Z2D and the complex128 scan: float64 accuracy against the CPU."""
    import strux
    B, T = 2, 77
    a = torch.randn(B, T, n, device=DEV, dtype=torch.float64) * (0.9 / n)
    u = torch.randn(B, T, n, device=DEV, dtype=torch.float64)
    h0 = torch.randn(B, n, device=DEV, dtype=torch.float64)
    dh = torch.randn(B, T, n, device=DEV, dtype=torch.float64)
    if fourier:
        a = torch.fft.rfft(a, dim=-1)
    ref = strux.circulant_scan(_np(a), _np(u), h0=_np(h0), fourier=fourier)
    h = strux.circulant_scan(a, u, h0=h0, fourier=fourier)
    assert h.is_cuda and h.dtype == torch.float64 and _rel_np(h, ref) < 1e-12
    rda, rdu, rdh0 = strux.circulant_scan_vjp(_np(dh), _np(a), _np(u), h0=_np(h0), fourier=fourier)
    da, du, dh0 = strux.circulant_scan_vjp(dh, a, u, h0=h0, fourier=fourier)
    assert da.dtype == (torch.complex128 if fourier else torch.float64)
    assert _rel_np(da, rda) < 1e-12 and _rel_np(du, rdu) < 1e-12 and _rel_np(dh0, rdh0) < 1e-12
    with pytest.raises(TypeError, match="'a'"):  # a float64 u takes a complex128 spectrum
        K.circulant_scan(a.to(torch.complex64) if fourier else a.float(), u, fourier=fourier)


def test_circulant_gpu_half_and_bad_inputs():
    import strux
    B, T, n = 2, 40, 12
    a = torch.randn(B, T, n, device=DEV) * (0.9 / n)
    u = torch.randn(B, T, n, device=DEV)
    dh = torch.randn(B, T, n, device=DEV)
    da, du, _ = K.circulant_scan_vjp(dh.half(), a.half(), u.half())
    rda, rdu, _ = strux.circulant_scan_vjp(_np(dh.half()), _np(a.half()), _np(u.half()))
    assert da.dtype == torch.float16 and _rel_np(da.float(), rda) < 5e-3 and _rel_np(du.float(), rdu) < 5e-3
    with pytest.raises(ValueError, match="'a'"):
        K.circulant_scan(a.to(torch.complex64)[..., :5], u, fourier=True)
    with pytest.raises(TypeError, match="'a'"):
        K.circulant_scan(a, u, fourier=True)
    with pytest.raises(TypeError, match="'fourier'"):
        K.circulant_scan(a, u, fourier=1)
    with pytest.raises(ValueError, match="'dh'"):
        K.circulant_scan_vjp(dh[:, :3], a, u)
    with pytest.raises(ValueError, match="'dh_last'"):
        K.circulant_scan_vjp(dh, a, u, dh_last=dh[:, 0, :3])


@pytest.mark.parametrize("p,k", [(1, 1), (3, 1), (1, 8), (2, 5), (3, 4), (4, 33)])
@pytest.mark.parametrize("with_h0", [False, True])
def test_block_circulant_gpu_vs_cpu_float64(p, k, with_h0):
    import strux
    B, T, n = 2, 67, p * k
    a = torch.randn(B, T, p, p, k, device=DEV) * (0.8 / (p * k))
    u = torch.randn(B, T, n, device=DEV)
    h0 = torch.randn(B, n, device=DEV) if with_h0 else None
    ref = strux.block_circulant_scan(_np(a), _np(u), h0=None if h0 is None else _np(h0))
    h, hl = strux.block_circulant_scan(a, u, h0=h0, return_final=True)
    assert h.is_cuda and h.dtype == torch.float32 and _rel_np(h, ref) < 1e-4
    assert torch.equal(hl, h[:, -1])
    hb = K.block_circulant_scan(a.bfloat16(), u.bfloat16())
    refb = strux.block_circulant_scan(_np(a.bfloat16()), _np(u.bfloat16()))
    assert hb.dtype == torch.bfloat16 and _rel_np(hb.float(), refb) < 3e-2
    with pytest.raises(ValueError, match="'u'"):
        K.block_circulant_scan(a, u[..., :-1] if n > 1 else torch.randn(B, T, 2, device=DEV))
    with pytest.raises(ValueError, match="'a'"):
        K.block_circulant_scan(a[:, :3], u)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64, torch.bfloat16])
def test_nan_or_inf_in_the_first_transition_gives_nan(dtype):
    """h_{-1} = 0 without h0, and a non-finite a_0 times 0 is NaN: every GPU scan gives NaN there,
    as the CPU backend and the plain loop of the formula do."""
    import strux
    for bad in (float("nan"), float("inf")):
        a = torch.full((2, 4, 3), 0.5, device=DEV, dtype=dtype)
        b = torch.ones(2, 4, 3, device=DEV, dtype=dtype)
        a[0, 0, 1] = bad
        h = strux.diag_scan(a, b)
        assert torch.isnan(h[0, :, 1]).all() and not torch.isnan(h[0, :, 0]).any() and not torch.isnan(h[1]).any()
        if dtype.is_complex:
            continue
        h = strux.circulant_scan(a, b)
        assert torch.isnan(h[0]).all() and not torch.isnan(h[1]).any()
        ab = torch.full((2, 4, 1, 1, 3), 0.2, device=DEV, dtype=dtype)
        ab[0, 0, 0, 0, 1] = bad
        h = strux.block_circulant_scan(ab, b)
        assert torch.isnan(h[0]).all() and not torch.isnan(h[1]).any()
