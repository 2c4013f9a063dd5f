"""strux::diag_scan, strux::circulant_scan and strux::block_circulant_scan (each with a backward
op): torch custom ops with autograd (strux.torch).

CUDA tensors run strux's GPU path (strux._cuda_scan) on the current stream; CPU tensors strux's
CPU backend (strux.diag_scan / circulant_scan / block_circulant_scan and their _vjp functions)
on the tensors' memory (strux.torch._host): float16 / bfloat16 computed in float32 and returned
in the input dtype, as strux does. Usable under torch.compile (fake kernels registered) and
CUDA graph capture.
"""
from typing import Optional, Tuple

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from .. import _cuda as _a
from .. import _cuda_scan as _S
from .. import scan as _C
from ._check import COMPLEX as _ck_COMPLEX, REAL as _ck_REAL, REAL_OR_COMPLEX as _ck_REAL_OR_COMPLEX, tensor as _ck_tensor, tensors as _ck_tensors
from ._host import empty as _empty, np_in as _np, same_dtype as _same, t_out as _out
from ._baseline import ref_block_scan as _ref_block_scan  # noqa: F401  (the benchmark's baseline)
from ._eager import LEAN as _LEAN, compiling as _compiling, plain_eager as _plain_eager


_H0 = ("h0",)  # the optional tensor of every scan (None: zero initial state)


def _opt_out(g, ref):
    """An optional gradient as a tensor (empty when absent: custom ops return tensors)."""
    return _empty(ref) if g is None else g


# ---- diag_scan --------------------------------------------------------------------------------

def _cpu_diag(a, b, h0):
    out = torch.promote_types(a.dtype, b.dtype)
    h = _C.diag_scan(_np(a), _np(b), h0=_np(h0))
    return _out(h, out)


def _cpu_diag_bwd(dh, a, b, h0):
    da, db, dh0 = _C.diag_scan_vjp(_np(dh), _np(a), _np(b), h0=_np(h0))
    return _out(da, a.dtype), _out(db, b.dtype), (None if h0 is None else _out(dh0, h0.dtype))


@torch.library.custom_op("strux::diag_scan", mutates_args=())
def _diag_scan(a: Tensor, b: Tensor, h0: Optional[Tensor]) -> Tensor:
    if a.is_cuda:
        return _S.diag_scan(a, b, h0=h0)
    return _cpu_diag(a, b, h0)


@_diag_scan.register_fake
def _(a, b, h0):
    return b.new_empty(b.shape, dtype=torch.promote_types(a.dtype, b.dtype))


@torch.library.custom_op("strux::diag_scan_backward", mutates_args=())
def _diag_scan_bwd(dh: Tensor, a: Tensor, b: Tensor, h: Tensor,
                   h0: Optional[Tensor]) -> Tuple[Tensor, Tensor, Tensor]:
    """(da, db, dh0); the GPU reads the forward's output h, the CPU recomputes it from b (the
    other one may be an empty tensor). dh0 is empty when there is no h0."""
    if a.is_cuda:
        da, db, dh0 = _S._diag_bwd(dh.contiguous(), a.contiguous(), h.contiguous(), _a.contig(h0))
    else:
        da, db, dh0 = _cpu_diag_bwd(dh, a, b, h0)
    return da, db, _opt_out(dh0, a)


@_diag_scan_bwd.register_fake
def _(dh, a, b, h, h0):
    return torch.empty_like(a), torch.empty_like(a if a.is_cuda else b), \
        (a.new_empty(0) if h0 is None else torch.empty_like(h0))


def _scan_setup(ctx, inputs, output):
    a, b, h0 = inputs
    ctx.has_h0 = h0 is not None
    none = a.new_empty(0)
    # Saved: what this device's backward reads (the GPU the output h, the CPU the input b).
    ctx.save_for_backward(a, none if a.is_cuda else b, output if a.is_cuda else none,
                          h0 if h0 is not None else none)


def _scan_backward(ctx, dh):
    a, b, h, h0 = ctx.saved_tensors
    da, db, dh0 = _diag_scan_bwd(dh.contiguous(), a, b, h, h0 if ctx.has_h0 else None)
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


_DIAG_GPU = (torch.float32, torch.float16, torch.bfloat16, torch.complex64)


