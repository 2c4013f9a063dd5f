"""Validation and conversion at the Python edge.

Every public function turns its inputs into numpy arrays here, checks rank, sizes and dtypes
with messages that name the argument, picks the compute dtype, and hands C-contiguous arrays
to the native module. Non-contiguous inputs are copied (documented): the native code only
reads dense row-major memory.
"""
from __future__ import annotations

import numpy as np

# dtypes computed natively; half types are computed in float32 and cast back.
_NATIVE_REAL = (np.dtype(np.float32), np.dtype(np.float64))
_NATIVE_COMPLEX = (np.dtype(np.complex64), np.dtype(np.complex128))


def _is_bfloat16(dt) -> bool:
    return getattr(dt, "name", "") == "bfloat16"


def to_numpy(x, name: str) -> np.ndarray:
    """Any CPU array (numpy, DLPack producer, nested list) as an np.ndarray; never copies an ndarray."""
    if isinstance(x, np.ndarray):
        return x
    if x is None:
        raise TypeError(f"argument '{name}': expected an array, got None")
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
    if hasattr(x, "__array__") or isinstance(x, (list, tuple, int, float, complex)):
        a = np.asarray(x)
        if a.dtype.kind in "iub":  # plain Python numbers and lists: treat as float64
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
        if a.dtype not in _NATIVE_COMPLEX:
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


def same_dtype(**arrays) -> np.dtype:
    """The one dtype shared by all non-None arrays; mixed dtypes are a TypeError naming both."""
    items = [(n, a) for n, a in arrays.items() if a is not None]
    first_name, first = items[0]
    for n, a in items[1:]:
        if a.dtype != first.dtype:
            raise TypeError(f"argument '{n}': expected dtype {first.dtype} (the dtype of '{first_name}'), got {a.dtype}")
    return first.dtype


def compute_dtype(dt: np.dtype) -> np.dtype:
    """The dtype the native code computes in: float16/bfloat16 -> float32, others unchanged."""
    dt = np.dtype(dt)
    if dt in _NATIVE_REAL or dt in _NATIVE_COMPLEX:
        return dt
    return np.dtype(np.float32)


def native(a, dt: np.dtype):
    """C-contiguous copy-if-needed in the compute dtype (None stays None)."""
    if a is None:
        return None
    return np.ascontiguousarray(a, dtype=dt)


def result(a: np.ndarray, dt: np.dtype) -> np.ndarray:
    """Cast a native result back to the caller's dtype."""
    return a if a.dtype == dt else a.astype(dt)


def choice(value, name: str, allowed) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"argument '{name}': expected one of {', '.join(repr(v) for v in allowed)}, got {value!r}")
    return value


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
