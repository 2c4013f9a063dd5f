"""Block lower-triangular Toeplitz products as torch custom ops with autograd (strux.torch).

From the blocks (gradients to the vector and to the blocks):

  torch.ops.strux.block_toeplitz_matvec(blocks, m, layout) -> d
  torch.ops.strux.block_toeplitz_matvec_backward(dd, blocks, m, layout, need_blocks) -> (dm, dblocks)

  CPU tensors run strux's CPU backend (strux.BlockToeplitz: matvec, and vjp for the blocks
  gradient) on the tensors' memory. CUDA tensors run strux's GPU operator (BlockToeplitzCUDA,
  whose spectrum is rebuilt from the blocks on every call; its vjp gives the blocks gradient
  with a direct kernel of the operator layer).

From the GPU operator's spectrum (CUDA only; gradients to the vector, not to fhat), for graph
capture with a spectrum built once:

  torch.ops.strux.toeplitz_matvec(fhat, m, Nt, layout) -> d
  torch.ops.strux.toeplitz_rmatvec(fhat, d, Nt, layout) -> m
"""
from typing import Optional, Tuple

import torch
from torch import Tensor, nn

from .. import _cuda_toeplitz as _G
from .. import toeplitz as _C
from ._check import REAL as _ck_REAL, REAL_OR_COMPLEX as _ck_REAL_OR_COMPLEX, tensor as _ck_tensor
from ._host import empty as _empty, np_in as _np, same_dtype as _same, t_out as _out

_LAYOUTS = ("time-major", "space-major")


def _out_shape(n: int, x, layout: str):
    s = list(x.shape)
    s[1 if layout == "time-major" else 0] = n
    return s


def _check_vec(x, name: str) -> None:
    # The shaped forms only (strux.BlockToeplitz also reads scipy's flat vectors, whose result
    # shape the fake kernel could not tell apart).
    if x.dim() not in (2, 3):
        raise ValueError(f"argument '{name}': expected 2 or 3 dimensions ((Nt, Nm[, R]) time-major, "
                         f"(Nm, Nt[, R]) space-major), got shape {tuple(x.shape)}")


# ---- from the blocks --------------------------------------------------------------------------

def _cpu_operator(blocks, layout):
    return _C.BlockToeplitz(_np(blocks), layout=layout)


@torch.library.custom_op("strux::block_toeplitz_matvec", mutates_args=())
def _block_matvec(blocks: Tensor, m: Tensor, layout: str) -> Tensor:
    _check_vec(m, "m")
    if blocks.is_cuda:
        return _G.BlockToeplitzCUDA(blocks, layout).matvec(m)
    _same("blocks", blocks, m=m)
    return _out(_cpu_operator(blocks, layout).matvec(_np(m)), m.dtype)


@_block_matvec.register_fake
def _(blocks, m, layout):
    return m.new_empty(_out_shape(blocks.shape[1], m, layout))


@torch.library.custom_op("strux::block_toeplitz_matvec_backward", mutates_args=())
def _block_matvec_bwd(dd: Tensor, blocks: Tensor, m: Tensor, layout: str,
                      need_blocks: bool) -> Tuple[Tensor, Tensor]:
    """(dm, dblocks): dm = Fᵀ dd, dblocks[k] = Σ_i dd[i] m[i-k]ᵀ (empty when not needed)."""
    if blocks.is_cuda:
        op = _G.BlockToeplitzCUDA(blocks, layout)
        if need_blocks:
            return op.vjp(m, dd)
        return op.rmatvec(dd), _empty(blocks)
    _same("blocks", blocks, m=m, dd=dd)
    op = _cpu_operator(blocks, layout)
    if need_blocks:
        dm, db = op.vjp(_np(m), _np(dd))
        return _out(dm, m.dtype), _out(db, blocks.dtype)
    return _out(op.rmatvec(_np(dd)), m.dtype), _empty(blocks)


@_block_matvec_bwd.register_fake
def _(dd, blocks, m, layout, need_blocks):
    return torch.empty_like(m), (torch.empty_like(blocks) if need_blocks else blocks.new_empty(0))


def _bm_setup(ctx, inputs, output):
    blocks, m, layout = inputs
    ctx.layout = layout
    ctx.save_for_backward(blocks, m)


def _bm_backward(ctx, dd):
    blocks, m = ctx.saved_tensors
    need_m, need_b = ctx.needs_input_grad[1], ctx.needs_input_grad[0]
    dm, db = _block_matvec_bwd(dd.contiguous(), blocks, m, ctx.layout, need_b)
    return (db if need_b else None), (dm if need_m else None), None


_block_matvec.register_autograd(_bm_backward, setup_context=_bm_setup)


