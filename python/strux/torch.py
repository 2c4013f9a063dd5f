"""PyTorch custom ops for strux (torch.library): usable under autograd, torch.compile and
CUDA graph capture.

  torch.ops.strux.fftconv(u, k, mode, pregate, postgate, skip) -> y
      gradients du, dk, dpregate, dpostgate, dskip (through strux::fftconv_backward)
  torch.ops.strux.toeplitz_matvec(fhat, m, Nt, layout) -> d
  torch.ops.strux.toeplitz_rmatvec(fhat, d, Nt, layout) -> m
  ks_matmul, ks_chain, KSLinear, diag_scan, circulant_scan, block_circulant_scan:
      from strux.torch_ks_scan (custom ops with autograd; see there)
      fhat: the spectrum of BlockToeplitzCUDA (its `fhat`); gradients flow to the vector
      (matvec ↔ rmatvec), not to fhat.

CUDA tensors run the strux CUDA plans on the current stream. CPU tensors run a plain torch
FFT implementation of the same formulas (for tests and gradcheck). Under graph capture, call
once before capturing so that the plans (cuFFT/cuBLAS handles and workspace) exist.
"""
from typing import Optional

import torch

from . import _cuda

Tensor = torch.Tensor
_EMPTY = (0,)


# ---- fftconv -------------------------------------------------------------------------------------

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
def fftconv(u: Tensor, k: Tensor, mode: str = "causal", pregate: Optional[Tensor] = None,
            postgate: Optional[Tensor] = None, skip: Optional[Tensor] = None) -> Tensor:
    if u.is_cuda:
        return _cuda.fftconv(u, k, mode, pregate, postgate, skip)
    return _fftconv_cpu(u, k, mode, pregate, postgate, skip)


@fftconv.register_fake
def _(u, k, mode="causal", pregate=None, postgate=None, skip=None):
    return torch.empty_like(u, memory_format=torch.contiguous_format)


@torch.library.custom_op("strux::fftconv_backward", mutates_args=())
def fftconv_backward(dy: Tensor, u: Tensor, k: Tensor, mode: str, pregate: Optional[Tensor],
                     postgate: Optional[Tensor], skip: Optional[Tensor]) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """(du, dk, dpregate, dpostgate, dskip); empty tensors stand for inputs not given."""
    if u.is_cuda:
        r = _cuda.fftconv_vjp(dy, u, k, mode, pregate, postgate, skip)
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


fftconv.register_autograd(_fftconv_bwd, setup_context=_fftconv_setup)


# ---- toeplitz ------------------------------------------------------------------------------------

_toeplitz_ops: dict = {}


def _toeplitz_cuda(fhat, Nt, layout):
    # Plans depend on shapes only; the operator is re-pointed at this call's fhat.
    key = (tuple(fhat.shape), fhat.dtype, fhat.device, Nt, layout)
    op = _toeplitz_ops.get(key)
    if op is None:
        if len(_toeplitz_ops) > 8:
            _toeplitz_ops.clear()
        op = _toeplitz_ops[key] = _cuda.BlockToeplitzCUDA.from_fhat(fhat, Nt, layout)
    op.fhat = fhat  # keep the caller's tensor (same memory) alive through the op
    return op


def _toeplitz_cpu(fhat, x, Nt, layout, adjoint):
    """Plain torch path: rfft along time, per-frequency product with F̂ (or F̂ᴴ), irfft."""
    nfreq = fhat.shape[0]
    nfft = _cuda.toeplitz_nfft(Nt)
    if nfft // 2 + 1 != nfreq:
        raise ValueError(f"argument 'fhat': expected {nfft // 2 + 1} frequencies for Nt = {Nt}, got {nfreq}")
    squeeze = x.dim() == 2
    xx = x.unsqueeze(-1) if squeeze else x
    if layout == "space-major":
        xx = xx.transpose(0, 1)                     # (Nt, n, R)
    X = torch.fft.rfft(xx.to(fhat.real.dtype), n=nfft, dim=0)   # (nfreq, n, R)
    F = fhat.conj().transpose(1, 2) if adjoint else fhat
    Y = torch.fft.irfft(F @ X, n=nfft, dim=0)[:Nt]
    if layout == "space-major":
        Y = Y.transpose(0, 1)
    Y = Y.contiguous()
    return (Y.squeeze(-1) if squeeze else Y).to(x.dtype)


def _toeplitz_out_shape(fhat, x, layout, adjoint):
    n = fhat.shape[2] if adjoint else fhat.shape[1]
    s = list(x.shape)
    s[1 if layout == "time-major" else 0] = n
    return s


@torch.library.custom_op("strux::toeplitz_matvec", mutates_args=())
def toeplitz_matvec(fhat: Tensor, m: Tensor, Nt: int, layout: str = "time-major") -> Tensor:
    if m.is_cuda:
        return _toeplitz_cuda(fhat, Nt, layout).matvec(m)
    return _toeplitz_cpu(fhat, m, Nt, layout, False)


@torch.library.custom_op("strux::toeplitz_rmatvec", mutates_args=())
def toeplitz_rmatvec(fhat: Tensor, d: Tensor, Nt: int, layout: str = "time-major") -> Tensor:
    if d.is_cuda:
        return _toeplitz_cuda(fhat, Nt, layout).rmatvec(d)
    return _toeplitz_cpu(fhat, d, Nt, layout, True)


@toeplitz_matvec.register_fake
def _(fhat, m, Nt, layout="time-major"):
    return m.new_empty(_toeplitz_out_shape(fhat, m, layout, False))


@toeplitz_rmatvec.register_fake
def _(fhat, d, Nt, layout="time-major"):
    return d.new_empty(_toeplitz_out_shape(fhat, d, layout, True))


def _tp_setup(ctx, inputs, output):
    fhat, _, Nt, layout = inputs
    ctx.Nt, ctx.layout = Nt, layout
    ctx.save_for_backward(fhat)


def _matvec_bwd(ctx, g):
    (fhat,) = ctx.saved_tensors
    return None, torch.ops.strux.toeplitz_rmatvec(fhat, g.contiguous(), ctx.Nt, ctx.layout), None, None


def _rmatvec_bwd(ctx, g):
    (fhat,) = ctx.saved_tensors
    return None, torch.ops.strux.toeplitz_matvec(fhat, g.contiguous(), ctx.Nt, ctx.layout), None, None


toeplitz_matvec.register_autograd(_matvec_bwd, setup_context=_tp_setup)
toeplitz_rmatvec.register_autograd(_rmatvec_bwd, setup_context=_tp_setup)


# ---- ks and scans (custom ops defined beside their CUDA layer) ------------------------------------
from .torch_ks_scan import (KSLinear, block_circulant_scan, circulant_scan, diag_scan,  # noqa: E402,F401
                            ks_chain, ks_matmul)
