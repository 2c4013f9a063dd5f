"""strux::fftconv and strux::fftconv_backward: torch custom ops with autograd (strux.torch).

CUDA tensors run strux's GPU plans (strux._cuda_fftconv) on the current stream; CPU tensors a
plain torch FFT of the same formula (tests, gradcheck).
"""
from typing import Optional, Tuple

import torch
from torch.autograd.function import once_differentiable

from .. import _cuda as _a
from .. import _cuda_fftconv as _G
from ._eager import LEAN as _LEAN, compiling as _compiling, plain_eager as _plain_eager

_a.see_torch(torch.empty(0))  # the cheap checks' torch types (strux._cuda)

Tensor = torch.Tensor
_EMPTY = (0,)


def _fftconv_cpu(u, k, mode, pre, post, skip):
    """Reference path on CPU: float64/float32 torch FFTs of the DESIGN.md formula."""
    ct = torch.float64 if u.dtype == torch.float64 else torch.float32
    L, Lk = u.shape[-1], k.shape[-1]
    v = u.to(ct) * (pre.to(ct) if pre is not None else 1)
    kk = k.to(ct)[:, :min(Lk, L)]
    n = L if mode == "circular" else L + kk.shape[-1] - 1
    y = torch.fft.irfft(torch.fft.rfft(v, n=n) * torch.fft.rfft(kk, n=n), n=n)[..., :L]
    if skip is not None:
        y = y + skip.to(ct)[:, None] * v
    if post is not None:
        y = y * post.to(ct)
    return y.to(u.dtype)


@torch.library.custom_op("strux::fftconv", mutates_args=())
def _fftconv_op(u: Tensor, k: Tensor, mode: str = "causal", pregate: Optional[Tensor] = None,
                postgate: Optional[Tensor] = None, skip: Optional[Tensor] = None) -> Tensor:
    if u.is_cuda:
        return _G.fftconv(u, k, mode, pregate, postgate, skip)
    return _fftconv_cpu(u, k, mode, pregate, postgate, skip)


@_fftconv_op.register_fake
def _(u, k, mode="causal", pregate=None, postgate=None, skip=None):
    return torch.empty_like(u, memory_format=torch.contiguous_format)


@torch.library.custom_op("strux::fftconv_backward", mutates_args=())
def fftconv_backward(dy: Tensor, u: Tensor, k: Tensor, mode: str, pregate: Optional[Tensor],
                     postgate: Optional[Tensor], skip: Optional[Tensor]) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """(du, dk, dpregate, dpostgate, dskip); empty tensors stand for inputs not given."""
    if u.is_cuda:
        r = _G.fftconv_vjp(dy, u, k, mode, pregate, postgate, skip)
    else:
        with torch.enable_grad():
            args = [t.detach().requires_grad_(True) if t is not None else None
                    for t in (u, k, pregate, postgate, skip)]
            y = _fftconv_cpu(args[0], args[1], mode, args[2], args[3], args[4])
            live = [a for a in args if a is not None]
            g = torch.autograd.grad(y, live, dy)
        it = iter(g)
        r = tuple(next(it) if a is not None else None for a in args)
    return tuple(x if x is not None else u.new_empty(_EMPTY) for x in r)


@fftconv_backward.register_fake
def _(dy, u, k, mode, pregate, postgate, skip):
    def like(t):
        return torch.empty_like(t, memory_format=torch.contiguous_format) if t is not None else u.new_empty(_EMPTY)
    return like(u), like(k), like(pregate), like(postgate), like(skip)


def _fftconv_setup(ctx, inputs, output):
    u, k, mode, pre, post, skip = inputs
    ctx.mode = mode
    ctx.given = (pre is not None, post is not None, skip is not None)
    ctx.save_for_backward(u, k, pre, post, skip)


def _fftconv_bwd(ctx, dy):
    u, k, pre, post, skip = ctx.saved_tensors
    du, dk, dpre, dpost, dskip = torch.ops.strux.fftconv_backward(dy.contiguous(), u, k, ctx.mode, pre, post, skip)
    gp, go, gs = ctx.given
    return du, dk, None, dpre if gp else None, dpost if go else None, dskip if gs else None


_fftconv_op.register_autograd(_fftconv_bwd, setup_context=_fftconv_setup)


class _FFTConvFn(torch.autograd.Function):
    """Eager autograd of fftconv without the op dispatch (strux::fftconv's kernels and backward)."""

    @staticmethod
    def forward(ctx, u, k, mode, pre, post, skip, r):
        ctx.mode = mode
        ctx.save_for_backward(u, k, pre, post, skip)
        return _G.forward_torch(u, k, pre, post, skip, r)

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        u, k, pre, post, skip = ctx.saved_tensors
        du, dk, dpre, dpost, dskip = _G.fftconv_vjp(dy.contiguous(), u, k, ctx.mode, pre, post, skip)
        return du, dk, None, dpre, dpost, dskip, None


def fftconv(u: Tensor, k: Tensor, mode: str = "causal", pregate: Optional[Tensor] = None,
            postgate: Optional[Tensor] = None, skip: Optional[Tensor] = None) -> Tensor:
    """Differentiable fftconv (torch.ops.strux.fftconv); eager CUDA calls skip the op dispatch
    (strux/torch/_eager.py says when)."""
    if _LEAN and not _compiling() and type(u) in _a.TT and _plain_eager():
        r = _G._fast(u, k, mode, pregate, postgate, skip)
        if r is not None:
            if torch.is_grad_enabled() and (u.requires_grad or k.requires_grad or (
                    pregate is not None and pregate.requires_grad) or (
                    postgate is not None and postgate.requires_grad) or (skip is not None and skip.requires_grad)):
                return _FFTConvFn.apply(u, k, mode, pregate, postgate, skip, r)
            return _G.forward_torch(u, k, pregate, postgate, skip, r)
    return _fftconv_op(u, k, mode, pregate, postgate, skip)