def toeplitz_matvec(blocks: Tensor, m: Tensor, Nt: Optional[int] = None, layout: str = "time-major") -> Tensor:
    """d = F m for the block lower-triangular Toeplitz F of ``blocks`` (Nt, Nd, Nm), differentiable
    with respect to m and to the blocks.

    m: (Nt, Nm[, R]) for ``layout="time-major"`` (default), (Nm, Nt[, R]) for "space-major";
    returns d (Nt, Nd[, R]) / (Nd, Nt[, R]) (DESIGN.md toeplitz). CPU tensors run strux's CPU
    backend (float16 / bfloat16 computed in float32). CUDA tensors (float32, float64) run the
    GPU operator, and its blocks gradient (BlockToeplitzCUDA.vjp).

    A complex first argument is the GPU operator's spectrum ``fhat`` (BlockToeplitzCUDA.fhat),
    with ``Nt`` given: then this is torch.ops.strux.toeplitz_matvec (CUDA only, no fhat gradient).
    """
    if layout not in _LAYOUTS:
        raise ValueError(f"argument 'layout': expected one of 'time-major', 'space-major', got {layout!r}")
    _ck_tensor("blocks", blocks, _ck_REAL_OR_COMPLEX)  # complex: the spectrum fhat
    _ck_tensor("m", m, _ck_REAL, blocks, "blocks")
    if blocks.is_complex():
        if Nt is None:
            raise ValueError("argument 'Nt': expected the number of time steps with a spectrum fhat, got None")
        return torch.ops.strux.toeplitz_matvec(blocks, m, Nt, layout)
    if blocks.dim() != 3:
        raise ValueError(f"argument 'blocks': expected 3 dimensions (Nt, Nd, Nm), got shape {tuple(blocks.shape)}")
    if Nt is not None and Nt != blocks.shape[0]:
        raise ValueError(f"argument 'Nt': expected None or {blocks.shape[0]} (blocks.shape[0]), got {Nt}")
    return _block_matvec(blocks, m, layout)


class BlockToeplitz(nn.Module):
    """d = F m with the blocks (Nt, Nd, Nm) of F held as a Parameter (trained through the blocks
    gradient, CPU or CUDA). ``layout`` as in toeplitz_matvec. The blocks are copied
    (``requires_grad`` says whether they train)."""

    def __init__(self, blocks: Tensor, layout: str = "time-major", requires_grad: bool = True):
        super().__init__()
        if layout not in _LAYOUTS:
            raise ValueError(f"argument 'layout': expected one of 'time-major', 'space-major', got {layout!r}")
        if not isinstance(blocks, Tensor) or blocks.dim() != 3 or not blocks.is_floating_point():
            got = f"shape {tuple(blocks.shape)} {blocks.dtype}" if isinstance(blocks, Tensor) else type(blocks).__name__
            raise ValueError(f"argument 'blocks': expected a real floating tensor (Nt, Nd, Nm), got {got}")
        self.layout = layout
        self.blocks = nn.Parameter(blocks.detach().clone(), requires_grad=requires_grad)

    def forward(self, m: Tensor) -> Tensor:
        _ck_tensor("m", m, _ck_REAL, self.blocks, "blocks")
        return _block_matvec(self.blocks, m, self.layout)

    def extra_repr(self) -> str:
        nt, nd, nm = self.blocks.shape
        return f"Nt={nt}, Nd={nd}, Nm={nm}, layout={self.layout!r}"


# ---- from the GPU operator's spectrum -----------------------------------------------------------

def _spectrum_op(fhat, Nt, layout, name):
    if not fhat.is_cuda:
        raise NotImplementedError(
            f"torch.ops.strux.{name}: takes the GPU operator's spectrum (CUDA tensors only); for CPU tensors "
            "use strux.torch.toeplitz_matvec(blocks, m, layout=...) or strux.BlockToeplitz")
    return _G.BlockToeplitzCUDA.from_fhat(fhat, Nt, layout)


@torch.library.custom_op("strux::toeplitz_matvec", mutates_args=())
def toeplitz_matvec_fhat(fhat: Tensor, m: Tensor, Nt: int, layout: str = "time-major") -> Tensor:
    return _spectrum_op(fhat, Nt, layout, "toeplitz_matvec").matvec(m)


@torch.library.custom_op("strux::toeplitz_rmatvec", mutates_args=())
def toeplitz_rmatvec(fhat: Tensor, d: Tensor, Nt: int, layout: str = "time-major") -> Tensor:
    return _spectrum_op(fhat, Nt, layout, "toeplitz_rmatvec").rmatvec(d)


@toeplitz_matvec_fhat.register_fake
def _(fhat, m, Nt, layout="time-major"):
    return m.new_empty(_out_shape(fhat.shape[1], m, layout))


@toeplitz_rmatvec.register_fake
def _(fhat, d, Nt, layout="time-major"):
    return d.new_empty(_out_shape(fhat.shape[2], d, layout))


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


toeplitz_matvec_fhat.register_autograd(_matvec_bwd, setup_context=_tp_setup)
toeplitz_rmatvec.register_autograd(_rmatvec_bwd, setup_context=_tp_setup)
