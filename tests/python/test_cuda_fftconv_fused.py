"""The fused single-kernel fftconv path (own FFTs in shared memory) against float64 references
and against the cuFFT path, at sizes the plan maps to the fused kernels."""
import pytest

from cuda_common import (FFTCONV_GATES as GATES, TOL, _cuda, check_fftconv_vjp, cpu64, fft_ref,
                         make_fftconv_inputs as make, needs_gpu, rand, ref_fftconv, rel, torch)

pytestmark = needs_gpu

HALF_DTYPES = ["float32", "float16", "bfloat16"]
# (B, H, L, Lk, mode) -> fused nfft
FUSED = [
    ((2, 3, 300, 300, "causal"), 1024),     # padded up to the smallest fused size
    ((2, 2, 1000, 1000, "causal"), 2048),   # L + Lk - 1 = 1999, not a power of two
    ((1, 3, 1024, 1024, "causal"), 2048),   # power-of-two L
    ((3, 2, 777, 2000, "causal"), 2048),    # Lk > L: taps past L never matter
    ((2, 3, 513, 1, "causal"), 1024),       # Lk = 1
    ((2, 2, 1024, 100, "circular"), 1024),
    ((1, 2, 2048, 2048, "circular"), 2048),
]


def plan_of(B, H, L, Lk, mode, dtype, backward=False, algo=0):
    return _cuda._ext.cuda.FFTConvPlan(B, H, L, Lk, mode, dtype, backward, algo)




@pytest.fixture
def fused_algo():
    """Plans made inside the test use the fused kernels where they apply (plan algo 4): sizes the
    automatic choice gives to the direct kernels (Lk <= 32) still test the fused numerics."""
    old = _cuda.fftconv_algo
    _cuda.fftconv_algo = 4
    yield
    _cuda.fftconv_algo = old


@pytest.fixture
def cufft_algo():
    """Plans made inside the test use the cuFFT path."""
    old = _cuda.fftconv_algo
    _cuda.fftconv_algo = 1
    yield
    _cuda.fftconv_algo = old


@pytest.mark.parametrize("size, nfft", FUSED)
def test_plan_picks_fused(size, nfft):
    B, H, L, Lk, mode = size
    for dt in HALF_DTYPES:
        # the automatic choice without the dense kernels (algo 16; they take the 16-bit types at
        # these sizes); algo 4 where the direct kernels would (<= 32 taps)
        p = plan_of(B, H, L, Lk, mode, dt, True, algo=4 if Lk <= 32 else 16)
        assert p.fused and p.nfft == nfft
    assert not plan_of(B, H, L, Lk, mode, "float64").fused
    assert not plan_of(B, H, L, Lk, mode, "float32", algo=1).fused


def test_plan_falls_back_to_cufft():
    assert not plan_of(1, 1, 1000, 10, "circular", "float32").fused   # L not a power of two
    assert not plan_of(1, 1, 512, 10, "circular", "float32").fused    # below the smallest size
    assert not plan_of(1, 1, 20000, 20000, "causal", "float32").fused  # nfft would pass 32768
    with pytest.raises(ValueError, match="'algo'"):
        plan_of(1, 1, 8, 2, "causal", "float32", algo=99)


@pytest.mark.parametrize("dtype", HALF_DTYPES)
@pytest.mark.parametrize("size", [s for s, _ in FUSED], ids=str)
def test_forward(dtype, size, fused_algo):
    B, H, L, Lk, mode = size
    for gates in GATES:
        u, k, pre, post, skip = make(B, H, L, Lk, dtype, gates)
        y = _cuda.fftconv(u, k, mode, pre, post, skip)
        assert y.dtype == u.dtype and y.shape == u.shape
        ref = ref_fftconv(*cpu64(u, k), mode, *cpu64(pre, post, skip))
        assert rel(y, ref) < TOL[dtype], (gates, rel(y, ref))


@pytest.mark.parametrize("dtype", HALF_DTYPES)
@pytest.mark.parametrize("size", [s for s, _ in FUSED[:4]] + [FUSED[5][0]], ids=str)
def test_backward(dtype, size):
    B, H, L, Lk, mode = size
    check_fftconv_vjp(B, H, L, Lk, mode, dtype)


