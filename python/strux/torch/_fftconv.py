"""strux::fftconv and strux::fftconv_backward: torch custom ops with autograd (strux.torch); the same
for strux::fftconv_spectral (the filter as its lowest frequencies) and its backward.

CUDA tensors run strux's GPU plans (strux._cuda_fftconv) on the current stream; CPU tensors
strux's CPU backend (strux.fftconv / fftconv_vjp) on the tensors' memory (strux.torch._host).
FFTConv: the nn.Module on the op.
"""
import importlib
from typing import Optional, Tuple

import torch
from torch.autograd.function import once_differentiable

from .. import _cuda as _a
from .. import _cuda_fftconv as _G
from ._check import COMPLEX as _ck_COMPLEX, REAL as _ck_REAL, tensor as _ck_tensor, tensors as _ck_tensors
from ._host import np_in as _np, same_dtype as _same, t_out as _out
from ._eager import LEAN as _LEAN, compiling as _compiling, plain_eager as _plain_eager

_a.see_torch(torch.empty(0))  # the cheap checks' torch types (strux._cuda)

# The module strux.fftconv (the package's attribute of that name is the function).
_C = importlib.import_module("..fftconv", __package__)
Tensor = torch.Tensor
_EMPTY = (0,)


def _filled(grads, u):
    """A backward op's outputs: empty tensors stand for inputs not given (the op returns tensors)."""
    return tuple(g if g is not None else u.new_empty(_EMPTY) for g in grads)


def _like(t, u):
    """The fake kernel's output for gradient of t (empty when t was not given)."""
    return torch.empty_like(t, memory_format=torch.contiguous_format) if t is not None else u.new_empty(_EMPTY)
_GATES = ("pregate", "postgate", "skip")


def _fftconv_cpu(u, k, mode, pre, post, skip):
    """strux's CPU backend (strux.fftconv) on the tensors' memory."""
    _same("u", u, k=k, pregate=pre, postgate=post, skip=skip)
    y = _C.fftconv(_np(u), _np(k), mode=mode, pregate=_np(pre), postgate=_np(post),
                   skip=_np(skip))
    return _out(y, u.dtype)


def _fftconv_cpu_vjp(dy, u, k, mode, pre, post, skip):
    _same("u", u, dy=dy, k=k, pregate=pre, postgate=post, skip=skip)
    g = _C.fftconv_vjp(_np(dy), _np(u), _np(k), mode=mode, pregate=_np(pre),
                       postgate=_np(post), skip=_np(skip))
    return tuple(_out(x, u.dtype) for x in g)


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
        r = _fftconv_cpu_vjp(dy, u, k, mode, pregate, postgate, skip)
    return _filled(r, u)


@fftconv_backward.register_fake
def _(dy, u, k, mode, pregate, postgate, skip):
    return tuple(_like(t, u) for t in (u, k, pregate, postgate, skip))


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
    _ck_tensors(_ck_REAL, "u", u, _GATES, k=k, pregate=pregate, postgate=postgate, skip=skip)
    return _fftconv_op(u, k, mode, pregate, postgate, skip)


_HALF = (torch.float16, torch.bfloat16)


class FFTConv(torch.nn.Module):
    """Long depthwise FFT convolution as a module, in the manner of FlashFFTConv: made once per
    sequence length and dtype, with the filter passed on every call.

        conv = strux.torch.FFTConv(seqlen, dtype=torch.bfloat16)        # mode="causal" | "circular"
        y = conv(u, k, pregate=None, postgate=None, skip=None)

    u, pregate, postgate: (B, H, seqlen) of ``dtype``; k: (H, Lk) of ``dtype`` or float32 (a
    float32 filter with float16 / bfloat16 u is allowed: then u, the gates and skip are taken to
    float32 and the result returned in ``dtype``, so the arithmetic and the filter stay float32);
    skip: (H,). y = postgate ⊙ (k * v + skip ⊙ v), v = u ⊙ pregate (DESIGN.md fftconv). CPU and
    CUDA tensors (torch.ops.strux.fftconv, on strux's CPU or GPU backend), differentiable in
    every tensor argument. The module has no parameters: the filter is the caller's (often made
    per call by a filter network).
    """

    def __init__(self, seqlen: int, dtype: torch.dtype = torch.float32, mode: str = "causal"):
        super().__init__()
        if isinstance(seqlen, bool) or not isinstance(seqlen, int) or seqlen < 1:
            raise ValueError(f"argument 'seqlen': expected a positive integer, got {seqlen!r}")
        if dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
            raise TypeError(f"argument 'dtype': expected torch.float16, bfloat16, float32 or float64, got {dtype}")
        if mode not in ("causal", "circular"):
            raise ValueError(f"argument 'mode': expected one of 'causal', 'circular', got {mode!r}")
        self.seqlen, self.dtype, self.mode = seqlen, dtype, mode

    def forward(self, u: Tensor, k: Tensor, pregate: Optional[Tensor] = None, postgate: Optional[Tensor] = None,
                skip: Optional[Tensor] = None) -> Tensor:
        if not isinstance(u, Tensor):
            _ck_tensor("u", u, _ck_REAL)
        if u.dim() != 3 or u.shape[-1] != self.seqlen:
            raise ValueError(f"argument 'u': expected shape (B, H, {self.seqlen}) (seqlen of this FFTConv), "
                             f"got shape {tuple(u.shape)}")
        if u.dtype != self.dtype:
            raise TypeError(f"argument 'u': expected dtype {self.dtype} (the dtype of this FFTConv), got {u.dtype}")
        if isinstance(k, Tensor) and k.dtype == torch.float32 and u.dtype in _HALF:
            f32 = [None if t is None else t.float() for t in (u, pregate, postgate, skip)]
            return fftconv(f32[0], k, self.mode, *f32[1:]).to(u.dtype)
        return fftconv(u, k, self.mode, pregate, postgate, skip)

    def extra_repr(self) -> str:
        return f"seqlen={self.seqlen}, dtype={self.dtype}, mode={self.mode!r}"


