"""strux::diag_scan and strux::block_circulant_scan (each with a backward op): torch custom ops
with autograd, and circulant_scan as a composition (strux.torch).

CUDA float32/float16/bfloat16 (and complex64 for diag_scan) run the strux kernels
(strux._cuda_scan) on the current stream; float64/complex128 and CPU tensors a plain PyTorch
time loop of the same formulas, so gradcheck in float64 checks the same op and the same
backward formulas. ``circulant_scan`` is rfft over n, the diag_scan op, irfft; its gradient
comes from autograd through these pieces.
"""
from typing import Optional, Tuple

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from .. import _cuda as _a
from .. import _cuda_scan as _S
from ._eager import LEAN as _LEAN, compiling as _compiling, plain_eager as _plain_eager

_FAST = (torch.float32, torch.float16, torch.bfloat16)


def _gpu(*ts, complex_ok=False) -> bool:
    ok = _FAST + ((torch.complex64,) if complex_ok else ())
    return all(t.is_cuda and t.dtype in ok for t in ts if t is not None) and _S.available()


# ---- diag_scan --------------------------------------------------------------------------------

def _ref_scan(a, b, h0):
    h = torch.zeros_like(b[:, 0]) if h0 is None else h0
    out = []
    for t in range(a.shape[1]):
        h = a[:, t] * h + b[:, t]
        out.append(h)
    return torch.stack(out, 1)


def _ref_scan_bwd(dh, a, h, h0):
    T = a.shape[1]
    g = torch.zeros_like(dh[:, 0])
    gs = [None] * T
    for t in range(T - 1, -1, -1):
        g = dh[:, t] + (a[:, t + 1].conj() * g if t + 1 < T else 0)
        gs[t] = g
    g = torch.stack(gs, 1)
    hp = torch.cat([(torch.zeros_like(h[:, :1]) if h0 is None else h0[:, None]), h[:, :-1]], 1)
    da = g * hp.conj()
    dh0 = None if h0 is None else a[:, 0].conj() * g[:, 0]
    return da, g, dh0


@torch.library.custom_op("strux::diag_scan", mutates_args=())
def _diag_scan(a: Tensor, b: Tensor, h0: Optional[Tensor]) -> Tensor:
    if _gpu(a, b, h0, complex_ok=True):
        return _S.diag_scan(a, b, h0=h0)
    return _ref_scan(a, b, h0)


@_diag_scan.register_fake
def _(a, b, h0):
    return torch.empty_like(b)


@torch.library.custom_op("strux::diag_scan_backward", mutates_args=())
def _diag_scan_bwd(dh: Tensor, a: Tensor, h: Tensor,
                   h0: Optional[Tensor]) -> Tuple[Tensor, Tensor, Tensor]:
    # dh0 comes back empty (0 elements) when there is no h0: custom ops return tensors.
    if _gpu(dh, a, h, h0, complex_ok=True):
        da, db, dh0 = _S._diag_bwd(dh.contiguous(), a.contiguous(), h.contiguous(), _a.contig(h0))
    else:
        da, db, dh0 = _ref_scan_bwd(dh, a, h, h0)
    return da, db, (a.new_empty(0) if dh0 is None else dh0)


@_diag_scan_bwd.register_fake
def _(dh, a, h, h0):
    return torch.empty_like(a), torch.empty_like(a), (a.new_empty(0) if h0 is None else torch.empty_like(h0))


def _scan_setup(ctx, inputs, output):
    a, b, h0 = inputs
    ctx.has_h0 = h0 is not None
    ctx.save_for_backward(a, output, h0 if h0 is not None else a.new_empty(0))


def _scan_backward(ctx, dh):
    a, h, h0 = ctx.saved_tensors
    da, db, dh0 = _diag_scan_bwd(dh.contiguous(), a, h, h0 if ctx.has_h0 else None)
    return da, db, (dh0 if ctx.has_h0 else None)


_diag_scan.register_autograd(_scan_backward, setup_context=_scan_setup)