@pytest.mark.parametrize("L, nfft", [(1500, 4096), (3000, 8192), (6000, 16384), (16384, 32768)])
def test_float32_accuracy_large(L, nfft):
    """float32 fused path within 1e-5 of float64 (relative, norm-wise), every fused size class."""
    B, H = 2, 3
    assert plan_of(B, H, L, L, "causal", "float32").nfft == nfft
    u, k, pre, post, skip = make(B, H, L, L, "float32", ("pre", "post", "skip"))
    y = _cuda.fftconv(u, k, "causal", pre, post, skip)
    assert rel(y, fft_ref(*cpu64(u, k), "causal", *cpu64(pre, post, skip))) < 1e-5
    dy = rand((B, H, L), "float32")
    got = _cuda.fftconv_vjp(dy, u, k, "causal", pre, post, skip)
    args = [x.requires_grad_(True) for x in cpu64(u, k, pre, post, skip)]
    want = torch.autograd.grad(fft_ref(args[0], args[1], "causal", *args[2:]), args, dy.double().cpu())
    for name, g, w in zip(["du", "dk", "dpregate", "dpostgate", "dskip"], got, want):
        assert rel(g, w) < 1e-5, (name, rel(g, w))


@pytest.mark.parametrize("size", [(2, 3, 1000, 1000, "causal"), (2, 2, 4096, 300, "circular"),
                                  (1, 2, 8000, 8000, "causal")], ids=str)
def test_same_as_cufft_path(size, request):
    """Both paths compute the same function: float32 results agree to float32 rounding."""
    B, H, L, Lk, mode = size
    u, k, pre, post, skip = make(B, H, L, Lk, "float32", ("pre", "post", "skip"))
    dy = rand((B, H, L), "float32")
    y0 = _cuda.fftconv(u, k, mode, pre, post, skip)
    g0 = _cuda.fftconv_vjp(dy, u, k, mode, pre, post, skip)
    old = _cuda.fftconv_algo
    try:
        _cuda.fftconv_algo = 1
        y1 = _cuda.fftconv(u, k, mode, pre, post, skip)
        g1 = _cuda.fftconv_vjp(dy, u, k, mode, pre, post, skip)
    finally:
        _cuda.fftconv_algo = old
    assert rel(y0, y1) < 1e-5
    for a, b in zip(g0, g1):
        assert rel(a, b) < 1e-5


def test_many_rows_and_chunks():
    """B large enough that a CTA covers several batch rows (dk reduced across chunks)."""
    B, H, L = 40, 3, 700
    u, k, pre, post, skip = make(B, H, L, L, "float32", ("pre", "skip"))
    dy = rand((B, H, L), "float32")
    y = _cuda.fftconv(u, k, "causal", pre, None, skip)
    assert rel(y, fft_ref(*cpu64(u, k), "causal", *cpu64(pre, None, skip))) < 1e-5
    du, dk, dpre, _, dskip = _cuda.fftconv_vjp(dy, u, k, "causal", pre, None, skip)
    args = [x.requires_grad_(True) for x in cpu64(u, k, pre, skip)]
    want = torch.autograd.grad(fft_ref(args[0], args[1], "causal", args[2], None, args[3]), args,
                               dy.double().cpu())
    for name, g, w in zip(["du", "dk", "dpre", "dskip"], [du, dk, dpre, dskip], want):
        assert rel(g, w) < 1e-5, (name, rel(g, w))


def test_odd_offsets_and_strides():
    """Row bases not 4-byte aligned (a slice of a larger tensor) take the scalar load path."""
    flat = rand((1 + 2 * 3 * 600,), "float16")
    u = flat[1:].view(2, 3, 600)      # even L, base 2 bytes off a 4-byte boundary
    k = rand((3, 300), "float16") / 20
    assert rel(_cuda.fftconv(u, k), ref_fftconv(*cpu64(u, k))) < TOL["float16"]
    dy = rand((2, 3, 600), "float16")
    du = _cuda.fftconv_vjp(dy, u, k)[0]
    uu = u.double().cpu().requires_grad_(True)
    want = torch.autograd.grad(ref_fftconv(uu, k.double().cpu()), uu, dy.double().cpu())[0]
    assert rel(du, want) < 2 * TOL["float16"]
    odd = rand((2, 3, 601), "float16")  # odd L
    assert rel(_cuda.fftconv(odd, k), ref_fftconv(*cpu64(odd, k))) < TOL["float16"]
    big = rand((2, 2, 2100), "float32")[..., ::2]  # strided: copied, L = 1050
    kk = rand((2, 40), "float32")
    assert rel(_cuda.fftconv(big, kk), ref_fftconv(*cpu64(big, kk))) < TOL["float32"]


def test_nan_propagates_fused():
    u = rand((1, 2, 600), "float32")
    k = rand((2, 40), "float32")
    u[0, 1, 3] = float("nan")
    y = _cuda.fftconv(u, k)
    assert torch.isnan(y[0, 1, 3:]).all() and not torch.isnan(y[0, 0]).any()


def test_object_api_fused():
    u = rand((2, 3, 1200), "float16")
    k = rand((3, 1200), "float16") / 30
    conv = _cuda.FFTConvCUDA(k, B=2, L=1200)
    assert conv._plan.fused
    assert rel(conv(u), fft_ref(*cpu64(u, k))) < TOL["float16"]
