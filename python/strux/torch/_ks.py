"""strux::ks_matmul and strux::ks_chain (each with a backward op): torch custom ops with autograd,
and KSLinear (strux.torch).

CUDA tensors run strux's GPU path (strux._cuda_ks) on the current stream; CPU tensors strux's
CPU backend (strux.ks_matmul / ks_matmul_vjp / ks_chain / ks_chain_vjp) on the tensors' memory
(strux.torch._host). Usable under torch.compile (fake kernels registered) and CUDA graph capture.
"""
import math
from typing import List, Tuple

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from .. import _cuda as _a
from .. import _cuda_ks as _K
from .._cuda_options import ks_code as _ks_code
from .. import ks as _C
from ._check import REAL as _ck_REAL, tensor as _ck_tensor, tensor_list as _ck_tensor_list, tensors as _ck_tensors
from ._host import np_in as _np, same_dtype as _same, t_out as _out
from ._eager import LEAN as _LEAN, compiling as _compiling, plain_eager as _plain_eager

_K.fast_types(torch.empty(0))  # the cheap checks' torch types (strux._cuda_ks)

def _lay(batch_last: bool) -> str:
    return "bsl" if batch_last else "bsf"


# ---- CPU tensors: strux's CPU backend -----------------------------------------------------------

def _cpu_ks(x, w, p, batch_last):
    _same("x", x, w=w)
    return _out(_C.ks_matmul(_np(x), _np(w), p, layout=_lay(batch_last)), x.dtype)


def _cpu_ks_bwd(dy, x, w, p, batch_last):
    _same("x", x, w=w, dy=dy)
    dx, dw = _C.ks_matmul_vjp(_np(dy), _np(x), _np(w), p, layout=_lay(batch_last))
    return _out(dx, x.dtype), _out(dw, w.dtype)


def _cpu_chain(x, ws, ps, batch_last):
    _same("x", x, **{f"ws[{q}]": w for q, w in enumerate(ws)})
    return _out(_C.ks_chain(_np(x), [_np(w) for w in ws], ps, layout=_lay(batch_last)), x.dtype)


def _cpu_chain_bwd(dy, x, ws, ps, batch_last):
    _same("x", x, dy=dy, **{f"ws[{q}]": w for q, w in enumerate(ws)})
    dx, dws = _C.ks_chain_vjp(_np(dy), _np(x), [_np(w) for w in ws], ps, layout=_lay(batch_last))
    return [_out(dx, x.dtype)] + [_out(g, w.dtype) for g, w in zip(dws, ws)]


# ---- ks_matmul --------------------------------------------------------------------------------

@torch.library.custom_op("strux::ks_matmul", mutates_args=())
def _ks_matmul(x: Tensor, w: Tensor, pattern: List[int], batch_last: bool) -> Tensor:
    if x.is_cuda:
        return _K.ks_matmul(x, w, pattern, layout=_lay(batch_last))
    return _cpu_ks(x, w, pattern, batch_last)


@_ks_matmul.register_fake
def _(x, w, pattern, batch_last):
    a, b, c, d = pattern
    return x.new_empty((a * b * d, x.shape[1]) if batch_last else (x.shape[0], a * b * d))


@torch.library.custom_op("strux::ks_matmul_backward", mutates_args=())
def _ks_matmul_bwd(dy: Tensor, x: Tensor, w: Tensor, pattern: List[int],
                   batch_last: bool) -> Tuple[Tensor, Tensor]:
    if x.is_cuda:
        return _K.ks_matmul_vjp(dy, x, w, pattern, layout=_lay(batch_last))
    return _cpu_ks_bwd(dy, x, w, pattern, batch_last)


@_ks_matmul_bwd.register_fake
def _(dy, x, w, pattern, batch_last):
    return torch.empty_like(x), torch.empty_like(w)


def _ks_setup(ctx, inputs, output):
    x, w, pattern, batch_last = inputs
    ctx.save_for_backward(x, w)
    ctx.pattern, ctx.batch_last = list(pattern), batch_last


def _ks_backward(ctx, dy):
    x, w = ctx.saved_tensors
    dx, dw = _ks_matmul_bwd(dy.contiguous(), x, w, ctx.pattern, ctx.batch_last)
    return dx, dw, None, None


_ks_matmul.register_autograd(_ks_backward, setup_context=_ks_setup)


