"""The public strux functions route CUDA arrays to the GPU and give the CPU backend's answers."""
import numpy as np
import pytest

from cuda_common import needs_gpu, rel, torch

import strux

pytestmark = needs_gpu


@pytest.mark.parametrize("mode", ["causal", "circular"])
def test_fftconv_cuda_tensor_matches_cpu(mode):
    u = torch.randn(2, 3, 41, device="cuda")
    k = torch.randn(3, 41 if mode == "circular" else 60, device="cuda")
    pre, post, skip = torch.randn_like(u), torch.randn_like(u), torch.randn(3, device="cuda")
    y = strux.fftconv(u, k, mode=mode, pregate=pre, postgate=post, skip=skip)
    assert isinstance(y, torch.Tensor) and y.is_cuda and y.dtype == u.dtype
    n = lambda t: t.cpu().numpy()
    want = strux.fftconv(n(u), n(k), mode=mode, pregate=n(pre), postgate=n(post), skip=n(skip))
    assert rel(y, torch.from_numpy(want)) < 1e-5
    dy = torch.randn_like(u)
    got = strux.fftconv_vjp(dy, u, k, mode=mode, pregate=pre, postgate=post, skip=skip)
    ref = strux.fftconv_vjp(n(dy), n(u), n(k), mode=mode, pregate=n(pre), postgate=n(post), skip=n(skip))
    for g, r in zip(got, ref):
        assert rel(g, torch.from_numpy(r)) < 1e-5


@pytest.mark.parametrize("layout", ["time-major", "space-major"])
def test_block_toeplitz_cuda_blocks_match_cpu(layout):
    blocks = torch.randn(7, 3, 5, device="cuda", dtype=torch.float64)
    F = strux.BlockToeplitz(blocks, layout=layout)
    Fc = strux.BlockToeplitz(blocks.cpu().numpy(), layout=layout)
    m = torch.randn(*((7, 5) if layout == "time-major" else (5, 7)), device="cuda", dtype=torch.float64)
    d = F.matvec(m)
    assert d.is_cuda
    assert rel(d, torch.from_numpy(Fc.matvec(m.cpu().numpy()))) < 1e-12
    assert rel(F.rmatvec(d), torch.from_numpy(Fc.rmatvec(d.cpu().numpy()))) < 1e-12
    with pytest.raises(ValueError, match="to_dense"):
        F.to_dense()