def diag_scan(a: Tensor, b: Tensor, h0: Optional[Tensor] = None, *, axis: int = 1, reverse: bool = False,
              return_final: bool = False):
    """Differentiable h_t = a_t ⊙ h_{t-1} + b_t (B, T, n); returns h or (h, h_last), h_last the
    final state. ``axis``, ``reverse`` and an ``a`` broadcasting to b's shape as in strux.diag_scan:
    differentiable torch layout maps around the op (a copy; in eager mode, time-last CUDA tensors
    with time forwards and ``a`` not broadcast run as B * n rows of time without one where the plan
    takes its row kernel)."""
    if return_final is not False:
        _C._flag(return_final, "return_final")
    if not _C._plain(a, b, axis, reverse):
        _ck_tensors(_ck_REAL_OR_COMPLEX, "a", a, _H0, b=b, h0=h0)
        t, flip, shape = _C._layout(tuple(a.shape), tuple(b.shape), axis, reverse)
        # time-last CUDA tensors as rows, no copies (eager only: the plan query is not traceable)
        if not _compiling() and _C._rows_view(a, b, h0, t, flip, shape,
                                              cuda=a.is_cuda and b.is_cuda and (h0 is None or h0.is_cuda)):
            B, n, T = b.shape
            h = diag_scan(_C._as_rows(a, B, n), _C._as_rows(b, B, n), _C._as_rows(h0, B, n)).reshape(B, n, T)
            return (h, h[:, :, -1]) if return_final else h
        h = diag_scan(_C._relayout(a, t, flip, True, shape), _C._relayout(b, t, flip, True), h0)
        return (_C._relayout(h, t, flip, False), h[:, -1]) if return_final else _C._relayout(h, t, flip, False)
    if _LEAN and not _compiling() and type(a) in _a.TT and a.dtype in _DIAG_GPU and _plain_eager() \
            and (r := _S.diag_ok(a, b, h0)) is not None:
        if torch.is_grad_enabled() and (a.requires_grad or b.requires_grad or (h0 is not None and h0.requires_grad)):
            h = _DiagScanFn.apply(a, b, h0)
        else:
            h = _S.diag_fwd_torch(a, b, h0, r)
    else:
        _ck_tensors(_ck_REAL_OR_COMPLEX, "a", a, _H0, b=b, h0=h0)
        h = _diag_scan(a, b, h0)
    return (h, h[:, -1]) if return_final else h


# ---- circulant_scan ---------------------------------------------------------------------------

@torch.library.custom_op("strux::circulant_scan", mutates_args=())
def _circ_scan(a: Tensor, u: Tensor, h0: Optional[Tensor], fourier: bool) -> Tensor:
    if u.is_cuda:
        return _S.circulant_scan(a, u, h0=h0, fourier=fourier)
    _same("u", u, h0=h0, **({} if fourier else {"a": a}))
    return _out(_C.circulant_scan(_np(a), _np(u), h0=_np(h0), fourier=fourier), u.dtype)


@_circ_scan.register_fake
def _(a, u, h0, fourier):
    return torch.empty_like(u)


@torch.library.custom_op("strux::circulant_scan_backward", mutates_args=())
def _circ_scan_bwd(dh: Tensor, a: Tensor, u: Tensor, h0: Optional[Tensor],
                   fourier: bool) -> Tuple[Tensor, Tensor, Tensor]:
    """(da, du, dh0); dh0 is empty when there is no h0. With fourier=True da is complex, PyTorch's
    packing of a complex leaf's gradient."""
    if u.is_cuda:
        da, du, dh0 = _S.circulant_scan_vjp(dh, a, u, h0=h0, fourier=fourier)
    else:
        _same("u", u, dh=dh, h0=h0, **({} if fourier else {"a": a}))
        da, du, dh0 = _C.circulant_scan_vjp(_np(dh), _np(a), _np(u), h0=_np(h0),
                                            fourier=fourier)
        da, du = _out(da, a.dtype), _out(du, u.dtype)
        dh0 = None if h0 is None else _out(dh0, h0.dtype)
    return da, du, _opt_out(dh0, u)


@_circ_scan_bwd.register_fake
def _(dh, a, u, h0, fourier):
    return torch.empty_like(a), torch.empty_like(u), (u.new_empty(0) if h0 is None else torch.empty_like(h0))


def _circ_setup(ctx, inputs, output):
    a, u, h0, fourier = inputs
    ctx.has_h0, ctx.fourier = h0 is not None, fourier
    ctx.save_for_backward(a, u, h0 if h0 is not None else u.new_empty(0))


def _circ_backward(ctx, dh):
    a, u, h0 = ctx.saved_tensors
    da, du, dh0 = _circ_scan_bwd(dh.contiguous(), a, u, h0 if ctx.has_h0 else None, ctx.fourier)
    return da, du, (dh0 if ctx.has_h0 else None), None


