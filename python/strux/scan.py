"""Linear recurrences (scans) with diagonal, circulant and block-circulant transitions.

Shapes are (B, T, n) channels-last: batch, time, state channels; h_{-1} = h0 ((B, n), zeros
when None).

- ``diag_scan(a, b)``:             h_t = a_t * h_{t-1} + b_t (real or complex); also time-last
  arrays (B, n, T) (``axis=2``), time run backwards (``reverse=True``) and an ``a`` that
  broadcasts to b's shape along batch and time (a time-invariant or batch-shared decay), read
  in place by the CPU kernels (an ``a`` broadcast across channels goes through layout copies;
  on the GPU, time-last arrays with time forwards run in place where the plan takes its row
  kernel, the other layouts through copies).
- ``circulant_scan(a, u)``:        h_t = circ(a_t) h_{t-1} + u_t, circ(a)[i, j] = a[(i - j) mod n];
  ``fourier=True`` takes ``a`` as its half spectrum rfft(a_t) ((B, T, n//2 + 1) complex).
- ``block_circulant_scan(a, u)``:  a (B, T, p, p, k), n = p*k; A_t is the p x p grid of k x k
  circulant blocks, block (i, j) = circ(a_t[i, j]); state index i*k + r.

Computed natively (FFTW + OpenMP): the circulant forms run a complex diagonal scan over the
rfft frequencies. Gradients: the ``*_vjp`` functions (PyTorch's convention for complex values).

Dtypes: float32 and float64 are computed as they are, float16/bfloat16 in float32 and returned
in the input dtype (``diag_scan`` of float16 numpy arrays in channels-last layouts reads and
writes float16 directly; the rest converts through float32 copies). ``diag_scan`` also takes complex64/complex128; there a real argument next to
a complex one is promoted to the complex dtype of the same precision (float32 with complex64,
float64 with complex128; other mixes are a TypeError), and its gradient is the real part of the
complex one. Inputs that are not C-contiguous are copied.
"""
from __future__ import annotations

import numbers

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


def _half_native(a, b, h0, t: int) -> bool:
    """float16 numpy arrays, channels-last: the forward kernel reads and writes float16 itself."""
    f16 = np.dtype(np.float16)
    return t == 1 and a.dtype == f16 and b.dtype == f16 and (h0 is None or h0.dtype == f16)


def _diag_half(a, b, h0, reverse: bool, return_final: bool):
    """diag_scan of float16 arrays (channels-last, a broadcast along batch / time or not)."""
    def bits(x):
        return None if x is None else np.ascontiguousarray(x).view(np.uint16)

    h = np.empty(b.shape, np.float16)
    _ext.scan_diag_half_fwd(bits(a), bits(b), bits(h0), h.view(np.uint16), reverse)
    return (h, np.ascontiguousarray(h[:, 0 if reverse else -1])) if return_final else h


def _diag_args(a, b, h0):
    a = complex_or_real_array(a, "a", 3)
    b = complex_or_real_array(b, "b", 3)
    check_shape(b, "b", a.shape)
    h0 = _opt(h0, "h0", (a.shape[0], a.shape[2]), real_only=False)
    return a, b, h0


# The keywords axis / reverse and a broadcasting `a`: the CPU kernels read numpy arrays in the
# caller's layout (_native_layout); elsewhere they are layout transforms around the (B, T, n)
# kernels: the arrays are brought to the kernels' layout in their own library (torch, CuPy)
# -- a copy -- and h is brought back. A plain call (defaults, a.shape == b.shape) skips all of
# it after one check.

def _plain(a, b, axis, reverse) -> bool:
    """Whether a call needs no layout transform (the one cheap check of the plain call)."""
    return reverse is False and type(axis) is int and axis == 1 and \
        getattr(a, "shape", None) == getattr(b, "shape", None)


def _time_axis(axis) -> int:
    """The time axis of the caller's arrays: 1 ((B, T, n)) or 2 ((B, n, T); -1 is 2)."""
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, numbers.Integral) or int(axis) not in (1, 2, -1):
        raise ValueError(f"argument 'axis': expected 1 (time at axis 1, arrays (B, T, n)) or 2 / -1 (time last, "
                         f"arrays (B, n, T)), got {axis!r}")
    return 1 if int(axis) == 1 else 2