class _DiagScanFn(torch.autograd.Function):
    """Eager autograd of diag_scan without the op dispatch (strux::diag_scan's kernels and
    backward formulas)."""

    @staticmethod
    def forward(ctx, a, b, h0):
        h = _S.diag_scan(a, b, h0=h0)
        ctx.has_h0 = h0 is not None
        ctx.save_for_backward(a, h, h0 if h0 is not None else a.new_empty(0))
        return h

    @staticmethod
    @once_differentiable
    def backward(ctx, dh):
        a, h, h0 = ctx.saved_tensors
        da, db, dh0 = _S._diag_bwd(dh.contiguous(), a, h, h0 if ctx.has_h0 else None)
        return da, db, dh0


_DIAG_GPU = _FAST + (torch.complex64,)


def diag_scan(a: Tensor, b: Tensor, h0: Optional[Tensor] = None, *, return_final: bool = False):
    """Differentiable h_t = a_t ⊙ h_{t-1} + b_t (B, T, n); returns h or (h, h[:, -1])."""
    if _LEAN and not _compiling() and type(a) in _a.TT and a.dtype in _DIAG_GPU and _plain_eager() \
            and (r := _S.diag_ok(a, b, h0)) is not None:
        if torch.is_grad_enabled() and (a.requires_grad or b.requires_grad or (h0 is not None and h0.requires_grad)):
            h = _DiagScanFn.apply(a, b, h0)
        else:
            h = _S.diag_fwd_torch(a, b, h0, r)
    else:
        h = _diag_scan(a, b, h0)
    return (h, h[:, -1]) if return_final else h


def circulant_scan(a: Tensor, u: Tensor, h0: Optional[Tensor] = None, *, return_final: bool = False):
    """Differentiable h_t = circ(a_t) h_{t-1} + u_t; a, u real (B, T, n). Via rfft -> diag_scan -> irfft."""
    n = a.shape[-1]
    cd = torch.float64 if a.dtype == torch.float64 else torch.float32
    A = torch.fft.rfft(a.to(cd), dim=-1)
    U = torch.fft.rfft(u.to(cd), dim=-1)
    H0 = None if h0 is None else torch.fft.rfft(h0.to(cd), dim=-1)
    h = torch.fft.irfft(diag_scan(A, U, H0), n=n, dim=-1).to(a.dtype)
    return (h, h[:, -1]) if return_final else h


# ---- block_circulant_scan ---------------------------------------------------------------------

def _ref_block_spectra(a, u, h0):
    """rfft over k: A (B, T, kf, p, p), U (B, T, kf, p), H0 (B, kf, p) or None; complex128 for
    float64 inputs, else complex64."""
    B, T, p, _, k = a.shape
    cd = torch.float64 if a.dtype == torch.float64 else torch.float32
    A = torch.fft.rfft(a.to(cd), dim=-1).permute(0, 1, 4, 2, 3)
    U = torch.fft.rfft(u.to(cd).reshape(B, T, p, k), dim=-1).transpose(-1, -2)
    H0 = None if h0 is None else torch.fft.rfft(h0.to(cd).reshape(B, p, k), dim=-1).transpose(-1, -2)
    return A, U, H0


def _ref_block_states(A, U, H0):
    """Per frequency H_t = A_t H_{t-1} + U_t as a time loop; (B, T, kf, p)."""
    H = torch.zeros_like(U[:, 0]) if H0 is None else H0
    hs = []
    for t in range(A.shape[1]):
        H = (A[:, t] @ H.unsqueeze(-1)).squeeze(-1) + U[:, t]
        hs.append(H)
    return torch.stack(hs, 1)


def _ref_block_scan(a, u, h0):
    B, T, p, _, k = a.shape
    A, U, H0 = _ref_block_spectra(a, u, h0)
    H = _ref_block_states(A, U, H0).transpose(-1, -2)
    return torch.fft.irfft(H, n=k, dim=-1).reshape(B, T, p * k).to(u.dtype)