class _KsMatmulFn(torch.autograd.Function):
    """Eager autograd of ks_matmul on the lean path (strux::ks_matmul's formulas, no op dispatch);
    the backward computes only the gradients asked for."""

    @staticmethod
    def forward(ctx, x, w, p, bl, r):
        ctx.save_for_backward(x, w)
        ctx.p, ctx.bl = p, bl
        return _K.ks_forward(x, w, p, bl, *r)

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        nx, nw = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        dy = dy.contiguous()
        r = _K.vjp_ok(dy, x, w, ctx.p, ctx.bl)
        if r is None:  # not expected (autograd hands dy in y's dtype and device): the checked op
            dx, dw = _ks_matmul_bwd(dy, x, w, list(ctx.p), ctx.bl)
        else:
            dx, dw = _K.ks_backward(dy, x, w, ctx.p, ctx.bl, *r, nx, nw)
        return (dx if nx else None), (dw if nw else None), None, None, None


def ks_matmul(x: Tensor, w: Tensor, pattern, *, layout: str = "bsf") -> Tensor:
    """Differentiable KS factor product: ``x @ K.T`` ("bsf") or ``K @ x`` ("bsl")."""
    p, bl = _K.fast_pattern(pattern), _K.fast_layout(layout)  # plain type checks (Dynamo traces them too)
    if p is not None and bl is not None and _LEAN and not _compiling() and type(x) in _a.TT and _plain_eager():
        r = _K.ks_ok(x, w, p, bl)  # w's shape is p: the pattern's sizes are those of a tensor
        if r is not None:
            if torch.is_grad_enabled() and (x.requires_grad or w.requires_grad):
                return _KsMatmulFn.apply(x, w, p, bl, r)
            return _K.ks_forward(x, w, p, bl, *r)
    # The full checks: the pattern's range (fast_pattern has no upper bound), then the tensors.
    p = list(_K._pattern(pattern))
    bl = _K._choice(layout, "layout", _K._LAYOUTS) == "bsl"
    _ck_tensors(_ck_REAL, "x", x, w=w)
    return _ks_matmul(x, w, p, bl)


# ---- ks_chain ---------------------------------------------------------------------------------