def _layout(a_shape: tuple, b_shape: tuple, axis, reverse):
    """Checks a transformed call by its shapes (any array library); returns (time axis, reverse,
    the shape to broadcast a to, or None)."""
    t, reverse = _time_axis(axis), _flag(reverse, "reverse")
    if len(b_shape) != 3:
        raise ValueError(f"argument 'b': expected 3 dimensions, got {len(b_shape)} (shape {b_shape})")
    # numpy's rules (DESIGN.md), in the caller's layout: a lower-rank `a` (a scalar too) lines up
    # with b's trailing axes, e.g. (n,) for (B, T, n) arrays or (T,) for time-last (B, n, T) ones.
    a3 = _as_3d_shape(a_shape)
    if a3 is None or any(x not in (1, y) for x, y in zip(a3, b_shape)):
        raise ValueError(f"argument 'a': expected a shape that broadcasts to {b_shape}, the shape of 'b' (at "
                         f"most 3 dimensions, aligned with b's last ones, each of size 1 or that of 'b'), "
                         f"got {a_shape}")
    return t, reverse, (None if tuple(a_shape) == tuple(b_shape) else b_shape)


def _as_3d_shape(shape: tuple):
    """`shape` with leading 1s up to 3 dimensions (numpy's broadcasting), or None above 3."""
    return None if len(shape) > 3 else (1,) * (3 - len(shape)) + tuple(shape)


def _layout_args(a, b, axis, reverse):
    """_layout of a public call; CPU arrays come back as numpy arrays, CUDA arrays unchanged."""
    if on_gpu(a):
        ca = cuda_backend()  # the array adapter of the GPU paths (raises when there is no CUDA)
        a, b = ca.array(a, "a", None, None), ca.array(b, "b", 3, None)
    else:
        a, b = complex_or_real_array(a, "a"), complex_or_real_array(b, "b", 3)
    out = _layout(tuple(a.shape), tuple(b.shape), axis, reverse)
    if a.ndim < 3:  # a view with leading 1s: the kernels and layout maps take 3-D arrays
        a = a.reshape(_as_3d_shape(tuple(a.shape)))
    return (a, b) + out


def _lib(x):
    """x's own array library: numpy, torch or cupy."""
    if isinstance(x, np.ndarray):
        return np
    from . import _cuda
    return _cuda.xp(x)


def _relayout(x, t: int, flip: bool, to_kernel: bool, shape=None):
    """x between the caller's layout (time at axis t) and the kernels' C-contiguous (B, T, n),
    time reversed when `flip`; `shape`: broadcast x to it first (caller's layout). Views in x's
    own library, then one copy; differentiable for torch tensors. None stays None."""
    if x is None:
        return None
    xp = _lib(x)
    if shape is not None:
        x = xp.broadcast_to(x, shape)
    if t == 2 and to_kernel:
        x = xp.swapaxes(x, 1, 2)
    if flip:
        x = xp.flip(x, (1,))  # time is at axis 1 on both sides of the swap
    if t == 2 and not to_kernel:
        x = xp.swapaxes(x, 1, 2)
    return x.contiguous() if xp.__name__ == "torch" else xp.ascontiguousarray(x)


def _reduce_to(g, shape):
    """g summed over the axes that broadcasting `shape` to g.shape added or stretched (the
    gradient of a broadcast input)."""
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape) if s == 1 and g.shape[lead + i] != 1)
    if not axes:
        return g
    if isinstance(g, np.ndarray):
        acc = g.dtype if g.dtype in _SUFFIX else np.float32  # half types summed in float32
        return g.sum(axis=axes, dtype=acc).astype(g.dtype, copy=False).reshape(shape)
    return g.sum(axes).reshape(shape)  # torch and CuPy accumulate half types in float32


def diag_scan(a, b, h0=None, *, axis=1, reverse=False, return_final=False):
    """Diagonal linear recurrence h_t = a_t * h_{t-1} + b_t, h_{-1} = h0 (zeros when None).

    a, b: (B, T, n), real or complex (see the module docstring for mixing); ``a`` may broadcast
    to b's shape by numpy's rules (each size 1 or b's; a lower rank lines up with b's last axes in
    the caller's layout), e.g. a time-invariant decay (1, 1, n), (n,) or (B, 1, n). h0: (B, n) or None. ``axis=2`` (or -1) takes time-last arrays (B, n, T) and
    returns h so. With ``reverse=True`` time runs backwards: h_t = a_t * h_{t+1} + b_t, h_T = h0.
    Returns h in b's shape and the result dtype, or (h, h_last) when ``return_final``, h_last
    (B, n) the final state: h_{T-1}, or h_0 when ``reverse``.
    On the CPU the layout keywords and an ``a`` broadcast along batch / time cost no copies; an
    ``a`` broadcast across channels copies to (B, T, n). On the GPU contiguous time-last arrays (time
    forwards, ``a`` not broadcast) run as B * n rows of time with no copies where the plan takes its
    row kernel (enough rows and time steps); the other layouts copy.
    """
    if not _plain(a, b, axis, reverse):
        return _diag_scan_layout(a, b, h0, axis, reverse, return_final)
    if type(a) in _gpu_types and a.is_cuda:
        return _cuda_scan.diag_scan(a, b, h0=h0, return_final=return_final)
    if on_gpu(a):
        return _gpu(a).diag_scan(a, b, h0=h0, return_final=return_final)
    return_final = _flag(return_final, "return_final")
    a, b, h0 = _diag_args(a, b, h0)
    if _half_native(a, b, h0, 1):
        return _diag_half(a, b, h0, False, return_final)
    cdt, out_dt = _diag_dtypes(a=a, b=b, h0=h0)
    h = np.empty(a.shape, cdt)
    _fn("diag_fwd", cdt)(native(a, cdt), native(b, cdt), native(h0, cdt), h)
    h = result(h, out_dt)
    return (h, np.ascontiguousarray(h[:, -1])) if return_final else h