# ---- fftconv_spectral: the filter as its lowest m frequencies, k_hat (H, m) complex ----------------

def _spectral_cpu_vjp(dy, u, k_hat, mode, pre, post, skip):
    _same("u", u, dy=dy, pregate=pre, postgate=post, skip=skip)
    g = _C.fftconv_spectral_vjp(_np(dy), _np(u), _np(k_hat), mode=mode, pregate=_np(pre),
                                postgate=_np(post), skip=_np(skip))
    return (_out(g[0], u.dtype), _out(g[1], k_hat.dtype), *(_out(x, u.dtype) for x in g[2:]))


@torch.library.custom_op("strux::fftconv_spectral", mutates_args=())
def _spectral_op(u: Tensor, k_hat: Tensor, mode: str = "causal", pregate: Optional[Tensor] = None,
                 postgate: Optional[Tensor] = None, skip: Optional[Tensor] = None) -> Tensor:
    if u.is_cuda:
        return _G.fftconv_spectral(u, k_hat, mode, pregate, postgate, skip)
    _same("u", u, pregate=pregate, postgate=postgate, skip=skip)
    y = _C.fftconv_spectral(_np(u), _np(k_hat), mode=mode, pregate=_np(pregate), postgate=_np(postgate),
                            skip=_np(skip))
    return _out(y, u.dtype)


@_spectral_op.register_fake
def _(u, k_hat, mode="causal", pregate=None, postgate=None, skip=None):
    return torch.empty_like(u, memory_format=torch.contiguous_format)


@torch.library.custom_op("strux::fftconv_spectral_backward", mutates_args=())
def fftconv_spectral_backward(dy: Tensor, u: Tensor, k_hat: Tensor, mode: str, pregate: Optional[Tensor],
                              postgate: Optional[Tensor], skip: Optional[Tensor]
                              ) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """(du, dk_hat, dpregate, dpostgate, dskip); empty tensors stand for inputs not given. dk_hat is
    PyTorch's gradient of a complex input (dL/dRe + i dL/dIm)."""
    if u.is_cuda:
        r = _G.fftconv_spectral_vjp(dy, u, k_hat, mode, pregate, postgate, skip)
    else:
        r = _spectral_cpu_vjp(dy, u, k_hat, mode, pregate, postgate, skip)
    return _filled(r, u)


@fftconv_spectral_backward.register_fake
def _(dy, u, k_hat, mode, pregate, postgate, skip):
    return tuple(_like(t, u) for t in (u, k_hat, pregate, postgate, skip))


def _spectral_bwd(ctx, dy):
    u, k_hat, pre, post, skip = ctx.saved_tensors
    du, dk, dpre, dpost, dskip = torch.ops.strux.fftconv_spectral_backward(dy.contiguous(), u, k_hat, ctx.mode, pre,
                                                                          post, skip)
    gp, go, gs = ctx.given
    return du, dk, None, dpre if gp else None, dpost if go else None, dskip if gs else None


_spectral_op.register_autograd(_spectral_bwd, setup_context=_fftconv_setup)


def fftconv_spectral(u: Tensor, k_hat: Tensor, mode: str = "causal", pregate: Optional[Tensor] = None,
                     postgate: Optional[Tensor] = None, skip: Optional[Tensor] = None) -> Tensor:
    """Differentiable strux.fftconv_spectral (torch.ops.strux.fftconv_spectral): u (B, H, L) real,
    k_hat (H, m) complex (complex64 with float16 / bfloat16 / float32 u, complex128 with float64),
    the filter's lowest m frequencies at n = L (circular) or 2L (causal)."""
    _ck_tensors(_ck_REAL, "u", u, _GATES, pregate=pregate, postgate=postgate, skip=skip)
    _ck_tensor("k_hat", k_hat, _ck_COMPLEX, u, "u")
    return _spectral_op(u, k_hat, mode, pregate, postgate, skip)
