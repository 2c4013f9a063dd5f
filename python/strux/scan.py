"""Linear recurrences (scans) with diagonal, circulant and block-circulant transitions.

Shapes are (B, T, n) channels-last: batch, time, state channels; h_{-1} = h0 ((B, n), zeros
when None).

- ``diag_scan(a, b)``:             h_t = a_t * h_{t-1} + b_t (real or complex).
- ``circulant_scan(a, u)``:        h_t = circ(a_t) h_{t-1} + u_t, circ(a)[i, j] = a[(i - j) mod n];
  ``fourier=True`` takes ``a`` as its half spectrum rfft(a_t) ((B, T, n//2 + 1) complex).
- ``block_circulant_scan(a, u)``:  a (B, T, p, p, k), n = p*k; A_t is the p x p grid of k x k
  circulant blocks, block (i, j) = circ(a_t[i, j]); state index i*k + r.

Computed natively (FFTW + OpenMP): the circulant forms run a complex diagonal scan over the
rfft frequencies. Gradients: the ``*_vjp`` functions (PyTorch's convention for complex values).

Dtypes: float32 and float64 are computed as they are, float16/bfloat16 in float32 and returned
in the input dtype. ``diag_scan`` also takes complex64/complex128; there a real argument next to
a complex one is promoted to the complex dtype of the same precision (float32 with complex64,
float64 with complex128; other mixes are a TypeError), and its gradient is the real part of the
complex one. Inputs that are not C-contiguous are copied.
"""
from __future__ import annotations

import numpy as np

from . import _ext
from ._arrays import (check_shape, cuda_backend, on_gpu, complex_or_real_array, compute_dtype, native, real_array,
                      result, same_dtype)

__all__ = ["diag_scan", "diag_scan_vjp", "circulant_scan", "circulant_scan_vjp",
           "block_circulant_scan", "block_circulant_scan_vjp"]

_SUFFIX = {np.dtype(np.float32): "f", np.dtype(np.float64): "d",
           np.dtype(np.complex64): "cf", np.dtype(np.complex128): "cd"}
_COMPLEX_OF = {np.dtype(np.float32): np.dtype(np.complex64), np.dtype(np.float64): np.dtype(np.complex128)}


# Tensor types whose CUDA instances go straight to the GPU path (filled once one has gone there:
# torch.Tensor, nn.Parameter), skipping the DLPack device probe of on_gpu and the imports of _gpu.
_gpu_types: tuple = ()
_cuda_scan = None  # strux._cuda_scan, set with _gpu_types


def _gpu(x=None):
    """The CUDA path of the scans (torch / CuPy arrays), or a clear error when absent."""
    global _gpu_types, _cuda_scan
    cuda = cuda_backend()  # raises when this build or machine has no CUDA
    from . import _cuda_scan as mod
    if not _gpu_types and x is not None:
        _gpu_types, _cuda_scan = cuda.see_torch(x), mod
    return mod


def _fn(kind: str, dt: np.dtype):
    return getattr(_ext, f"scan_{kind}_{_SUFFIX[np.dtype(dt)]}")


def _flag(value, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"argument '{name}': expected True or False, got {value!r}")
    return bool(value)


def _opt(x, name: str, shape: tuple, real_only: bool):
    if x is None:
        return None
    arr = real_array(x, name, len(shape)) if real_only else complex_or_real_array(x, name, len(shape))
    check_shape(arr, name, shape)
    return arr


# ---- diag_scan ---------------------------------------------------------------------------------

def _diag_dtypes(**arrays):
    """(compute dtype, {name: input dtype}) for diag_scan's arrays; see the module docstring."""
    items = {k: v for k, v in arrays.items() if v is not None}
    complexes = {k: v for k, v in items.items() if v.dtype.kind == "c"}
    if not complexes:
        dt = same_dtype(**items)
        return compute_dtype(dt), dt
    cdt = same_dtype(**complexes)
    for k, v in items.items():
        if v.dtype.kind != "c" and _COMPLEX_OF.get(v.dtype) != cdt:
            first = next(iter(complexes))
            raise TypeError(f"argument '{k}': expected {cdt} or the real dtype of the same precision "
                            f"(the dtype of '{first}' is {cdt}), got {v.dtype}")
    return cdt, cdt


