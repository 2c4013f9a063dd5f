"""circulant_scan in the Fourier form (a given as its half spectra â, fourier=True) on the GPU:
the one-launch Fourier-form kernel (options={"path": "onepass"}, and the default for float32 at
n = 64 … 1024) and the cuFFT path ("fft") against a float64 reference of the formula
ĥ_t = â_t ĥ_{t-1} + rfft(u_t), h_t = irfft(ĥ_t), with the imaginary parts of â at frequency 0
and n/2 ignored (as irfft does): n = 2, 4 (cuFFT only), 64..1024, T = 1, odd T, T = 1000 and the
kernel's chunk boundaries, B = 1, 3, with and without h0, non-contiguous inputs, repeated calls
and a side stream; strux.torch's eager path (no op dispatch) against the registered op, forward
and gradients; CirculantSSM (p = 1) against its float64 spatial loop. Skipped without PyTorch, a
GPU or the CUDA build."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
from strux import _cuda_scan as K  # noqa: E402

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and K.available()),
                                reason="needs a CUDA GPU and strux built with CUDA")
TOL = 2e-5
ONEPASS_S = {64: 64, 128: 32, 256: 24, 512: 24, 1024: 12}  # onepass_steps in circulant_fused.cu
AUTO_FOURIER = (64, 128, 256, 512, 1024)


def ref(ah, u, h0=None):
    """float64 h of the Fourier form (numpy): the imaginary parts at 0 and n/2 dropped."""
    ah = np.asarray(ah.detach().to(torch.complex128).cpu()).copy()
    u = np.asarray(u.detach().double().cpu())
    n = u.shape[2]
    ah[..., 0] = ah[..., 0].real
    if n % 2 == 0:
        ah[..., -1] = ah[..., -1].real
    U = np.fft.rfft(u)
    H = np.zeros_like(U[:, 0]) if h0 is None else np.fft.rfft(np.asarray(h0.detach().double().cpu()))
    out = np.empty_like(U)
    for t in range(u.shape[1]):
        H = ah[:, t] * H + U[:, t]
        out[:, t] = H
    return torch.from_numpy(np.fft.irfft(out, n))


def inputs(B, T, n, seed=0):
    """â with |â| < 1 and non-zero imaginary parts everywhere (0 and n/2 included: ignored)."""
    g = torch.Generator().manual_seed(seed)
    F = n // 2 + 1
    ah = torch.polar(0.2 + 0.75 * torch.rand(B, T, F, generator=g), 6.3 * torch.rand(B, T, F, generator=g))
    u = torch.randn(B, T, n, generator=g)
    h0 = torch.randn(B, n, generator=g)
    return ah.cuda(), u.cuda(), h0.cuda()


def rel(x, r):
    x = x.detach().double().cpu()
    return float((x - r).abs().max() / r.abs().max().clamp_min(1e-30))


def run(path, ah, u, h0=None, **kw):
    return K.circulant_scan(ah, u, h0=h0, fourier=True, options=None if path == "auto" else {"path": path}, **kw)


@pytest.mark.parametrize("n", [2, 4, 64, 128, 256, 512, 1024])
@pytest.mark.parametrize("T", [1, 17, 1000])
@pytest.mark.parametrize("B", [1, 3])
@pytest.mark.parametrize("with_h0", [False, True])
def test_fourier_paths_against_float64(n, T, B, with_h0):
    ah, u, h0 = inputs(B, T, n, seed=n + T + B)
    h0 = h0 if with_h0 else None
    r = ref(ah, u, h0)
    for path in ("auto", "fft", "onepass"):
        if path == "onepass" and n < 64:
            with pytest.raises(ValueError):
                run(path, ah, u, h0)
            continue
        h = run(path, ah, u, h0)
        assert h.dtype == torch.float32 and h.shape == (B, T, n), path
        assert rel(h, r) < TOL, (path, rel(h, r))


@pytest.mark.parametrize("n", [64, 128, 256, 512, 1024])
def test_fourier_onepass_chunk_boundaries(n):
    S = ONEPASS_S[n]
    for T in (S - 1, S, 2 * S, 3 * S + 1):
        ah, u, h0 = inputs(2, T, n, seed=T)
        for hz in (None, h0):
            assert rel(run("onepass", ah, u, hz), ref(ah, u, hz)) < TOL, (T, hz is None)


@pytest.mark.parametrize("n", [64, 256])
def test_fourier_noncontiguous_repeated_side_stream(n):
    ah, u, h0 = inputs(3, 301, n, seed=5)
    r = ref(ah, u, h0)
    big = torch.zeros(3, 301, 2 * (n // 2 + 1), dtype=torch.complex64, device="cuda")
    big[:, :, ::2] = ah
    ahs = big[:, :, ::2]                                  # strided spectra
    us = u.transpose(1, 2).contiguous().transpose(1, 2)   # strided u
    h0s = torch.stack([h0, h0], -1)[..., 0]               # strided h0
    assert not (ahs.is_contiguous() or us.is_contiguous() or h0s.is_contiguous())
    for path in ("auto", "onepass", "fft"):
        assert rel(run(path, ahs, us, h0s), r) < TOL, path
    for _ in range(3):  # the look-back: equal up to rounding between calls
        assert rel(run("onepass", ah, u, h0), r) < TOL
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        h = run("onepass", ah, u, h0)
    s.synchronize()
    assert rel(h, r) < TOL


def test_fourier_long_lookback():
    ah, u, h0 = inputs(1, 40 * 64 * 8, 64, seed=11)
    for _ in range(2):
        assert rel(run("onepass", ah, u, h0), ref(ah, u, h0)) < TOL


def test_fourier_default_rule():
    for n in (64, 128, 256, 512, 1024):
        d = K.circulant_scan_describe(3, 100, n)
        assert ("Fourier-form one-launch" in d) == (n in AUTO_FOURIER), (n, d)
        assert "Fourier-form one-launch" in K.circulant_scan_describe(3, 100, n, options={"path": "onepass"})
        for p in ("fft", "fused"):
            assert "Fourier-form" not in K.circulant_scan_describe(3, 100, n, options={"path": p}), (n, p)
    for n, dt in ((32, "float32"), (100, "float32"), (64, "float64"), (2048, "float32")):
        assert "Fourier-form" not in K.circulant_scan_describe(2, 50, n, dtype=dt), (n, dt)
    # float64 in the Fourier form keeps the cuFFT path and its precision
    ah, u, h0 = inputs(2, 33, 64, seed=2)
    h = K.circulant_scan(ah.to(torch.complex128), u.double(), h0=h0.double(), fourier=True)
    assert h.dtype == torch.float64 and rel(h, ref(ah, u, h0)) < 1e-12


@pytest.mark.parametrize("n", [4, 64, 256])
@pytest.mark.parametrize("with_h0", [False, True])
def test_torch_circulant_eager_path_matches_op(n, with_h0):
    """strux.torch.circulant_scan's eager path (no op dispatch) against the registered op."""
    import strux.torch as st
    from strux.torch import _scan
    ah, u, h0 = inputs(2, 37, n, seed=n)
    h0 = h0 if with_h0 else None
    leaves = [x.detach().clone().requires_grad_() for x in (ah, u) + ((h0,) if with_h0 else ())]
    leaves2 = [x.detach().clone().requires_grad_() for x in leaves]
    h = st.circulant_scan(leaves[0], leaves[1], leaves[2] if with_h0 else None, fourier=True)
    h2 = _scan._circ_scan(leaves2[0], leaves2[1], leaves2[2] if with_h0 else None, True)
    assert rel(h, ref(ah, u, h0)) < TOL
    assert torch.allclose(h, h2, rtol=1e-5, atol=1e-5)
    w = torch.randn_like(h)
    (h * w).sum().backward()
    (h2 * w).sum().backward()
    for x, y in zip(leaves, leaves2):
        assert x.grad.dtype == y.grad.dtype and torch.allclose(x.grad, y.grad, rtol=1e-4, atol=1e-5)
    with torch.no_grad():  # the direct call, and return_final
        hn, last = st.circulant_scan(ah, u, h0, fourier=True, return_final=True)
    assert torch.equal(last, hn[:, -1]) and rel(hn, ref(ah, u, h0)) < TOL


@pytest.mark.parametrize("n", [64, 256])
def test_layer_p1_fourier_against_float64_loop(n):
    from strux.torch.ssm import CirculantSSM, reference_states
    torch.manual_seed(n)
    layer = CirculantSSM(32, n).cuda()
    x = torch.randn(2, 65, 32, device="cuda")
    h0 = torch.randn(2, n, device="cuda")
    for hz in (None, h0):
        with torch.no_grad():
            y, h = layer(x, hz, return_state=True)
        r = reference_states(layer, x, hz).cpu()
        assert rel(h, r) < 1e-4, hz is None
    xg = x.clone().requires_grad_()
    layer(xg, h0).square().sum().backward()
    assert torch.isfinite(xg.grad).all() and all(torch.isfinite(p.grad).all() for p in layer.parameters())
