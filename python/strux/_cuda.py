"""The one array adapter of strux's GPU paths (every family's _cuda_<family> module uses it).

Arrays: PyTorch tensors and CuPy arrays in CUDA device memory (other DLPack producers: convert
them with torch.from_dlpack / cupy.from_dlpack first). This module turns one into what a plan
needs -- its dtype name, device, shape, a data pointer, the current stream of its library (``torch.cuda.current_stream`` / ``cupy.cuda.get_current_stream``) -- checks
arrays once with messages that name the argument, and allocates outputs and scratch of the
input's kind on its device. Nothing here imports torch or CuPy until such an array is seen.

Non-contiguous inputs are made C-contiguous (a documented copy). Work is ordered on the current
stream, so calls compose with CUDA graphs and torch.compile.
"""
from __future__ import annotations

from . import _ext

#: strux::cuda::DType codes of the dtypes the plans take.
DTYPE_CODE = {"float32": 0, "float64": 1, "float16": 2, "bfloat16": 3, "complex64": 4, "complex128": 5}
FLOATS = ("float32", "float64", "float16", "bfloat16")

_available = None


def available() -> bool:
    """True when strux was built with CUDA and a device is visible (asked once: the device count
    of a process does not change)."""
    global _available
    if _available is None:
        _available = bool(_ext.has_cuda) and _ext.cuda_device_count() > 0
    return _available


def need():
    if not _ext.has_cuda:
        raise RuntimeError("strux was built without its CUDA backend")


def clear_plan_cache() -> None:
    """Drops every cached GPU plan (cuFFT / cuBLAS handles and the workspace they own); the next
    call of each shape builds its plan again. A no-op in a build without CUDA."""
    if _ext.has_cuda:
        _ext.cuda_clear_plan_cache()


# ---- what an array is ---------------------------------------------------------------------------

#: The exact torch tensor types the families' cheap checks take (torch.Tensor, nn.Parameter),
#: filled by see_torch() on the first torch tensor: nothing here imports torch before.
TT: tuple = ()
#: torch dtype -> strux::cuda::DType code and -> dtype name, filled with TT.
TORCH_CODE: dict = {}
TORCH_NAME: dict = {}
#: torch dtype -> DType code of the real floating dtypes (FLOATS), filled with TT.
TORCH_FLOAT_CODE: dict = {}
_TORCH_DTYPE: dict = {}  # dtype name -> torch dtype (the dtypes outputs and scratch are made of)
_torch_stream = None  # torch._C._cuda_getCurrentRawStream (device index -> handle)
# torch.empty_like: an output shaped like a contiguous input for about half the host time of
# x.new_empty(shape) (bench/gpu_host.py, "output" rows)
torch_empty_like = None


def see_torch(x) -> tuple:
    """TT when x is a torch tensor (filled on the first one), else () (always () in a build
    without CUDA: no cheap path leads to entries that do not exist)."""
    global TT, TORCH_CODE, TORCH_NAME, TORCH_FLOAT_CODE, _TORCH_DTYPE, _torch_stream, torch_empty_like
    if not is_torch(x) or not _ext.has_cuda:
        return ()
    if not TT:
        import torch
        TORCH_CODE = {getattr(torch, n): c for n, c in DTYPE_CODE.items()}
        TORCH_FLOAT_CODE = {getattr(torch, n): DTYPE_CODE[n] for n in FLOATS}
        TORCH_NAME = {getattr(torch, n): n for n in DTYPE_CODE}
        _TORCH_DTYPE = {n: getattr(torch, n) for n in tuple(DTYPE_CODE) + ("uint8",)}
        _torch_stream = torch._C._cuda_getCurrentRawStream
        torch_empty_like = torch.empty_like
        TT = (torch.Tensor, torch.nn.Parameter)
    return TT


def torch_stream(dev: int) -> int:
    """The current raw stream of torch on device dev (after see_torch)."""
    return _torch_stream(dev)


def is_torch(x) -> bool:
    t = type(x)
    return t in TT or t.__module__.split(".")[0] == "torch"


def is_cupy(x) -> bool:
    return type(x).__module__.split(".")[0] == "cupy"


def dtname(x) -> str:
    """"float32", "bfloat16", "complex64", ... for a torch tensor or a CuPy array."""
    n = TORCH_NAME.get(x.dtype) if type(x) in TT else None
    return str(x.dtype).replace("torch.", "") if n is None else n


def device_id(x) -> int:
    return x.get_device() if is_torch(x) else x.device.id


def code(x) -> int:
    """x's strux::cuda::DType code (x of a dtype in DTYPE_CODE)."""
    c = TORCH_CODE.get(x.dtype) if type(x) in TT else None
    return DTYPE_CODE[dtname(x)] if c is None else c


