"""strux: fast structured linear operators.

Families (each also has a vector-Jacobian function for gradients):
  fftconv, FFTConv              long depthwise FFT convolution, causal or circular, with gates
  BlockToeplitz                 block lower-triangular Toeplitz matvec / adjoint, HDF5 I/O
  ks_matmul, ks_chain           Kronecker-sparse (butterfly / Monarch) products
  diag_scan, circulant_scan,    linear recurrences with diagonal, circulant and
  block_circulant_scan          block-circulant transitions

CPU settings: set_num_threads / get_num_threads, set_planning and planning() (FFTW effort; per
operator: planner=), set_wisdom_dir / save_wisdom (see the README, "Threads" and "FFT planning").

GPU plans (cuFFT / cuBLAS handles, workspace) live in one bounded cache per family, keyed by
problem, options and device; clear_plan_cache() drops them all.
"""
import os as _os


def _load_ext():
    # OpenMP threads that finish early sleep instead of spinning: on a shared machine (another
    # process, an MPI rank per core, a data loader) a spinning thread takes the core its own
    # team's straggler needs, and every barrier then waits a scheduler time slice. libgomp reads
    # this once, when it is loaded with _ext; the caller's own setting wins, and the variable is
    # removed again so child processes and later runtimes see the caller's environment.
    mine = "OMP_WAIT_POLICY" not in _os.environ and "GOMP_SPINCOUNT" not in _os.environ
    if mine:
        _os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    try:
        from . import _ext
    finally:
        if mine:
            _os.environ.pop("OMP_WAIT_POLICY", None)
    return _ext


_ext = _load_ext()

from . import _runtime  # noqa: E402
from ._runtime import (set_num_threads, get_num_threads, set_planning, get_planning,  # noqa: E402
                       planning, set_wisdom_dir, wisdom_dir, save_wisdom)
from ._cuda import clear_plan_cache  # noqa: E402
from .fftconv import fftconv, fftconv_vjp, FFTConv, fftconv_spectral, fftconv_spectral_vjp  # noqa: E402
from .toeplitz import BlockToeplitz, read_vector, write_vector  # noqa: E402
from .ks import ks_matmul, ks_matmul_vjp, ks_chain, ks_chain_vjp, ks_dense  # noqa: E402
from .patterns import monarch, butterfly  # noqa: E402
from .scan import (diag_scan, diag_scan_vjp, circulant_scan, circulant_scan_vjp,  # noqa: E402
                   block_circulant_scan, block_circulant_scan_vjp)

__version__ = _ext.__version__

_runtime._init()


def info() -> dict:
    """Version, compiled backends, devices, threads and FFT planning."""
    n = _ext.cuda_device_count()
    return {
        "version": __version__,
        "backends": ["cpu"] + (["cuda"] if _ext.has_cuda else []),
        "hdf5": bool(_ext.has_hdf5),
        "cuda_devices": [_ext.cuda_device_name(i) for i in range(n)],
        "cpu_threads": _ext.num_threads(),
        "available_cpus": _runtime.available_cpus(),
        "fft_planning": get_planning(),
        "wisdom_dir": wisdom_dir(),
        "dist": _dist_info(),
    }


def _dist_info() -> dict:
    """The distributed operators (strux.dist): built (MPI found at build time), with NCCL."""
    try:
        from . import _dist
    except ImportError:
        return {"mpi": False, "nccl": False}
    return {"mpi": True, "nccl": bool(_dist.have_nccl())}
