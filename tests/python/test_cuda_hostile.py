"""GPU side of issue 11 (runs only with a CUDA device): a failed call leaves no error for the next
one, misaligned real tensors in circulant_scan and block_circulant_scan, long ks sums, subnormal
ks weight gradients."""
import pytest

from cuda_common import needs_gpu, torch

import strux
from strux import _cuda_scan as S  # forced kernel choices are options of the GPU module

pytestmark = needs_gpu


def test_failed_call_does_not_poison_the_next():
    k = torch.randn(4, 64, device="cuda", dtype=torch.float64)
    u = torch.randn(2, 4, 64, device="cuda", dtype=torch.float64)
    want = strux.fftconv(u, k)  # caches the plan
    torch.cuda.synchronize()
    free, _ = torch.cuda.mem_get_info()
    hog = torch.empty(max(0, free - 96 * 2**20), dtype=torch.uint8, device="cuda")  # leave ~96 MiB
    try:
        big = torch.randn(1, 1, 2**22, device="cuda", dtype=torch.float64)  # 32 MiB; its plan needs more
        with pytest.raises((MemoryError, RuntimeError)):
            strux.fftconv(big, torch.randn(1, 2**22, device="cuda", dtype=torch.float64))
            torch.cuda.synchronize()
    finally:
        del hog
        torch.cuda.empty_cache()
    got = strux.fftconv(u, k)  # was: "launch of fftconv pad(k) failed: cudaErrorMemoryAllocation"
    torch.cuda.synchronize()
    assert torch.allclose(got, want)


def off(x):
    """The same values, contiguous, at a data pointer one element past an aligned address (4 bytes
    in float32: not aligned to a complex element, which cuFFT refuses)."""
    buf = torch.empty(x.numel() + 1, dtype=x.dtype, device="cuda")
    v = buf[1:].view(x.shape)
    v.copy_(x)
    return v


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("fourier", [False, True])
def test_circulant_scan_misaligned(dtype, fourier):
    B, T, n = 2, 5, 8
    u = torch.randn(B, T, n, dtype=dtype, device="cuda")
    a = torch.randn(B, T, n, dtype=dtype, device="cuda") * 0.1
    if fourier:
        a = torch.fft.rfft(a, dim=-1)
    h0 = torch.randn(B, n, dtype=dtype, device="cuda")
    want = strux.circulant_scan(a, u, h0=h0, fourier=fourier)
    got = strux.circulant_scan(a if fourier else off(a), off(u), h0=off(h0), fourier=fourier)
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-6)
    dh = torch.randn(B, T, n, dtype=dtype, device="cuda")
    g_want = strux.circulant_scan_vjp(dh, a, u, h0=h0, fourier=fourier)
    g_got = strux.circulant_scan_vjp(off(dh), a if fourier else off(a), off(u), h0=off(h0), fourier=fourier)
    for x, y in zip(g_got, g_want):
        assert torch.allclose(x, y, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("p,k", [(1, 8), (2, 5), (3, 4), (2, 1), (5, 6)])
@pytest.mark.parametrize("path", ["auto", "generic", "chunks"])
def test_block_circulant_scan_misaligned(p, k, path):
    # a in p pieces through the stage; u, h0, dh, dh_last staged; outputs aligned (fresh) here,
    # misaligned through the C++ API is the same code (RealRows.out).
    B, T = 2, 7
    n = p * k
    if path == "chunks" and p > 4:
        pytest.skip("the register kernels (chunks) need p <= 4")
    opts = {"chunk": 3} if path == "chunks" else {"path": path}  # chunks: the workspace's S, Car, M too
    a = torch.randn(B, T, p, p, k, device="cuda") * (0.4 / (p * k) ** 0.5)
    u = torch.randn(B, T, n, device="cuda")
    h0 = torch.randn(B, n, device="cuda")
    want = S.block_circulant_scan(a, u, h0=h0, options=opts)
    got = S.block_circulant_scan(off(a), off(u), h0=off(h0), options=opts)
    assert off(a).data_ptr() % 8 == 4
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-6)
    dh = torch.randn(B, T, n, device="cuda")
    dl = torch.randn(B, n, device="cuda")
    g_want = S.block_circulant_scan_vjp(dh, a, u, h0=h0, dh_last=dl, options=opts)
    g_got = S.block_circulant_scan_vjp(off(dh), off(a), off(u), h0=off(h0), dh_last=off(dl), options=opts)
    for x, y in zip(g_got, g_want):
        assert torch.allclose(x, y, rtol=1e-5, atol=1e-6)
    # only some arguments misaligned (a aligned, u not; and the reverse)
    assert torch.allclose(S.block_circulant_scan(a, off(u), h0=h0, options=opts), want, rtol=1e-5, atol=1e-6)
    assert torch.allclose(S.block_circulant_scan(off(a), u, options=opts),
                          S.block_circulant_scan(a, u, options=opts), rtol=1e-5, atol=1e-6)


def test_ks_long_sum_does_not_stall():
    c = 2**25  # one output summing 2^25 terms of 2^-20: 32 (a running float32 sum stops at 16)
    x = torch.full((1, c), 2.0**-20, device="cuda")
    w = torch.ones(1, 1, c, 1, device="cuda")
    y = strux.ks_matmul(x, w, (1, 1, c, 1))
    assert abs(float(y) - 32.0) < 32.0 * 1e-6


def test_ks_weight_gradient_keeps_subnormals():
    x = torch.full((8, 2), 1e-20, device="cuda")
    dy = torch.full((8, 2), 1e-20, device="cuda")
    w = torch.ones(1, 2, 2, 1, device="cuda")
    dx, dw = strux.ks_matmul_vjp(dy, x, w, (1, 2, 2, 1))
    assert torch.allclose(dw.double(), torch.full_like(dw.double(), 8e-40), rtol=1e-5)
