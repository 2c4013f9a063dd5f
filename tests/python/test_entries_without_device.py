"""The GPU families' Python layers reach their native entries with the arguments those take, on a
CUDA build without a device (CI): arrays of a stand-in CuPy (numpy memory, the CuPy attributes
the adapter reads) pass every check, and each call must fail only at the entry's first CUDA call
(RuntimeError: no device), never at argument conversion (TypeError). Skipped without the CUDA
build, or with a device (the GPU tests run the real thing there)."""
import sys
import types

import numpy as np
import pytest

from strux import _ext

pytestmark = pytest.mark.skipif(not _ext.has_cuda or _ext.cuda_device_count() > 0,
                                reason="needs the CUDA build on a machine without a GPU")


def _fake_cupy():
    cp = types.ModuleType("cupy")

    class _Dev:
        id = 0

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

    class _Data:
        def __init__(self, a):
            self.ptr = a.ctypes.data

    class ndarray(np.ndarray):
        __module__ = "cupy"

        @property
        def device(self):
            return _Dev()

        @property
        def data(self):
            return _Data(np.asarray(self))

    def wrap(a):
        return np.asarray(a).view(ndarray)

    class _Stream:
        ptr = 0

    cp.ndarray = ndarray
    cp.asarray = wrap
    cp.ascontiguousarray = lambda x: wrap(np.ascontiguousarray(x))
    cp.empty = lambda shape, dtype=None: wrap(np.empty(shape, dtype=dtype))
    cp.zeros = lambda shape, dtype=None: wrap(np.zeros(shape, dtype=dtype))
    cp.einsum = lambda *a: wrap(np.einsum(*a))
    cp.fft = types.SimpleNamespace(rfft=lambda x, n=None, axis=-1: wrap(np.fft.rfft(x, n=n, axis=axis)),
                                   irfft=lambda x, n=None, axis=-1: wrap(np.fft.irfft(x, n=n, axis=axis)))
    cp.cuda = types.SimpleNamespace(Device=_Dev, get_current_stream=lambda: _Stream())
    return cp


@pytest.fixture
def cp(monkeypatch):
    fake = _fake_cupy()
    monkeypatch.setitem(sys.modules, "cupy", fake)
    return fake


def arr(cp, *shape, dt="float32"):
    return cp.asarray(np.random.default_rng(0).random(shape).astype(dt))