def _native_layout(a, b, t: int) -> bool:
    """Whether the CPU kernels read this layout in place: numpy arrays, a broadcast along batch
    and time only (a broadcast across channels goes through the copies)."""
    return isinstance(a, np.ndarray) and a.shape[3 - t] == b.shape[3 - t]


def _rows_view(a, b, h0, t: int, flip: bool, shape, cuda=None) -> bool:
    """Whether a time-last GPU call (B, n, T) runs as B * n rows of time, the (B * n, T, 1)
    reshapes of its arrays (views of contiguous arrays: no copies): time forwards, `a` not
    broadcast, h0 absent or (B, n), every size >= 1, and the GPU plan takes its row kernel for that
    shape (else the general path, its copies and its checks). `cuda`: whether the arrays are on the
    GPU, when the caller knows (strux.torch); else asked of each array."""
    if t != 2 or flip or shape is not None or 0 in tuple(b.shape):
        return False
    if cuda is None:
        cuda = on_gpu(a) and on_gpu(b) and (h0 is None or on_gpu(h0))
    if not cuda or (h0 is not None and tuple(h0.shape) != tuple(b.shape[:2])):
        return False
    return _gpu(b).runs_as_rows(b)


def _as_rows(x, B: int, n: int):
    """(B, n, T) -> (B * n, T, 1), (B, n) -> (B * n, 1); None stays None."""
    return None if x is None else x.reshape((B * n,) + tuple(x.shape[2:]) + (1,))


def _diag_scan_layout(a, b, h0, axis, reverse, return_final):
    """diag_scan with axis / reverse / a broadcasting: on the CPU the kernels read the caller's
    layout in place; on the GPU time-last arrays run as rows (_rows_view); otherwise the plain
    call on transformed arrays."""
    a, b, t, flip, shape = _layout_args(a, b, axis, reverse)
    if _rows_view(a, b, h0, t, flip, shape):
        B, n, T = b.shape
        out = diag_scan(_as_rows(a, B, n), _as_rows(b, B, n), _as_rows(h0, B, n), return_final=return_final)
        if isinstance(out, tuple):
            return out[0].reshape(B, n, T), out[1].reshape(B, n)
        return out.reshape(B, n, T)
    if _native_layout(a, b, t):
        return_final = _flag(return_final, "return_final")
        B, n = b.shape[0], b.shape[3 - t]
        h0 = _opt(h0, "h0", (B, n), real_only=False)
        if _half_native(a, b, h0, t):
            return _diag_half(a, b, h0, flip, return_final)
        cdt, out_dt = _diag_dtypes(a=a, b=b, h0=h0)
        h = np.empty(b.shape, cdt)
        _fn("diag_layout_fwd", cdt)(native(a, cdt), native(b, cdt), native(h0, cdt), h, t == 2, flip)
        h = result(h, out_dt)
        if not return_final:
            return h
        last = 0 if flip else -1  # the final state: the last step in the direction of time
        return h, np.ascontiguousarray(h[:, last] if t == 1 else h[:, :, last])
    out = diag_scan(_relayout(a, t, flip, True, shape), _relayout(b, t, flip, True), h0,
                    return_final=return_final)
    if isinstance(out, tuple):  # the kernels' last step is the final state in either direction
        return _relayout(out[0], t, flip, False), out[1]
    return _relayout(out, t, flip, False)


def _diag_grads_back(grads, inputs):
    """Each gradient in its input's dtype; a real input next to complex ones gets the real part."""
    out = []
    for g, x in zip(grads, inputs):
        if g is None:
            out.append(None)
            continue
        if x.dtype.kind != "c" and g.dtype.kind == "c":
            g = np.ascontiguousarray(g.real)
        out.append(result(g, x.dtype))
    return tuple(out)