def array(x, name: str, ndim: int | None = None, dtypes=FLOATS, allow_empty: bool = False):
    """Checks that x is a CUDA torch tensor or CuPy array of rank ndim, every size >= 1 (or >= 0
    with allow_empty), with an allowed dtype; returns it unchanged."""
    if x is None:
        raise TypeError(f"argument '{name}': expected a CUDA array, got None")
    if is_torch(x):
        if not x.is_cuda:
            raise ValueError(f"argument '{name}': expected a tensor on a CUDA device, got device {x.device}")
    elif not is_cupy(x):
        raise TypeError(f"argument '{name}': expected a torch.Tensor or cupy.ndarray on a CUDA device, "
                        f"got {type(x).__name__}")
    if dtypes is not None and dtname(x) not in dtypes:
        raise TypeError(f"argument '{name}': expected dtype {', '.join(dtypes)}, got {dtname(x)}")
    if ndim is not None and x.ndim != ndim:
        raise ValueError(f"argument '{name}': expected {ndim} dimensions, got {x.ndim} (shape {tuple(x.shape)})")
    for i, s in enumerate(x.shape):
        if s == 0 and not allow_empty:
            raise ValueError(f"argument '{name}': expected every size >= 1, got shape {tuple(x.shape)} "
                             f"(axis {i} is 0)")
    return x


def _same(ref, refname: str, arrays: dict, dtype: bool):
    """Each non-None array of `arrays` has ref's kind, (if `dtype`) dtype and device."""
    for n, x in arrays.items():
        if x is None:
            continue
        if is_torch(x) != is_torch(ref):
            raise TypeError(f"argument '{n}': expected the array kind of '{refname}' "
                            f"({type(ref).__name__}), got {type(x).__name__}")
        if dtype and dtname(x) != dtname(ref):
            raise TypeError(f"argument '{n}': expected dtype {dtname(ref)} (the dtype of '{refname}'), "
                            f"got {dtname(x)}")
        if device_id(x) != device_id(ref):
            raise ValueError(f"argument '{n}': expected device {device_id(ref)} (that of '{refname}'), "
                             f"got {device_id(x)}")


def same(ref, refname: str, **arrays):
    """Same kind, device and dtype as `ref` (None entries skipped); errors name the argument."""
    _same(ref, refname, arrays, True)


def same_device(ref, refname: str, **arrays):
    """Same kind and device as `ref` (any dtype); errors name the argument."""
    _same(ref, refname, arrays, False)


def shape(x, name: str, expected) -> None:
    if tuple(x.shape) != tuple(expected):
        raise ValueError(f"argument '{name}': expected shape {tuple(expected)}, got {tuple(x.shape)}")


def flag(v, name: str) -> bool:
    if not isinstance(v, bool):
        raise TypeError(f"argument '{name}': expected a bool, got {type(v).__name__}")
    return v


# ---- the array library of an array ----------------------------------------------------------------

def xp(x):
    """The array library of x (torch or cupy)."""
    if is_torch(x):
        import torch
        return torch
    import cupy
    return cupy


def contig(x):
    if x is None:
        return None
    if is_torch(x):  # a lazy conjugate / negative view is materialised before its memory is read
        return x.resolve_conj().resolve_neg().contiguous()
    import cupy
    return cupy.ascontiguousarray(x)


def empty(like, shape, dtype: str | None = None):
    """An uninitialised array of like's kind and device (dtype: a name; None: like's)."""
    if is_torch(like):
        if dtype is None:
            return like.new_empty(shape)
        t = _TORCH_DTYPE.get(dtype)
        if t is None:
            import torch
            t = getattr(torch, dtype)
        return like.new_empty(shape, dtype=t)
    import cupy
    with like.device:
        return cupy.empty(tuple(shape), dtype=like.dtype if dtype is None else dtype)


def zeros(like, shape, dtype: str | None = None):
    if is_torch(like):
        import torch
        return torch.zeros(tuple(shape), dtype=like.dtype if dtype is None else getattr(torch, dtype),
                           device=like.device)
    import cupy
    with like.device:
        return cupy.zeros(tuple(shape), dtype=like.dtype if dtype is None else dtype)


def scratch(like, nbytes: int):
    """Device scratch of at least nbytes (at least 1) on like's device, freed with the array."""
    return empty(like, (max(int(nbytes), 1),), "uint8")


def cast(x, dtype: str):
    if dtname(x) == dtype:
        return x
    if is_torch(x):
        import torch
        return x.to(getattr(torch, dtype))
    return x.astype(dtype)


def copy(x):
    return x.clone() if is_torch(x) else x.copy()


def ptr(x) -> int:
    """The device address of x's first element (0 for None)."""
    if type(x) in TT:
        return x.data_ptr()
    if x is None:
        return 0
    return x.data_ptr() if is_torch(x) else x.data.ptr


def stream(like) -> int:
    """The current stream of like's library on like's device, as an integer handle."""
    if type(like) in TT:
        return _torch_stream(like.get_device())
    if is_torch(like):
        see_torch(like)
        return _torch_stream(like.get_device())
    import cupy
    with like.device:
        return int(cupy.cuda.get_current_stream().ptr)


def device_guard(x):
    """A context manager that makes x's device current (for work of the array library itself;
    the plans' calls set their device in C++)."""
    if is_torch(x):
        import torch
        return torch.cuda.device(x.device)
    return x.device
