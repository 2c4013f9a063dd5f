"""circulant_scan forward on the GPU, every path forced through options={"path": ...} ("fft":
cuFFT around the complex diagonal scan; "fused": the three-launch fused kernels; "onepass": the
single-pass fused kernel with a look-back over chunks) against a float64 reference: n = 64..1024,
T = 1, 2, 17, 1000 and around the single-pass kernel's chunk boundaries, B = 1, 3, with and
without h0, repeated calls and a side stream (the single-pass kernel's flags), NaN kept in its
batch row (the single-pass kernel inverts two steps in one FFT: a NaN may reach
the step before it, in the same row), and the default rule: "auto" runs the single-pass kernel
for spatial-a float32 with n = 256, 512, 1024 (where measured faster), the cuFFT path otherwise
(n = 64: a tie, n = 128: unmeasured). Skipped without PyTorch, a GPU or the CUDA build."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
from strux import _cuda_scan as K  # noqa: E402

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and K.available()),
                                reason="needs a CUDA GPU and strux built with CUDA")
PATHS = ["fft", "fused", "onepass"]
NS = [64, 128, 256, 512, 1024]
TOL = 2e-5
# Virtual steps per chunk of the single-pass kernel (onepass_steps in circulant_fused.cu): time
# T + 1 (h0 is a step of its own) fills whole chunks at T = S - 1.
ONEPASS_S = {64: 64, 128: 32, 256: 24, 512: 24, 1024: 12}


def ref_fft(a, u, h0=None):
    """h_t = circ(a_t) h_{t-1} + u_t in float64 (numpy rfft: circ(a) h is the cyclic a (*) h)."""
    a, u = np.asarray(a.double().cpu()), np.asarray(u.double().cpu())
    A, U = np.fft.rfft(a), np.fft.rfft(u)
    H = np.zeros_like(U[:, 0]) if h0 is None else np.fft.rfft(np.asarray(h0.double().cpu()))
    out = np.empty_like(U)
    for t in range(a.shape[1]):
        H = A[:, t] * H + U[:, t]
        out[:, t] = H
    return torch.from_numpy(np.fft.irfft(out, a.shape[2]))


def inputs(B, T, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = 0.9 * (2 * torch.rand(B, T, n, generator=g) - 1) / n  # |rfft(a_t)| <= 0.9: stable
    u = torch.randn(B, T, n, generator=g)
    h0 = torch.randn(B, n, generator=g)
    return a.cuda(), u.cuda(), h0.cuda()


def rel(x, ref):
    x = x.detach().double().cpu()
    return float((x - ref).abs().max() / ref.abs().max().clamp_min(1e-30))


def run(path, a, u, h0=None, **kw):
    return K.circulant_scan(a, u, h0=h0, options={"path": path}, **kw)


@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("T", [1, 2, 17, 1000])
@pytest.mark.parametrize("B", [1, 3])
@pytest.mark.parametrize("with_h0", [False, True])
def test_paths_against_float64(n, T, B, with_h0):
    a, u, h0 = inputs(B, T, n, seed=n + T + B)
    h0 = h0 if with_h0 else None
    ref = ref_fft(a, u, h0)
    for path in PATHS:
        h = run(path, a, u, h0)
        assert h.dtype == torch.float32 and h.shape == (B, T, n), path
        assert rel(h, ref) < TOL, (path, rel(h, ref))


@pytest.mark.parametrize("n", NS)
def test_onepass_chunk_boundaries(n):
    """T + 1 virtual steps: one chunk exactly full, one step over, two chunks plus one."""
    S = ONEPASS_S[n]
    for T in (S - 1, S, 2 * S):
        a, u, h0 = inputs(2, T, n, seed=T)
        for hz in (None, h0):
            assert rel(run("onepass", a, u, hz), ref_fft(a, u, hz)) < TOL, (T, hz is None)


@pytest.mark.parametrize("path", ["fused", "onepass"])
def test_repeated_calls_and_side_stream(path):
    a, u, h0 = inputs(3, 300, 256)
    ref = ref_fft(a, u, h0)
    first = run(path, a, u, h0)
    assert rel(first, ref) < TOL
    # The look-back folds aggregates or takes an inclusive state, whichever is published first:
    # equal up to rounding, not bit for bit.
    for _ in range(3):
        assert rel(run(path, a, u, h0), ref) < TOL
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        h = run(path, a, u, h0)
    s.synchronize()
    assert rel(h, ref) < TOL


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("n", [64, 1024])
def test_nan_stays_in_its_row(path, n):
    B, T, t_nan = 3, 1000, 400
    a, u, h0 = inputs(B, T, n, seed=7)
    u[1, t_nan, 5] = float("nan")
    h = run(path, a, u, h0).double().cpu()
    ref = ref_fft(a, u, h0)
    for b in (0, 2):
        assert torch.isfinite(h[b]).all(), (path, b)
        assert rel(h[b], ref[b]) < TOL, (path, b)
    # "onepass" inverts two steps in one complex FFT, so the step before (its partner) may show
    # the NaN too; never another row.
    ok = t_nan - 1 if path == "onepass" else t_nan
    assert torch.isfinite(h[1, :ok]).all() and rel(h[1, :ok], ref[1, :ok]) < TOL
    assert torch.isnan(h[1, t_nan:]).all(), path  # every later state of the row: the FFT spreads it


@pytest.mark.parametrize("path", ["fused", "onepass"])
def test_fused_edges(path):
    a, u, _ = inputs(2, 9, 256)
    h, last = run(path, a, u, return_final=True)
    assert torch.equal(last, h[:, -1])
    # strided u (the adapter copies) and half inputs (cast to float32) take the same kernels
    assert rel(run(path, a, u.transpose(1, 2).contiguous().transpose(1, 2)), ref_fft(a, u)) < TOL
    hb = run(path, a.bfloat16(), u.bfloat16())
    assert hb.dtype == torch.bfloat16 and rel(hb, ref_fft(a.bfloat16().float(), u.bfloat16().float())) < 3e-2
    with pytest.raises(ValueError):
        run(path, *inputs(1, 4, 100)[:2])  # n not a power of two
    with pytest.raises(ValueError):
        run(path, *inputs(1, 4, 2048)[:2])  # n past 1024
    with pytest.raises(ValueError):
        run(path, a.double(), u.double())


AUTO_ONEPASS = [256, 512, 1024]  # measured faster than cuFFT at 256 and 1024; 512 between them


@pytest.mark.parametrize("n", AUTO_ONEPASS)
def test_auto_runs_onepass(n):
    assert "single-pass" in K.circulant_scan_describe(3, 100, n)
    assert "cuFFT rfft" in K.circulant_scan_describe(3, 100, n, options={"path": "fft"})
    assert "three-launch" in K.circulant_scan_describe(3, 100, n, options={"path": "fused"})
    a, u, h0 = inputs(3, 100, n, seed=3)
    ref = ref_fft(a, u, h0)
    assert rel(K.circulant_scan(a, u, h0=h0), ref) < TOL
    # the Fourier form (its own rule and kernel: test_cuda_circulant_fourier.py) agrees
    ah = torch.fft.rfft(a, dim=-1)
    assert rel(K.circulant_scan(ah, u, h0=h0, fourier=True), ref) < TOL


@pytest.mark.parametrize("n,dtype", [(64, "float32"), (128, "float32"), (100, "float32"), (2048, "float32"),
                                     (32, "float32"), (256, "float64")])
def test_auto_outside_onepass_is_fft(n, dtype):
    assert "cuFFT rfft" in K.circulant_scan_describe(2, 50, n, dtype=dtype)


def test_auto_rule_every_n():
    """Which path the default takes at each n, float32, spatial a."""
    for n in NS:
        d = K.circulant_scan_describe(3, 100, n)
        assert ("single-pass" in d) == (n in AUTO_ONEPASS), (n, d)
        assert ("cuFFT rfft" in d) == (n not in AUTO_ONEPASS), (n, d)
    # B past what the GPU tests covered keeps the cuFFT path
    assert "cuFFT rfft" in K.circulant_scan_describe(65536, 2, 256)


@pytest.mark.parametrize("n", [64, 256])
def test_onepass_long_lookback(n):
    """Hundreds of chunks in one row: look-backs across several windows of 8, under contention."""
    a, u, h0 = inputs(1, 40 * ONEPASS_S[n] * 8, n, seed=11)
    for _ in range(2):
        assert rel(run("onepass", a, u, h0), ref_fft(a, u, h0)) < TOL