_circ_scan.register_autograd(_circ_backward, setup_context=_circ_setup)


class _CircScanFn(torch.autograd.Function):
    """Eager autograd of circulant_scan without the op dispatch (strux::circulant_scan's kernels
    and backward formulas)."""

    @staticmethod
    def forward(ctx, a, u, h0, fourier, dev):
        ctx.has_h0, ctx.fourier = h0 is not None, fourier
        ctx.save_for_backward(a, u, h0 if h0 is not None else u.new_empty(0))
        return _S.circ_fwd_torch(a, u, h0, fourier, dev)

    @staticmethod
    @once_differentiable
    def backward(ctx, dh):
        a, u, h0 = ctx.saved_tensors
        da, du, dh0 = _S.circulant_scan_vjp(dh.contiguous(), a, u, h0=h0 if ctx.has_h0 else None,
                                            fourier=ctx.fourier)
        return da, du, dh0, None, None


def circulant_scan(a: Tensor, u: Tensor, h0: Optional[Tensor] = None, *, fourier: bool = False,
                   return_final: bool = False):
    """Differentiable h_t = circ(a_t) h_{t-1} + u_t; u (B, T, n) real, a (B, T, n) real or, with
    ``fourier=True``, its half spectrum (B, T, n//2 + 1) complex (strux.circulant_scan). In eager
    mode, float32 CUDA tensors that pass strux._cuda_scan.circ_ok as they are skip the op dispatch
    (the same kernels and backward)."""
    if _LEAN and (fourier is True or fourier is False) and type(u) in _a.TT and not _compiling() \
            and _plain_eager() and (dev := _S.circ_ok(a, u, h0, fourier)) is not None:
        return_final = return_final if type(return_final) is bool else _C._flag(return_final, "return_final")
        if torch.is_grad_enabled() and (a.requires_grad or u.requires_grad or (h0 is not None and h0.requires_grad)):
            h = _CircScanFn.apply(a, u, h0, fourier, dev)
        else:
            h = _S.circ_fwd_torch(a, u, h0, fourier, dev)
        return (h, h[:, -1]) if return_final else h
    fourier, return_final = _C._flag(fourier, "fourier"), _C._flag(return_final, "return_final")
    _ck_tensors(_ck_REAL, "u", u, _H0, h0=h0)
    _ck_tensor("a", a, _ck_COMPLEX if fourier else _ck_REAL, u, "u")
    h = _circ_scan(a, u, h0, fourier)
    return (h, h[:, -1]) if return_final else h


# ---- block_circulant_scan ---------------------------------------------------------------------

def _cpu_block_scan(a, u, h0):
    _same("u", u, a=a, h0=h0)
    return _out(_C.block_circulant_scan(_np(a), _np(u), h0=_np(h0)), u.dtype)


def _cpu_block_scan_bwd(dh, a, u, h0):
    _same("u", u, a=a, h0=h0, dh=dh)
    da, du, dh0 = _C.block_circulant_scan_vjp(_np(dh), _np(a), _np(u), h0=_np(h0))
    return _out(da, a.dtype), _out(du, u.dtype), (None if h0 is None else _out(dh0, h0.dtype))


@torch.library.custom_op("strux::block_circulant_scan", mutates_args=())
def _block_scan(a: Tensor, u: Tensor, h0: Optional[Tensor]) -> Tensor:
    if u.is_cuda:
        return _S.block_circulant_scan(a, u, h0=h0)
    return _cpu_block_scan(a, u, h0)


@_block_scan.register_fake
def _(a, u, h0):
    return torch.empty_like(u)


@torch.library.custom_op("strux::block_circulant_scan_backward", mutates_args=())
def _block_scan_bwd(dh: Tensor, a: Tensor, u: Tensor,
                    h0: Optional[Tensor]) -> Tuple[Tensor, Tensor, Tensor]:
    """(da, du, dh0); dh0 is empty when there is no h0."""
    if u.is_cuda:
        da, du, dh0 = _S.block_circulant_scan_vjp(dh, a, u, h0=h0)
    else:
        da, du, dh0 = _cpu_block_scan_bwd(dh, a, u, h0)
    return da, du, _opt_out(dh0, a)


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
    tensors run strux's GPU kernels forward and backward (the backward recomputes h), CPU
    tensors strux's CPU backend.
    """
    return_final = _C._flag(return_final, "return_final")
    _ck_tensors(_ck_REAL, "u", u, _H0, a=a, h0=h0)
    h = _block_scan(a, u, h0)
    return (h, h[:, -1]) if return_final else h
