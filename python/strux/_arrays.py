"""Validation and conversion at the Python edge.

Every public function turns its inputs into numpy arrays here, checks rank, sizes and dtypes
with messages that name the argument, picks the compute dtype, and hands C-contiguous arrays
to the native module. Non-contiguous inputs are copied (documented): the native code only
reads dense row-major memory. Two more documented copies make every valid array computable in
its own precision: a byte-swapped array (``>f8`` from HDF5, FITS or MATLAB files) is converted to
native byte order (so it computes in float64 and the result is native-order float64), and an
array whose data pointer is not aligned to its element is copied to aligned memory. Lazy torch
views (conjugate or negative bit set) are resolved before their memory is read. A torch
bfloat16 CPU tensor is read as a float32 copy (numpy has no bfloat16 dtype): it is computed in
float32, as bfloat16 always is, and its result comes back as float32 numpy.

Integers: Python numbers and (nested) lists of them carry no dtype and are read as float64;
anything that carries a dtype (ndarrays, 0-d arrays, numpy scalars such as ``np.int64(1)``)
must have a floating one: integer, bool, object, float128 and complex256 dtypes are a TypeError
naming the argument (never a silent cast). A ragged nested list is a ValueError naming it.
"""
from __future__ import annotations

import numbers

import numpy as np

# dtypes computed natively; half types are computed in float32 and cast back.
_NATIVE_REAL = (np.dtype(np.float32), np.dtype(np.float64))
_NATIVE_COMPLEX = (np.dtype(np.complex64), np.dtype(np.complex128))


def _is_bfloat16(dt) -> bool:
    return getattr(dt, "name", "") == "bfloat16"


def resolve_lazy(x):
    """A torch tensor with its lazy conjugate / negative bit materialised (other objects unchanged).

    ``a.conj()`` and ``c.conj().imag`` are views with a flag set over unchanged memory; DLPack
    and raw data pointers expose that memory, so the flag must be resolved before either is read
    (a copy only when a flag is set)."""
    if hasattr(x, "is_conj") and hasattr(x, "resolve_conj"):
        if x.is_conj():
            x = x.resolve_conj()
        if hasattr(x, "is_neg") and x.is_neg():
            x = x.resolve_neg()
    return x


def _plain(a: np.ndarray) -> np.ndarray:
    """Native byte order and aligned data (documented copies, only when needed)."""
    if not a.dtype.isnative and a.dtype.kind in "fc":
        a = a.astype(a.dtype.newbyteorder("="))
    if not a.flags.aligned:
        a = a.copy()
    return a


def to_numpy(x, name: str) -> np.ndarray:
    """Any CPU array (numpy, DLPack producer, nested list) as an np.ndarray in native byte order and
    aligned memory; copies an ndarray only to make it so."""
    if isinstance(x, np.ndarray):
        return _plain(x)
    return _plain(_to_numpy(resolve_lazy(x), name))


def _to_numpy(x, name: str) -> np.ndarray:
    if x is None:
        raise TypeError(f"argument '{name}': expected an array, got None")
    if isinstance(x, (bool, np.bool_)):  # a flag passed where an array goes, not the number 1 or 0
        raise TypeError(f"argument '{name}': expected an array, got {type(x).__name__} {x!r}")
    if hasattr(x, "__dlpack__"):
        dev = x.__dlpack_device__() if hasattr(x, "__dlpack_device__") else (1, 0)
        if int(dev[0]) not in (1, 3):  # kDLCPU, kDLCUDAHost
            raise ValueError(
                f"argument '{name}': expected an array in CPU memory, got one on DLPack device {tuple(dev)} "
                "(this build's GPU backend does not take it yet)")
        try:
            return np.from_dlpack(x)
        except (TypeError, BufferError, RuntimeError):
            pass
        if str(getattr(x, "dtype", "")) == "torch.bfloat16":  # numpy has no bfloat16 (module docstring)
            return x.detach().float().numpy()
    if hasattr(x, "__array__") or isinstance(x, (list, tuple, int, float, complex)):
        try:
            a = np.asarray(x)
        except ValueError as e:  # nested lists of unequal lengths
            raise ValueError(f"argument '{name}': expected a rectangular array (nested lists of equal lengths), "
                             f"got a ragged {type(x).__name__} ({e})") from None
        # Python numbers and (nested) lists of them carry no dtype: integers and bools among them
        # are read as float64. Anything with a dtype of its own (numpy scalars such as np.int64(1),
        # 0-d and other arrays) keeps it, so integer ones are a TypeError, as integer ndarrays are.
        if a.dtype.kind in "iub" and isinstance(x, (list, tuple, int, float, complex)):
            a = a.astype(np.float64)
        return a
    raise TypeError(f"argument '{name}': expected an array (numpy or DLPack), got {type(x).__name__}")


def real_array(x, name: str, ndim: int | None = None) -> np.ndarray:
    """A real floating array (float16, bfloat16, float32, float64) of rank `ndim`."""
    a = to_numpy(x, name)
    if not (a.dtype.kind == "f" and a.dtype.itemsize <= 8) and not _is_bfloat16(a.dtype):
        raise TypeError(f"argument '{name}': expected a real floating dtype "
                        f"(float16, bfloat16, float32 or float64), got {a.dtype}")
    _check_rank(a, name, ndim)
    return a


