"""PyTorch for strux: custom ops with autograd (torch.library), usable under torch.compile and
CUDA graph capture, and the nn.Modules on them. One file per family; every op is a
``torch.library.custom_op`` with a fake kernel and ``register_autograd``; optional tensors are
``Tensor?`` and absent optional outputs come back as empty tensors.

Modules:
  FFTConv(seqlen, dtype, mode)        conv(u, k, pregate, postgate, skip), filter per call
  KSLinear(patterns, bias, layout, weights, order)   x (..., N) -> (..., M), K = K_1 ⋯ K_P
  BlockToeplitz(blocks, layout)       d = F m, blocks a Parameter
  monarch(n, nblocks), butterfly(n, radix)   KS patterns (strux.patterns) for KSLinear
  CirculantSSM(d_model, n, p)         circulant / block-circulant state-space layer (Fourier form)
  DiagonalSSM(d_model, n, kind)       its diagonal baselines: real [0, 1], real [-1, 1], complex

Functions (differentiable): fftconv, fftconv_spectral (the filter as its lowest frequencies,
complex), ks_matmul, ks_chain, diag_scan, circulant_scan, block_circulant_scan,
toeplitz_matvec(blocks, m, layout=...).

Ops (torch.ops.strux.*), each with a backward op: fftconv, fftconv_spectral, ks_matmul, ks_chain,
diag_scan, circulant_scan, block_circulant_scan, block_toeplitz_matvec; and toeplitz_matvec /
toeplitz_rmatvec on the GPU operator's spectrum fhat (CUDA only, gradient to the vector).

CUDA tensors run strux's GPU plans on the current stream (call once before capturing a CUDA
graph, so that the plans exist). CPU tensors run strux's CPU backend on the tensors' memory
(no torch re-implementation): float16 / bfloat16 are computed in float32 and returned in the
input dtype. The blocks gradient of the toeplitz product exists on CPU only (NotImplementedError
for CUDA blocks).
"""
__all__ = ["FFTConv", "KSLinear", "BlockToeplitz", "CirculantSSM", "DiagonalSSM", "monarch", "butterfly", "fftconv", "fftconv_backward",
           "fftconv_spectral", "fftconv_spectral_backward", "ks_matmul",
           "ks_chain", "diag_scan", "circulant_scan", "block_circulant_scan", "toeplitz_matvec", "toeplitz_rmatvec"]

from ..patterns import butterfly, monarch
from ._fftconv import FFTConv, fftconv, fftconv_backward, fftconv_spectral, fftconv_spectral_backward
from ._ks import KSLinear, ks_chain, ks_matmul
from ._scan import block_circulant_scan, circulant_scan, diag_scan
from .ssm import CirculantSSM, DiagonalSSM
from ._toeplitz import BlockToeplitz, toeplitz_matvec, toeplitz_rmatvec
