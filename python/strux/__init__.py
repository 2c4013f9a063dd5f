"""strux: fast structured linear operators.

Families (each also has a vector-Jacobian function for gradients):
  fftconv, FFTConv              long depthwise FFT convolution, causal or circular, with gates
  BlockToeplitz                 block lower-triangular Toeplitz matvec / adjoint, HDF5 I/O
  ks_matmul, ks_chain           Kronecker-sparse (butterfly / Monarch) products
  diag_scan, circulant_scan,    linear recurrences with diagonal, circulant and
  block_circulant_scan          block-circulant transitions

GPU plans (cuFFT / cuBLAS handles, workspace) live in one bounded cache per family, keyed by
problem, options and device; clear_plan_cache() drops them all.
"""
from . import _ext
from ._cuda import clear_plan_cache
from .fftconv import fftconv, fftconv_vjp, FFTConv
from .toeplitz import BlockToeplitz, read_vector, write_vector
from .ks import ks_matmul, ks_matmul_vjp, ks_chain, ks_chain_vjp, ks_dense
from .scan import (diag_scan, diag_scan_vjp, circulant_scan, circulant_scan_vjp,
                   block_circulant_scan, block_circulant_scan_vjp)

__version__ = _ext.__version__


def info() -> dict:
    """Version, compiled backends, devices and threads."""
    n = _ext.cuda_device_count()
    return {
        "version": __version__,
        "backends": ["cpu"] + (["cuda"] if _ext.has_cuda else []),
        "hdf5": bool(_ext.has_hdf5),
        "cuda_devices": [_ext.cuda_device_name(i) for i in range(n)],
        "cpu_threads": _ext.num_threads(),
    }


def set_num_threads(n: int) -> None:
    """Threads of the CPU backend (0 = OpenMP default)."""
    _ext.set_num_threads(int(n))