def _unflat(flat):
    return [flat[4 * q:4 * q + 4] for q in range(len(flat) // 4)]


@torch.library.custom_op("strux::ks_chain", mutates_args=())
def _ks_chain(x: Tensor, ws: List[Tensor], patterns: List[int], batch_last: bool) -> Tensor:
    if x.is_cuda:
        return _K.ks_chain(x, ws, _unflat(patterns), layout=_lay(batch_last))
    return _cpu_chain(x, ws, _unflat(patterns), batch_last)


@_ks_chain.register_fake
def _(x, ws, patterns, batch_last):
    a, b, _, d = patterns[:4]
    return x.new_empty((a * b * d, x.shape[1]) if batch_last else (x.shape[0], a * b * d))


@torch.library.custom_op("strux::ks_chain_backward", mutates_args=())
def _ks_chain_bwd(dy: Tensor, x: Tensor, ws: List[Tensor], patterns: List[int],
                  batch_last: bool) -> List[Tensor]:
    ps = _unflat(patterns)
    if x.is_cuda:
        dx, dws = _K.ks_chain_vjp(dy, x, ws, ps, layout=_lay(batch_last))
        return [dx] + dws
    return _cpu_chain_bwd(dy, x, ws, ps, batch_last)


@_ks_chain_bwd.register_fake
def _(dy, x, ws, patterns, batch_last):
    return [torch.empty_like(x)] + [torch.empty_like(w) for w in ws]


def _chain_setup(ctx, inputs, output):
    x, ws, patterns, batch_last = inputs
    ctx.save_for_backward(x, *ws)
    ctx.patterns, ctx.batch_last = list(patterns), batch_last


def _chain_backward(ctx, dy):
    x, *ws = ctx.saved_tensors
    out = _ks_chain_bwd(dy.contiguous(), x, list(ws), ctx.patterns, ctx.batch_last)
    return out[0], list(out[1:]), None, None


_ks_chain.register_autograd(_chain_backward, setup_context=_chain_setup)


class _KsChainFn(torch.autograd.Function):
    """Eager autograd of ks_chain on the lean path (strux::ks_chain's formulas: the backward
    recomputes the intermediates), gradients only where asked for. ws come last (*ws) so that
    autograd tracks each."""

    @staticmethod
    def forward(ctx, x, ps, flat, bl, r, *ws):
        ctx.save_for_backward(x, *ws)
        ctx.ps, ctx.flat, ctx.bl = ps, flat, bl
        return _K.chain_forward(x, ws, ps, flat, bl, *r)

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        x, *ws = ctx.saved_tensors
        need = ctx.needs_input_grad
        dy = dy.contiguous()
        r = _K.chain_vjp_ok(dy, x, ws, ctx.ps, ctx.bl)
        if r is None:  # not expected: the checked op
            out = _ks_chain_bwd(dy, x, ws, ctx.flat, ctx.bl)
            dx, dws = out[0], out[1:]
        else:
            dx, dws = _K.chain_backward(dy, x, ws, ctx.ps, ctx.flat, ctx.bl, *r, need[0], need[5:])
        return (dx if need[0] else None, None, None, None, None,
                *(g if n else None for g, n in zip(dws, need[5:])))


def _chain_lean(x, ws, ps, flat, bl, opts=0):
    """The chain on the lean path, or None when it does not apply (see _plain_eager). opts: packed
    GPU plan options (strux._cuda_options.ks_code) for the forward."""
    if not _LEAN or _compiling() or type(x) not in _a.TT or not _plain_eager():
        return None
    r = _K.chain_ok(x, ws, ps, bl)
    if r is None:
        return None
    if opts:
        r = (*r, opts)  # chain_forward's argument after (batch, dtype, device)
    if torch.is_grad_enabled() and (x.requires_grad or any(w.requires_grad for w in ws)):
        return _KsChainFn.apply(x, ps, flat, bl, r, *ws)
    return _K.chain_forward(x, ws, ps, flat, bl, *r)


def ks_chain(x: Tensor, ws, patterns, *, layout: str = "bsf") -> Tensor:
    """Differentiable chain ``x @ (K_1 ⋯ K_P).T`` ("bsf") or ``K_1 ⋯ K_P @ x`` ("bsl")."""
    pf, bl = _K.fast_patterns(patterns), _K.fast_layout(layout)
    if pf is not None and bl is not None:
        y = _chain_lean(x, ws, pf[0], pf[1], bl)
        if y is not None:
            return y
    # The full checks: the patterns' range (fast_patterns has no upper bound), then the tensors.
    ps = _K._patterns(patterns)
    bl = _K._choice(layout, "layout", _K._LAYOUTS) == "bsl"
    _ck_tensor("x", x, _ck_REAL)
    _ck_tensor_list("ws", ws, _ck_REAL, x, "x")
    return _ks_chain(x, list(ws), [v for p in ps for v in p], bl)


_ORDERS = ("strux", "ksmm")
_MAX_BYTES = 2**62  # the sizes strux indexes (strux._ks_pattern bounds the values alike)


def _new_weight(q: int, p, kw) -> Tensor:
    """An uninitialised weight of pattern p; a size torch cannot hold is a ValueError and a failed
    allocation a MemoryError, each naming the pattern and the bytes (not torch's RuntimeError)."""
    n = p[0] * p[1] * p[2] * p[3]
    nbytes = n * torch.empty(0, dtype=kw["dtype"]).element_size()
    if nbytes > _MAX_BYTES:
        raise ValueError(f"argument 'patterns': patterns[{q}] {p} needs a weight of {n} values ({nbytes} bytes), "
                         f"more than strux indexes (2^62 bytes)")
    try:
        return torch.empty(p, **kw)
    except RuntimeError as e:
        if isinstance(e, getattr(torch, "OutOfMemoryError", ())) or "alloc" in str(e).lower():
            raise MemoryError(f"argument 'patterns': patterns[{q}] {p}: could not allocate its weight of "
                              f"{nbytes} bytes") from e
        raise


class KSLinear(nn.Module):
    """A linear layer whose weight is a chain of Kronecker-sparse factors K = K_1 ⋯ K_P (+ bias).

    Pattern order: with ``order="strux"`` (default, DESIGN.md) ``patterns`` lists K_1 … K_P in
    the order of the product, so K_P is applied to the input first, as in ks_chain:
    y = x (K_1 ⋯ K_P)ᵀ + bias. With ``order="ksmm"`` (the ksmm library's order) the list is
    read the other way round: the first pattern listed is applied first. ``weights`` (optional)
    are initial values, one tensor per pattern shaped like it, listed in the same order as
    ``patterns``; they are copied. Without them each factor is uniform in [-1, 1] / sqrt(c).

    Whatever the order given, the module stores ``patterns`` and ``weights`` (a ParameterList) in
    the product order K_1 … K_P. in_features = a_P c_P d_P, out_features = a_1 b_1 d_1.
    Batch-size-first (``layout="bsf"``, default): input (..., in_features) -> (...,
    out_features), like nn.Linear. Batch-size-last (``"bsl"``): input (in_features, batch) ->
    (out_features, batch).

    Builders: strux.torch.monarch(n, nblocks) and strux.torch.butterfly(n, radix) give patterns
    in the product order, e.g. ``KSLinear(strux.torch.monarch(1024, 32))``.

    ``options`` (optional): the GPU plans' explicit choices (strux._cuda_options.ks_code), e.g.
    ``{"chain": "fused"}`` to run a 2-factor forward as one kernel; used by the eager CUDA path.
    """

    def __init__(self, patterns, bias: bool = True, layout: str = "bsf", weights=None, order: str = "strux",
                 device=None, dtype=None, options=None):
        super().__init__()
        self._opts = _ks_code(options)  # checked here; used by the eager CUDA forward
        order = _K._choice(order, "order", _ORDERS)
        if order == "ksmm" and isinstance(patterns, (list, tuple)):
            patterns = list(patterns)[::-1]   # checked below in the product order
        self.patterns = [tuple(p) for p in _K._patterns(patterns)]
        self.layout = _K._choice(layout, "layout", _K._LAYOUTS)
        self.order = order
        self.in_features = _K._cols(self.patterns[-1])
        self.out_features = _K._rows(self.patterns[0])
        kw = {"device": device, "dtype": dtype}
        if weights is None:
            # Each factor scaled by 1/sqrt(c): the chain keeps the variance of nn.Linear's init order.
            ws = [_new_weight(q, p, kw).uniform_(-1, 1) / math.sqrt(p[2]) for q, p in enumerate(self.patterns)]
        else:
            ws = self._initial(weights, order, kw)
        self.weights = nn.ParameterList([nn.Parameter(w) for w in ws])
        if bias:
            ref = ws[0]
            self.bias = nn.Parameter(torch.zeros(self.out_features, device=ref.device, dtype=ref.dtype))
        else:
            self.bias = None
        # The validated patterns in the lean path's form, made once (the patterns are fixed at
        # construction: the weights' shapes come from them, and every call checks those).
        self._lean = _K.fast_patterns(self.patterns)

    def _initial(self, weights, order, kw):
        """Copies of the given weights in the product order, checked against the patterns."""
        P = len(self.patterns)
        if isinstance(weights, Tensor) or not hasattr(weights, "__len__") or len(weights) != P:
            got = type(weights).__name__ if not hasattr(weights, "__len__") or isinstance(weights, Tensor) \
                else f"{len(weights)} tensors"
            raise ValueError(f"argument 'weights': expected a list of {P} tensors (one per pattern), got {got}")
        ws = list(weights) if order == "strux" else list(weights)[::-1]
        out = []
        for q, (w, p) in enumerate(zip(ws, self.patterns)):
            q_listed = q if order == "strux" else P - 1 - q
            if not isinstance(w, Tensor):
                raise TypeError(f"argument 'weights': expected tensors, got {type(w).__name__} at index {q_listed}")
            if tuple(w.shape) != p:
                raise ValueError(f"argument 'weights': expected weights[{q_listed}] of shape {p} (its pattern), "
                                 f"got {tuple(w.shape)}")
            if not w.is_floating_point():
                raise TypeError(f"argument 'weights': expected a floating dtype, got {w.dtype} at index {q_listed}")
            out.append(w.detach().to(device=kw["device"] or w.device, dtype=kw["dtype"] or w.dtype, copy=True))
        dts = {w.dtype for w in out}
        devs = {w.device for w in out}
        if len(dts) > 1 or len(devs) > 1:
            raise TypeError(f"argument 'weights': expected one dtype and device for all, got {sorted(map(str, dts))} "
                            f"on {sorted(map(str, devs))}")
        return out

    def _chain(self, x: Tensor) -> Tensor:
        ws = list(self.weights)
        bl = self.layout == "bsl"
        y = None if self._lean is None else _chain_lean(x, ws, self._lean[0], self._lean[1], bl, self._opts)
        return ks_chain(x, ws, self.patterns, layout=self.layout) if y is None else y

    def forward(self, x: Tensor) -> Tensor:
        if not isinstance(x, Tensor):
            _ck_tensor("x", x, _ck_REAL)
        if self.layout == "bsl":
            y = self._chain(x)
            return y if self.bias is None else y + self.bias[:, None]
        if x.dim() == 2:  # (batch, in_features): no reshapes
            y = self._chain(x)
        else:
            lead = x.shape[:-1]
            y = self._chain(x.reshape(-1, self.in_features)).reshape(*lead, self.out_features)
        return y if self.bias is None else y + self.bias

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"patterns={self.patterns} (product order), layout={self.layout!r}, bias={self.bias is not None}")
