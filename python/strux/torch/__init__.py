"""PyTorch custom ops for strux (torch.library): usable under autograd, torch.compile and CUDA
graph capture. One file per family; every op is a ``torch.library.custom_op`` with a fake kernel
and ``register_autograd``.

  torch.ops.strux.fftconv(u, k, mode, pregate, postgate, skip) -> y
      gradients du, dk, dpregate, dpostgate, dskip (through strux::fftconv_backward)
  torch.ops.strux.toeplitz_matvec(fhat, m, Nt, layout) -> d
  torch.ops.strux.toeplitz_rmatvec(fhat, d, Nt, layout) -> m
      fhat: the spectrum of BlockToeplitzCUDA (its `fhat`); gradients flow to the vector
      (matvec <-> rmatvec), not to fhat.
  ks_matmul, ks_chain (strux::ks_matmul, strux::ks_chain and their backward ops), KSLinear
  diag_scan, block_circulant_scan (strux::diag_scan, strux::block_circulant_scan and their
      backward ops), circulant_scan (rfft -> diag_scan -> irfft)

CUDA tensors run the strux CUDA plans on the current stream. CPU tensors run a plain torch
implementation of the same formulas (for tests and gradcheck). Under graph capture, call once
before capturing so that the plans (cuFFT/cuBLAS handles and workspace) exist.
"""
from ._fftconv import fftconv, fftconv_backward  # noqa: F401
from ._ks import KSLinear, ks_chain, ks_matmul  # noqa: F401
from ._scan import block_circulant_scan, circulant_scan, diag_scan  # noqa: F401
from ._toeplitz import toeplitz_matvec, toeplitz_rmatvec  # noqa: F401
