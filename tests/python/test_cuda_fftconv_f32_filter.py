"""fftconv on the GPU with a float32 filter and float16 / bfloat16 u (DESIGN.md fftconv: "a float32
k with float16/bfloat16 u is allowed"): the arithmetic is float32, y comes back in u's dtype, each
gradient in its own input's dtype. Checked against float64 direct sums, bit for bit against the
float32 call rounded once, through strux.fftconv, strux.fftconv_vjp and strux.torch's autograd;
gates of either dtype; another dtype of a gate is a TypeError naming it."""
import pytest

import strux
from cuda_common import needs_gpu, ref_fftconv, rel, torch

pytestmark = needs_gpu

import strux.torch  # noqa: E402,F401  (strux.torch.fftconv)

HALVES = [torch.float16, torch.bfloat16]
TOL = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def _inputs(dt, B=2, H=3, L=37, Lk=11):
    g = torch.Generator(device="cuda").manual_seed(7)
    u = torch.randn(B, H, L, device="cuda", generator=g).to(dt)
    k = torch.randn(H, Lk, device="cuda", generator=g) / Lk ** 0.5
    pre = (torch.rand(B, H, L, device="cuda", generator=g) + 0.5).to(dt)
    post = torch.rand(B, H, L, device="cuda", generator=g) + 0.5  # float32: the other allowed dtype
    skip = torch.randn(H, device="cuda", generator=g).to(dt)
    return u, k, pre, post, skip


@pytest.mark.parametrize("dt", HALVES, ids=str)
@pytest.mark.parametrize("mode", ["causal", "circular"])
def test_forward_is_the_float32_call_rounded(dt, mode):
    u, k, pre, post, skip = _inputs(dt)
    y = strux.fftconv(u, k, mode=mode, pregate=pre, postgate=post, skip=skip)
    assert y.dtype == dt and y.shape == u.shape
    y32 = strux.fftconv(u.float(), k, mode=mode, pregate=pre.float(), postgate=post, skip=skip.float())
    assert torch.equal(y, y32.to(dt))
    ref = ref_fftconv(u.double().cpu(), k.double().cpu(), mode, pre.double().cpu(), post.double().cpu(),
                      skip.double().cpu())
    assert rel(y, ref) < TOL[dt]


@pytest.mark.parametrize("dt", HALVES, ids=str)
def test_vjp_dtypes_and_values(dt):
    u, k, pre, post, skip = _inputs(dt)
    dy = torch.randn_like(u)
    du, dk, dpre, dpost, dskip = strux.fftconv_vjp(dy, u, k, pregate=pre, postgate=post, skip=skip)
    assert (du.dtype, dk.dtype, dpre.dtype, dpost.dtype, dskip.dtype) == (dt, torch.float32, dt, torch.float32, dt)
    g32 = strux.fftconv_vjp(dy.float(), u.float(), k, pregate=pre.float(), postgate=post, skip=skip.float())
    assert torch.equal(du, g32[0].to(dt)) and torch.equal(dk, g32[1]) and torch.equal(dpost, g32[3])


@pytest.mark.parametrize("dt", HALVES, ids=str)
def test_torch_autograd(dt):
    u, k, _, _, _ = _inputs(dt)
    u.requires_grad_(True)
    k.requires_grad_(True)
    y = strux.torch.fftconv(u, k)
    assert y.dtype == dt
    y.float().square().sum().backward()
    assert u.grad.dtype == dt and k.grad.dtype == torch.float32
    assert torch.isfinite(k.grad).all()


def test_other_gate_dtype_is_refused():
    u, k, pre, _, _ = _inputs(torch.float16)
    with pytest.raises(TypeError, match="argument 'pregate'"):
        strux.fftconv(u, k, pregate=pre.to(torch.bfloat16))
    with pytest.raises(TypeError, match="argument 'k'"):  # float64 k with half u: not allowed
        strux.fftconv(u, k.double())