def diag_scan_vjp(dh, a, b, h0=None, *, dh_last=None, axis=1, reverse=False):
    """Gradients of ``diag_scan``: returns (da, db, dh0); dh0 is None when h0 is None.

    dh: dL/dconj(h), in h's shape (that of b); dh_last: (B, n) or None, the cotangent of the
    final state h_last (added to dh at that step). PyTorch's convention: g_t = dh_t +
    conj(a_{t+1}) g_{t+1}, db_t = g_t, da_t = g_t conj(h_{t-1}), dh0 = conj(a_0) g_0 (conj is the
    identity for real values). ``axis`` and ``reverse`` as in diag_scan; the reversed recurrence is
    the plain one on time-flipped arrays, so its gradient is the flipped one: g_t = dh_t +
    conj(a_{t-1}) g_{t-1}, da_t = g_t conj(h_{t+1}), dh0 = conj(a_{T-1}) g_{T-1}. A broadcast ``a``
    gets da in its own shape, summed over the broadcast axes.
    Each gradient has its input's dtype; a real input next to complex ones gets the real part.
    """
    if not _plain(a, b, axis, reverse):
        return _diag_scan_vjp_layout(dh, a, b, h0, dh_last, axis, reverse)
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
    return _diag_grads_back((da, db, dh0), (a, b, h0))


def _diag_scan_vjp_layout(dh, a, b, h0, dh_last, axis, reverse):
    """diag_scan_vjp with axis / reverse / a broadcasting: the layout maps are permutations, so
    the gradient is the plain one on transformed arrays, brought back (da reduced to a's shape)."""
    a_shape = tuple(getattr(a, "shape", np.shape(a)))
    a, b, t, flip, shape = _layout_args(a, b, axis, reverse)  # a lower-rank `a` comes back 3-D
    da, db, dh0 = _diag_scan_vjp_3d(dh, a, b, h0, dh_last, t, flip, shape)
    return (da.reshape(a_shape) if len(a_shape) < 3 else da), db, dh0


def _diag_scan_vjp_3d(dh, a, b, h0, dh_last, t, flip, shape):
    """_diag_scan_vjp_layout on checked arrays (a 3-D, (t, flip, shape) from _layout)."""
    if on_gpu(a):
        dh = cuda_backend().array(dh, "dh", 3, None)
    else:
        dh = complex_or_real_array(dh, "dh", 3)
    if tuple(dh.shape) != tuple(b.shape):
        raise ValueError(f"argument 'dh': expected shape {tuple(b.shape)} (that of h and 'b'), got {tuple(dh.shape)}")
    if _rows_view(a, b, h0, t, flip, shape) and (dh_last is None or tuple(getattr(dh_last, "shape", ())) == b.shape[:2]):
        B, n, T = b.shape
        da, db, dh0 = diag_scan_vjp(_as_rows(dh, B, n), _as_rows(a, B, n), _as_rows(b, B, n), _as_rows(h0, B, n),
                                    dh_last=_as_rows(dh_last, B, n))
        return da.reshape(B, n, T), db.reshape(B, n, T), None if dh0 is None else dh0.reshape(B, n)
    if _native_layout(a, b, t):  # the CPU kernels, in the caller's layout (da in a's own shape)
        B, n = b.shape[0], b.shape[3 - t]
        h0 = _opt(h0, "h0", (B, n), real_only=False)
        dh_last = _opt(dh_last, "dh_last", (B, n), real_only=False)
        cdt, _ = _diag_dtypes(a=a, b=b, h0=h0, dh=dh, dh_last=dh_last)
        da, db = np.empty(a.shape, cdt), np.empty(b.shape, cdt)
        dh0 = None if h0 is None else np.empty(h0.shape, cdt)
        _fn("diag_layout_bwd", cdt)(native(dh, cdt), native(dh_last, cdt), native(a, cdt), native(b, cdt),
                                    native(h0, cdt), da, db, dh0, t == 2, flip)
        return _diag_grads_back((da, db, dh0), (a, b, h0))
    da, db, dh0 = diag_scan_vjp(_relayout(dh, t, flip, True), _relayout(a, t, flip, True, shape),
                                _relayout(b, t, flip, True), h0, dh_last=dh_last)
    da = _relayout(da, t, flip, False)
    return (da if shape is None else _reduce_to(da, tuple(a.shape))), _relayout(db, t, flip, False), dh0


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


def circulant_scan(a, u, h0=None, *, fourier=False, return_final=False):
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


def circulant_scan_vjp(dh, a, u, h0=None, *, fourier=False, dh_last=None):
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


def block_circulant_scan(a, u, h0=None, *, return_final=False):
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


def block_circulant_scan_vjp(dh, a, u, h0=None, *, dh_last=None):
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