def _ref_block_scan_bwd(dh, a, u, h0):
    """The GPU backward's formulas as a PyTorch time loop: G_t = D_t + A_{t+1}^H G_{t+1},
    da_hat_t = G_t conj(H_{t-1}), dh0_hat = A_0^H G_0, each gradient the irfft of its (exact)
    half spectrum."""
    B, T, p, _, k = a.shape
    A, U, H0 = _ref_block_spectra(a, u, h0)
    H = _ref_block_states(A, U, H0)
    D = torch.fft.rfft(dh.to(A.real.dtype).reshape(B, T, p, k), dim=-1).transpose(-1, -2)
    AH = A.conj().transpose(-1, -2)
    g, gs = torch.zeros_like(D[:, 0]), [None] * T
    for t in range(T - 1, -1, -1):
        g = D[:, t] + ((AH[:, t + 1] @ g.unsqueeze(-1)).squeeze(-1) if t + 1 < T else 0)
        gs[t] = g
    G = torch.stack(gs, 1)
    Hp = torch.cat([torch.zeros_like(H[:, :1]) if H0 is None else H0[:, None], H[:, :-1]], 1)
    X = G.unsqueeze(-1) * Hp.conj().unsqueeze(-2)                          # (B, T, kf, p, p)
    if H0 is None:  # h_{-1} = 0: da_0 is 0 exactly (as on the GPU and the CPU backend)
        X = torch.cat([torch.zeros_like(X[:, :1]), X[:, 1:]], 1)
    da = torch.fft.irfft(X.permute(0, 1, 3, 4, 2), n=k, dim=-1).to(a.dtype)
    du = torch.fft.irfft(G.transpose(-1, -2), n=k, dim=-1).reshape(B, T, p * k).to(u.dtype)
    if h0 is None:
        return da, du, None
    G0 = (AH[:, 0] @ G[:, 0].unsqueeze(-1)).squeeze(-1).transpose(-1, -2)  # (B, p, kf)
    return da, du, torch.fft.irfft(G0, n=k, dim=-1).reshape(B, p * k).to(h0.dtype)


@torch.library.custom_op("strux::block_circulant_scan", mutates_args=())
def _block_scan(a: Tensor, u: Tensor, h0: Optional[Tensor]) -> Tensor:
    if _gpu(a, u, h0):
        return _S.block_circulant_scan(a, u, h0=h0)
    return _ref_block_scan(a, u, h0)


@_block_scan.register_fake
def _(a, u, h0):
    return torch.empty_like(u)


@torch.library.custom_op("strux::block_circulant_scan_backward", mutates_args=())
def _block_scan_bwd(dh: Tensor, a: Tensor, u: Tensor,
                    h0: Optional[Tensor]) -> Tuple[Tensor, Tensor, Tensor]:
    # dh0 comes back empty (0 elements) when there is no h0: custom ops return tensors.
    if _gpu(dh, a, u, h0):
        da, du, dh0 = _S.block_circulant_scan_vjp(dh, a, u, h0=h0)
    else:
        da, du, dh0 = _ref_block_scan_bwd(dh, a, u, h0)
    return da, du, (a.new_empty(0) if dh0 is None else dh0)


@_block_scan_bwd.register_fake
def _(dh, a, u, h0):
    return torch.empty_like(a), torch.empty_like(u), (a.new_empty(0) if h0 is None else torch.empty_like(h0))


def _block_setup(ctx, inputs, output):
    a, u, h0 = inputs
    ctx.has_h0 = h0 is not None
    ctx.save_for_backward(a, u, h0 if h0 is not None else a.new_empty(0))


def _block_backward(ctx, dh):
    a, u, h0 = ctx.saved_tensors
    da, du, dh0 = _block_scan_bwd(dh.contiguous(), a, u, h0 if ctx.has_h0 else None)
    return da, du, (dh0 if ctx.has_h0 else None)


_block_scan.register_autograd(_block_backward, setup_context=_block_setup)


def block_circulant_scan(a: Tensor, u: Tensor, h0: Optional[Tensor] = None, *, return_final: bool = False):
    """Differentiable block-circulant recurrence; a (B, T, p, p, k), u (B, T, n = p k), h0 (B, n).

    Per frequency f of the k-point rfft: ĥ_t[:, f] = Â_t[:, :, f] ĥ_{t-1}[:, f] + û_t[:, f]. CUDA
    float32/float16/bfloat16 run strux's native kernels forward and backward (the backward
    recomputes h); other dtypes and CPU tensors run the same formulas as a PyTorch time loop.
    """
    h = _block_scan(a, u, h0)
    return (h, h[:, -1]) if return_final else h
