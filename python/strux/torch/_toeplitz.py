"""strux::toeplitz_matvec and strux::toeplitz_rmatvec: torch custom ops with autograd (strux.torch).

fhat: the spectrum of BlockToeplitzCUDA (its `fhat`); gradients flow to the vector (matvec <->
rmatvec), not to fhat. CUDA tensors run strux's GPU plans (strux._cuda_toeplitz) on the current
stream; CPU tensors a plain torch FFT of the same formulas.
"""
import torch

from .. import _cuda_toeplitz as _G

Tensor = torch.Tensor


def _toeplitz_cuda(fhat, Nt, layout):
    """An operator on this call's fhat (its plans come from the plan cache)."""
    return _G.BlockToeplitzCUDA.from_fhat(fhat, Nt, layout)


def _toeplitz_cpu(fhat, x, Nt, layout, adjoint):
    """Plain torch path: rfft along time, per-frequency product with F̂ (or F̂ᴴ), irfft."""
    nfreq = fhat.shape[0]
    nfft = _G.toeplitz_nfft(Nt)
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
