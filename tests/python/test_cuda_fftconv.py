"""fftconv on the GPU (strux._cuda) against float64 direct-sum references."""

import pytest

from cuda_common import (DTYPES, FFTCONV_GATES as GATES, TOL, _cuda, check_fftconv_vjp, cpu64,
                         make_fftconv_inputs as make, needs_gpu, rand, ref_fftconv, rel, torch)

pytestmark = needs_gpu

SIZES = [(1, 1, 1, 1), (2, 3, 7, 5), (2, 3, 13, 20), (1, 2, 31, 31), (3, 2, 64, 17), (2, 1, 97, 3)]






@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["causal", "circular"])
@pytest.mark.parametrize("size", SIZES)
def test_forward(dtype, mode, size):
    B, H, L, Lk = size
    if mode == "circular" and Lk > L:
        Lk = L
    for gates in GATES:
        u, k, pre, post, skip = make(B, H, L, Lk, dtype, gates)
        u[0, 0, 0] = 1.0  # every row nonzero where it matters
        y = _cuda.fftconv(u, k, mode, pre, post, skip)
        assert y.dtype == u.dtype and y.shape == u.shape and y.device == u.device
        ref = ref_fftconv(*cpu64(u, k), mode, *cpu64(pre, post, skip))
        assert rel(y, ref) < TOL[dtype], (gates, rel(y, ref))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["causal", "circular"])
@pytest.mark.parametrize("size", SIZES)
def test_backward(dtype, mode, size):
    B, H, L, Lk = size
    if mode == "circular" and Lk > L:
        Lk = L
    check_fftconv_vjp(B, H, L, Lk, mode, dtype)


def test_lk_longer_than_l_ignores_late_taps():
    u = rand((2, 3, 8), "float64")
    k = rand((3, 20), "float64")
    y1 = _cuda.fftconv(u, k)
    k2 = k.clone()
    k2[:, 8:] = 1e6
    assert rel(_cuda.fftconv(u, k2), y1) < 1e-13
    dk = _cuda.fftconv_vjp(torch.ones_like(u), u, k)[1]
    assert torch.all(dk[:, 8:] == 0)


def test_non_contiguous_inputs():
    base = rand((3, 4, 40), "float32")
    u = base[:, 1:, ::2]          # (3, 3, 20), strided
    k = rand((5, 3), "float32").t()  # (3, 5), transposed
    pre = rand((20, 3, 3), "float32").permute(2, 1, 0)
    y = _cuda.fftconv(u, k, "causal", pre)
    ref = ref_fftconv(*cpu64(u, k), "causal", *cpu64(pre))
    assert rel(y, ref) < TOL["float32"]


def test_filter_changes_between_calls():
    u = rand((2, 3, 33), "float32")
    for _ in range(3):
        k = rand((3, 9), "float32")
        assert rel(_cuda.fftconv(u, k), ref_fftconv(*cpu64(u, k))) < TOL["float32"]


def test_object_api_caches_filter():
    u = rand((2, 3, 50), "float32")
    k = rand((3, 11), "float32")
    conv = _cuda.FFTConvCUDA(k, B=2, L=50)
    ref = ref_fftconv(*cpu64(u, k))
    assert rel(conv(u), ref) < TOL["float32"]
    k2 = rand((3, 11), "float32")
    conv.set_filter(k2)
    assert rel(conv(u), ref_fftconv(*cpu64(u, k2))) < TOL["float32"]


def test_side_stream():
    u = rand((4, 8, 300), "float32")
    k = rand((8, 300), "float32")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = _cuda.fftconv(u, k)
    torch.cuda.current_stream().wait_stream(s)
    assert rel(y, ref_fftconv(*cpu64(u, k))) < TOL["float32"]


def test_nan_propagates():
    u = rand((1, 2, 16), "float32")
    k = rand((2, 4), "float32")
    u[0, 1, 3] = float("nan")
    y = _cuda.fftconv(u, k)
    assert torch.isnan(y[0, 1]).any() and not torch.isnan(y[0, 0]).any()


def test_large_random_vs_float64():
    u = rand((4, 16, 4096), "float16")
    k = rand((16, 4096), "float16") / 64
    y = _cuda.fftconv(u, k)
    uu, kk = u.double(), k.double()
    n = 8192
    ref = torch.fft.irfft(torch.fft.rfft(uu, n=n) * torch.fft.rfft(kk, n=n), n=n)[..., :4096]
    assert rel(y, ref) < 2e-3


def test_cupy_arrays():
    cp = pytest.importorskip("cupy")
    u = cp.random.standard_normal((2, 3, 21)).astype(cp.float32)
    k = cp.random.standard_normal((3, 6)).astype(cp.float32)
    y = _cuda.fftconv(u, k)
    assert isinstance(y, cp.ndarray) and y.dtype == cp.float32
    ref = ref_fftconv(torch.as_tensor(cp.asnumpy(u)).double(), torch.as_tensor(cp.asnumpy(k)).double())
    assert rel(torch.as_tensor(cp.asnumpy(y)), ref) < TOL["float32"]


@pytest.mark.parametrize("call, arg", [
    (lambda u, k: _cuda.fftconv(u[0], k), "u"),
    (lambda u, k: _cuda.fftconv(u, k[0]), "k"),
    (lambda u, k: _cuda.fftconv(u, k[:2]), "k"),
    (lambda u, k: _cuda.fftconv(u, k, mode="same"), "mode"),
    (lambda u, k: _cuda.fftconv(u, torch.randn(3, 9, device="cuda"), mode="circular"), "k"),
    (lambda u, k: _cuda.fftconv(u, k, pregate=u[:1]), "pregate"),
    (lambda u, k: _cuda.fftconv(u, k, postgate=u[..., :4]), "postgate"),
    (lambda u, k: _cuda.fftconv(u, k, skip=k), "skip"),
    (lambda u, k: _cuda.fftconv(u[..., :0], k), "u"),
    (lambda u, k: _cuda.fftconv_vjp(u[:1], u, k), "dy"),
])
def test_bad_values(call, arg):
    u = rand((2, 3, 8), "float32")
    k = rand((3, 4), "float32")
    with pytest.raises(ValueError, match=f"'{arg}'"):
        call(u, k)


@pytest.mark.parametrize("call, arg", [
    (lambda u, k: _cuda.fftconv(u, k.double()), "k"),
    (lambda u, k: _cuda.fftconv(u.int(), k), "u"),
    (lambda u, k: _cuda.fftconv(u, k, skip=torch.randn(3, device="cuda", dtype=torch.float16)), "skip"),
    (lambda u, k: _cuda.fftconv(u.cpu().numpy(), k), "u"),
    (lambda u, k: _cuda.fftconv(u, k, pregate=[1.0]), "pregate"),
])
def test_bad_types(call, arg):
    u = rand((2, 3, 8), "float32")
    k = rand((3, 4), "float32")
    with pytest.raises(TypeError, match=f"'{arg}'"):
        call(u, k)


def test_cpu_tensor_rejected():
    with pytest.raises(ValueError, match="'u'"):
        _cuda.fftconv(torch.randn(2, 3, 8), torch.randn(3, 4))