def _diag_args(a, b, h0):
    a = complex_or_real_array(a, "a", 3)
    b = complex_or_real_array(b, "b", 3)
    check_shape(b, "b", a.shape)
    h0 = _opt(h0, "h0", (a.shape[0], a.shape[2]), real_only=False)
    return a, b, h0


def diag_scan(a, b, *, h0=None, return_final=False):
    """Diagonal linear recurrence h_t = a_t * h_{t-1} + b_t, h_{-1} = h0 (zeros when None).

    a, b: (B, T, n), real or complex (see the module docstring for mixing). h0: (B, n) or None.
    Returns h (B, T, n) in the result dtype, or (h, h_last) with h_last = h[:, -1] (B, n)
    when ``return_final``.
    """
    if type(a) in _gpu_types and a.is_cuda:
        return _cuda_scan.diag_scan(a, b, h0=h0, return_final=return_final)
    if on_gpu(a):
        return _gpu(a).diag_scan(a, b, h0=h0, return_final=return_final)
    return_final = _flag(return_final, "return_final")
    a, b, h0 = _diag_args(a, b, h0)
    cdt, out_dt = _diag_dtypes(a=a, b=b, h0=h0)
    h = np.empty(a.shape, cdt)
    _fn("diag_fwd", cdt)(native(a, cdt), native(b, cdt), native(h0, cdt), h)
    h = result(h, out_dt)
    return (h, np.ascontiguousarray(h[:, -1])) if return_final else h


def diag_scan_vjp(dh, a, b, *, h0=None, dh_last=None):
    """Gradients of ``diag_scan``: returns (da, db, dh0); dh0 is None when h0 is None.

    dh: (B, T, n) = dL/dconj(h); dh_last: (B, n) or None, the cotangent of h_last (added to
    dh[:, -1]). PyTorch's convention: g_t = dh_t + conj(a_{t+1}) g_{t+1}, db_t = g_t,
    da_t = g_t conj(h_{t-1}), dh0 = conj(a_0) g_0 (conj is the identity for real values).
    Each gradient has its input's dtype; a real input next to complex ones gets the real part.
    """
    if on_gpu(a):
        return _gpu().diag_scan_vjp(dh, a, b, h0=h0, dh_last=dh_last)
    a, b, h0 = _diag_args(a, b, h0)
    dh = complex_or_real_array(dh, "dh", 3)
    check_shape(dh, "dh", a.shape)
    dh_last = _opt(dh_last, "dh_last", (a.shape[0], a.shape[2]), real_only=False)
    cdt, _ = _diag_dtypes(a=a, b=b, h0=h0, dh=dh, dh_last=dh_last)
    da, db = np.empty(a.shape, cdt), np.empty(a.shape, cdt)
    dh0 = None if h0 is None else np.empty(h0.shape, cdt)
    _fn("diag_bwd", cdt)(native(dh, cdt), native(dh_last, cdt), native(a, cdt), native(b, cdt),
                         native(h0, cdt), da, db, dh0)

    def back(g, x):
        if g is None:
            return None
        if x.dtype.kind != "c" and g.dtype.kind == "c":
            g = np.ascontiguousarray(g.real)
        return result(g, x.dtype)

    return back(da, a), back(db, b), back(dh0, h0)


# ---- circulant_scan ----------------------------------------------------------------------------