def complex_or_real_array(x, name: str, ndim: int | None = None) -> np.ndarray:
    """A real floating or complex (complex64, complex128) array of rank `ndim`."""
    a = to_numpy(x, name)
    if a.dtype.kind == "c":
        if native_dtype(a.dtype) not in _NATIVE_COMPLEX:
            raise TypeError(f"argument '{name}': expected complex64 or complex128, got {a.dtype}")
        _check_rank(a, name, ndim)
        return a
    return real_array(a, name, ndim)


def _check_rank(a: np.ndarray, name: str, ndim: int | None) -> None:
    if ndim is not None and a.ndim != ndim:
        raise ValueError(f"argument '{name}': expected {ndim} dimensions, got {a.ndim} (shape {a.shape})")
    for i, s in enumerate(a.shape):
        if s == 0:
            raise ValueError(f"argument '{name}': expected every size >= 1, got shape {a.shape} (axis {i} is 0)")


def check_shape(a: np.ndarray, name: str, expected: tuple) -> None:
    """Exact shape check; `expected` entries may be None (any size)."""
    ok = a.ndim == len(expected) and all(e is None or e == s for e, s in zip(expected, a.shape))
    if not ok:
        want = "(" + ", ".join("*" if e is None else str(e) for e in expected) + ")"
        raise ValueError(f"argument '{name}': expected shape {want}, got {a.shape}")


def native_dtype(dt) -> np.dtype:
    """`dt` in native byte order (dtypes compare by kind and size, never by byte order)."""
    dt = np.dtype(dt)
    return dt if dt.isnative else dt.newbyteorder("=")


def same_dtype(**arrays) -> np.dtype:
    """The one dtype (native order) shared by all non-None arrays; mixed dtypes are a TypeError naming both."""
    items = [(n, a) for n, a in arrays.items() if a is not None]
    first_name, first = items[0]
    want = native_dtype(first.dtype)
    for n, a in items[1:]:
        if native_dtype(a.dtype) != want:
            raise TypeError(f"argument '{n}': expected dtype {want} (the dtype of '{first_name}'), got {a.dtype}")
    return want


def is_half(dt) -> bool:
    """float16 or bfloat16 (any byte order)."""
    return _is_bfloat16(dt) or native_dtype(dt) == np.float16


def compute_dtype(dt: np.dtype) -> np.dtype:
    """The dtype the native code computes in, by kind and size: float64/complex128/complex64 and
    float32 as themselves (native order), float16/bfloat16 -> float32."""
    dt = native_dtype(dt)
    if dt in _NATIVE_REAL or dt in _NATIVE_COMPLEX:
        return dt
    return np.dtype(np.float32)


def native(a, dt: np.dtype):
    """C-contiguous copy-if-needed in the compute dtype (None stays None)."""
    if a is None:
        return None
    return np.ascontiguousarray(a, dtype=dt)


def result(a: np.ndarray, dt: np.dtype) -> np.ndarray:
    """Cast a native result back to the caller's dtype (in native byte order)."""
    dt = native_dtype(dt)
    return a if a.dtype == dt else a.astype(dt)


def integer(value, name: str, lo: int = 1, hi: int = 2**62) -> int:
    """A Python or numpy integer in [lo, hi] (not bool, float or str), as int."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"argument '{name}': expected an integer, got {type(value).__name__} {value!r}")
    v = int(value)
    if not lo <= v <= hi:
        raise ValueError(f"argument '{name}': expected an integer in [{lo}, {hi}], got {v}")
    return v


def choice(value, name: str, allowed) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"argument '{name}': expected one of {', '.join(repr(v) for v in allowed)}, got {value!r}")
    return value


def solver_option(options, solvers):
    """fftconv's options (None or {"solver": name}) checked against `solvers` (name -> code); the code.

    Shared by the CPU module (strux.fftconv) and the GPU one (strux._cuda_fftconv)."""
    if options is None:
        return solvers["auto"]
    if not isinstance(options, dict):
        raise TypeError(f"argument 'options': expected a dict or None, got {type(options).__name__}")
    bad = sorted(map(repr, set(options) - {"solver"}))
    if bad:
        raise ValueError(f"argument 'options': unknown fftconv option(s) {', '.join(bad)}; expected 'solver'")
    name = options.get("solver", "auto")
    if not isinstance(name, str) or name not in solvers:
        raise ValueError(f"argument 'options': 'solver' expected one of {', '.join(map(repr, solvers))}, got {name!r}")
    return solvers[name]


def on_gpu(x) -> bool:
    """True for an array in CUDA device memory (torch tensor, CuPy array, any DLPack producer)."""
    if x is None or isinstance(x, np.ndarray):
        return False
    dev = getattr(x, "__dlpack_device__", None)
    if dev is not None:
        try:
            return int(dev()[0]) in (2, 13)  # kDLCUDA, kDLCUDAManaged
        except Exception:
            return False
    return hasattr(x, "__cuda_array_interface__")


def cuda_backend():
    """The CUDA path module, or a clear error when this build or machine has none."""
    from . import _cuda
    if not _cuda.available():
        raise RuntimeError("strux: got a CUDA array, but this strux build has no CUDA backend "
                           "or no CUDA device is visible (strux.info() says which)")
    return _cuda