def calls(cp):
    from strux import _cuda_fftconv as F, _cuda_ks as K, _cuda_scan as S, _cuda_toeplitz as T
    a = lambda *s, dt="float32": arr(cp, *s, dt=dt)  # noqa: E731
    p, ps = (2, 3, 4, 2), [(2, 3, 4, 2), (4, 2, 2, 2)]
    x, w, dy = a(5, 16), a(*p), a(5, 12)
    ws = [a(*q) for q in ps]
    A, U = a(2, 7, 2, 2, 3), a(2, 7, 6)
    u, k = a(2, 3, 16), a(3, 5)
    kh = cp.asarray(np.zeros((3, 9), "complex64"))
    fh = cp.asarray(np.zeros((T.toeplitz_nfft(4) // 2 + 1, 3, 5), "complex64"))
    return {
        "ks_matmul": lambda: K.ks_matmul(x, w, p),
        "ks_matmul bsl forced": lambda: K.ks_matmul(a(16, 5), w, p, layout="bsl", options={"path": "kernels"}),
        "ks_matmul_vjp": lambda: K.ks_matmul_vjp(dy, x, w, p),
        "ks_chain": lambda: K.ks_chain(x, ws, ps),
        "ks_chain_vjp": lambda: K.ks_chain_vjp(dy, x, ws, ps),
        "diag_scan": lambda: S.diag_scan(a(2, 7, 4), a(2, 7, 4), h0=a(2, 4), options={"path": "seq1"}),
        "diag_scan_vjp": lambda: S.diag_scan_vjp(a(2, 7, 4), a(2, 7, 4), a(2, 7, 4), h=a(2, 7, 4), dh_last=a(2, 4)),
        "circulant_scan": lambda: S.circulant_scan(a(2, 7, 4), a(2, 7, 4)),
        "circulant_scan fourier": lambda: S.circulant_scan(cp.asarray(np.zeros((2, 7, 3), "complex64")), a(2, 7, 4),
                                                           fourier=True),
        "circulant_scan_vjp": lambda: S.circulant_scan_vjp(a(2, 7, 4), a(2, 7, 4), a(2, 7, 4), h0=a(2, 4)),
        "block_circulant_scan": lambda: S.block_circulant_scan(A, U, options={"chunk": 3}),
        "block_circulant_scan_vjp": lambda: S.block_circulant_scan_vjp(a(2, 7, 6), A, U, dh_last=a(2, 6)),
        "block_circulant_scan_path": lambda: S.block_circulant_scan_path(2, 7, 2, 3),
        "fftconv": lambda: F.fftconv(u, k, pregate=a(2, 3, 16), skip=a(3)),
        "fftconv_vjp": lambda: F.fftconv_vjp(a(2, 3, 16), u, k, postgate=a(2, 3, 16)),
        "FFTConvCUDA": lambda: F.FFTConvCUDA(k, 2, 16),
        "fftconv_spectral": lambda: F.fftconv_spectral(u, kh, "causal", a(2, 3, 16), a(2, 3, 16), a(3)),
        "fftconv_spectral_vjp": lambda: F.fftconv_spectral_vjp(a(2, 3, 16), u, kh, "circular", a(2, 3, 16), None,
                                                               a(3)),
        "BlockToeplitzCUDA": lambda: T.BlockToeplitzCUDA(a(4, 3, 5)),
        "toeplitz matvec": lambda: T.BlockToeplitzCUDA.from_fhat(fh, 4).matvec(a(4, 5, 2)),
        "toeplitz rmatvec": lambda: T.BlockToeplitzCUDA.from_fhat(fh, 4).rmatvec(a(4, 3)),
    }


NAMES = list(calls(_fake_cupy()))


@pytest.mark.parametrize("name", NAMES)
def test_entry_reached(cp, name):
    with pytest.raises(RuntimeError, match="cuda"):
        calls(cp)[name]()


def operator_calls(cp):
    """Entries over the operator layer (bind_cuda_f64.cpp): float64 ks and block-circulant scans,
    the toeplitz blocks gradient."""
    from strux import _cuda_ks as K, _cuda_scan as S, _cuda_toeplitz as T
    a = lambda *s, dt="float64": arr(cp, *s, dt=dt)  # noqa: E731
    p, ps = (2, 3, 4, 2), [(2, 3, 4, 2), (4, 2, 2, 2)]
    x, w, dy = a(5, 16), a(*p), a(5, 12)
    ws = [a(*q) for q in ps]
    A, U = a(2, 7, 2, 2, 3), a(2, 7, 6)
    fh = cp.asarray(np.zeros((T.toeplitz_nfft(4) // 2 + 1, 3, 5), "complex64"))
    return {
        "ks_matmul f64": lambda: K.ks_matmul(x, w, p),
        "ks_matmul f64 bsl": lambda: K.ks_matmul(a(16, 5), w, p, layout="bsl"),
        "ks_matmul_vjp f64": lambda: K.ks_matmul_vjp(dy, x, w, p),
        "ks_chain f64": lambda: K.ks_chain(x, ws, ps),
        "ks_chain_vjp f64": lambda: K.ks_chain_vjp(dy, x, ws, ps, layout="bsf"),
        "block_circulant_scan f64": lambda: S.block_circulant_scan(A, U, h0=a(2, 6)),
        "block_circulant_scan_vjp f64": lambda: S.block_circulant_scan_vjp(a(2, 7, 6), A, U, dh_last=a(2, 6)),
        "toeplitz grad_blocks": lambda: T.BlockToeplitzCUDA.from_fhat(fh, 4).grad_blocks(a(4, 5, 2, dt="float32"),
                                                                                         a(4, 3, 2, dt="float32")),
    }


OP_NAMES = list(operator_calls(_fake_cupy()))


@pytest.mark.parametrize("name", OP_NAMES)
def test_operator_entry_reached(cp, name):
    """The operator layer checks the device first (ValueError: no CUDA device is visible), the
    entries' own device guards fail at their first CUDA call (RuntimeError); never a TypeError of
    argument conversion."""
    from strux import _cuda_scan as S
    S._F64_MAX_N.clear()
    with pytest.raises((RuntimeError, ValueError), match="(?i)cuda"):
        operator_calls(cp)[name]()


def test_float64_options_are_refused(cp):
    """float64 has one path: a forced kernel choice is a ValueError before any native call."""
    from strux import _cuda_ks as K, _cuda_scan as S
    p = (2, 3, 4, 2)
    x, w = arr(cp, 5, 16, dt="float64"), arr(cp, *p, dt="float64")
    with pytest.raises(ValueError, match="options"):
        K.ks_matmul(x, w, p, options={"path": "tr"})
    with pytest.raises(ValueError, match="options"):
        K.ks_chain(x, [w], [p], options={"path": "blas"})
    with pytest.raises(ValueError, match="options"):
        S.block_circulant_scan(arr(cp, 2, 5, 2, 2, 3, dt="float64"), arr(cp, 2, 5, 6, dt="float64"),
                               options={"chunk": 2})


def test_options_are_checked(cp):
    from strux import _cuda_ks as K, _cuda_scan as S
    x, w = arr(cp, 5, 16), arr(cp, 2, 3, 4, 2)
    with pytest.raises(ValueError, match="unknown ks option"):
        K.ks_matmul(x, w, (2, 3, 4, 2), options={"pth": "tr"})
    with pytest.raises(ValueError, match="'path'"):
        S.diag_scan(arr(cp, 1, 2, 3), arr(cp, 1, 2, 3), options={"path": "fast"})
    with pytest.raises(ValueError, match="'chunk'"):
        S.block_circulant_scan(arr(cp, 1, 2, 1, 1, 3), arr(cp, 1, 2, 3), options={"path": "generic", "chunk": 2})