def _circ_args(a, u, h0, fourier):
    fourier = _flag(fourier, "fourier")
    u = real_array(u, "u", 3)
    B, T, n = u.shape
    if fourier:
        a = complex_or_real_array(a, "a", 3)
        if a.dtype.kind != "c":
            raise TypeError(f"argument 'a': expected a complex half spectrum (complex64 or complex128) "
                            f"with fourier=True, got {a.dtype}")
        check_shape(a, "a", (B, T, n // 2 + 1))
    else:
        a = complex_or_real_array(a, "a", 3)
        if a.dtype.kind == "c":
            raise TypeError(f"argument 'a': expected a real dtype (pass fourier=True for a complex "
                            f"half spectrum), got {a.dtype}")
        check_shape(a, "a", (B, T, n))
    h0 = _opt(h0, "h0", (B, n), real_only=True)
    dt = same_dtype(u=u, h0=h0)
    rdt = compute_dtype(dt)
    if fourier:
        want = _COMPLEX_OF[rdt]
        if a.dtype != want:
            raise TypeError(f"argument 'a': expected {want} (the complex dtype matching u's {dt}), got {a.dtype}")
        adt = want
    else:
        same_dtype(u=u, a=a)
        adt = rdt
    return a, u, h0, fourier, dt, rdt, adt


def circulant_scan(a, u, *, h0=None, fourier=False, return_final=False):
    """Circulant linear recurrence h_t = circ(a_t) h_{t-1} + u_t, circ(a)[i, j] = a[(i - j) mod n].

    u: (B, T, n) real; h0: (B, n) real or None. a: (B, T, n) real (same dtype as u), or with
    ``fourier=True`` its half spectrum rfft(a_t) of shape (B, T, n//2 + 1), complex64 for
    float32/float16 u and complex128 for float64 u. The Fourier form is circ(irfft(a_hat, n)):
    like numpy's irfft it ignores the imaginary parts at frequency 0 and (even n) n/2.
    Returns h (B, T, n), or (h, h[:, -1]) when ``return_final``.
    """
    if on_gpu(u):
        return _gpu().circulant_scan(a, u, h0=h0, fourier=fourier, return_final=return_final)
    return_final = _flag(return_final, "return_final")
    a, u, h0, fourier, dt, rdt, adt = _circ_args(a, u, h0, fourier)
    kind = "circ_fourier_fwd" if fourier else "circ_fwd"
    h = np.empty(u.shape, rdt)
    _fn(kind, rdt)(native(a, adt), native(u, rdt), native(h0, rdt), h)
    h = result(h, dt)
    return (h, np.ascontiguousarray(h[:, -1])) if return_final else h


def circulant_scan_vjp(dh, a, u, *, h0=None, fourier=False, dh_last=None):
    """Gradients of ``circulant_scan``: returns (da, du, dh0); dh0 is None when h0 is None.

    dh: (B, T, n) real, dL/dh; dh_last: (B, n) or None, added to dh[:, -1] (the cotangent of
    h_last). With g_t = dh_t + circ(a_{t+1})^T g_{t+1}: du_t = g_t, dh0 = circ(a_0)^T g_0,
    da_t[m] = sum_i g_t[i] h_{t-1}[(i - m) mod n].
    With ``fourier=True`` da is complex (B, T, n//2 + 1): dL/dRe(a_hat) + i dL/dIm(a_hat), the
    packing of PyTorch's .grad for a complex leaf; its imaginary part is 0 at frequency 0 and
    (even n) n/2, which the Fourier form ignores.
    """
    if on_gpu(u):
        return _gpu().circulant_scan_vjp(dh, a, u, h0=h0, fourier=fourier, dh_last=dh_last)
    a, u, h0, fourier, dt, rdt, adt = _circ_args(a, u, h0, fourier)
    dh = real_array(dh, "dh", 3)
    check_shape(dh, "dh", u.shape)
    dh_last = _opt(dh_last, "dh_last", (u.shape[0], u.shape[2]), real_only=True)
    same_dtype(u=u, dh=dh, dh_last=dh_last)
    kind = "circ_fourier_bwd" if fourier else "circ_bwd"
    da, du = np.empty(a.shape, adt), np.empty(u.shape, rdt)
    dh0 = None if h0 is None else np.empty(h0.shape, rdt)
    _fn(kind, rdt)(native(dh, rdt), native(dh_last, rdt), native(a, adt), native(u, rdt),
                   native(h0, rdt), da, du, dh0)
    return (da if fourier else result(da, dt)), result(du, dt), (None if dh0 is None else result(dh0, dt))


# ---- block_circulant_scan ----------------------------------------------------------------------

def _block_args(a, u, h0):
    a = real_array(a, "a", 5)
    u = real_array(u, "u", 3)
    B, T, n = u.shape
    if a.shape[2] != a.shape[3]:
        raise ValueError(f"argument 'a': expected shape (B, T, p, p, k) with a square p x p grid of blocks, "
                         f"got {a.shape}")
    p, k = a.shape[2], a.shape[4]
    if a.shape[:2] != (B, T):
        raise ValueError(f"argument 'a': expected shape ({B}, {T}, p, p, k) (B and T of 'u'), got {a.shape}")
    if p * k != n:
        raise ValueError(f"argument 'u': expected n = p*k = {p}*{k} = {p * k} channels (from 'a' of shape "
                         f"{a.shape}), got shape {u.shape}")
    h0 = _opt(h0, "h0", (B, n), real_only=True)
    dt = same_dtype(u=u, a=a, h0=h0)
    return a, u, h0, dt, compute_dtype(dt)


def block_circulant_scan(a, u, *, h0=None, return_final=False):
    """Block-circulant linear recurrence h_t = A_t h_{t-1} + u_t.

    a: (B, T, p, p, k) real; A_t is the p x p grid of k x k circulant blocks, block (i, j) =
    circ(a_t[i, j]), circ(v)[r, c] = v[(r - c) mod k]. u: (B, T, n) with n = p*k, state index
    i*k + r; h0: (B, n) or None. Returns h (B, T, n), or (h, h[:, -1]) when ``return_final``.
    """
    if on_gpu(u):
        return _gpu().block_circulant_scan(a, u, h0=h0, return_final=return_final)
    return_final = _flag(return_final, "return_final")
    a, u, h0, dt, rdt = _block_args(a, u, h0)
    h = np.empty(u.shape, rdt)
    _fn("block_fwd", rdt)(native(a, rdt), native(u, rdt), native(h0, rdt), h)
    h = result(h, dt)
    return (h, np.ascontiguousarray(h[:, -1])) if return_final else h


def block_circulant_scan_vjp(dh, a, u, *, h0=None, dh_last=None):
    """Gradients of ``block_circulant_scan``: returns (da, du, dh0); dh0 is None when h0 is None.

    dh: (B, T, n) real, dL/dh; dh_last: (B, n) or None, added to dh[:, -1]. With
    g_t = dh_t + A_{t+1}^T g_{t+1}: du_t = g_t, dh0 = A_0^T g_0,
    da_t[i, j, m] = sum_r g_t[i*k + r] h_{t-1}[j*k + (r - m) mod k].
    CUDA arrays (torch / CuPy) run the native GPU backward (float32 inside).
    """
    if on_gpu(u):
        return _gpu().block_circulant_scan_vjp(dh, a, u, h0=h0, dh_last=dh_last)
    a, u, h0, dt, rdt = _block_args(a, u, h0)
    dh = real_array(dh, "dh", 3)
    check_shape(dh, "dh", u.shape)
    dh_last = _opt(dh_last, "dh_last", (u.shape[0], u.shape[2]), real_only=True)
    same_dtype(u=u, dh=dh, dh_last=dh_last)
    da, du = np.empty(a.shape, rdt), np.empty(u.shape, rdt)
    dh0 = None if h0 is None else np.empty(h0.shape, rdt)
    _fn("block_bwd", rdt)(native(dh, rdt), native(dh_last, rdt), native(a, rdt), native(u, rdt),
                          native(h0, rdt), da, du, dh0)
    return result(da, dt), result(du, dt), (None if dh0 is None else result(dh0, dt))
