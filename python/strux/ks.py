"""Kronecker-sparse (KS) products: butterfly, Monarch and Kaleidoscope factors and chains.

A pattern ``(a, b, c, d)`` describes K with ``M = a*b*d`` rows and ``N = a*c*d`` columns,
support ``I_a ⊗ 1_{b×c} ⊗ I_d`` and values ``w`` of shape ``(a, b, c, d)``::

    K[i*b*d + k*d + j, i*c*d + l*d + j] = w[i, k, l, j]     (every other entry is 0)

Layouts: ``"bsf"`` (batch-size-first, default) takes x of shape (batch, N) and returns
``x @ K.T`` (batch, M); ``"bsl"`` (batch-size-last) takes x of shape (N, batch) and returns
``K @ x`` (M, batch). A chain ``patterns = [π_1, …, π_P]`` with ``a_p c_p d_p == a_{p+1} b_{p+1}
d_{p+1}`` multiplies by ``K = K_1 K_2 ⋯ K_P`` (K_P is applied first).

float32 and float64 are computed natively; float16/bfloat16 are computed in float32 and the
results cast back. Non-contiguous inputs are copied to C order first.
"""
from __future__ import annotations

import numpy as np

from . import _ext
from ._arrays import (check_shape, cuda_backend, on_gpu, choice, compute_dtype, native, real_array, result,
                      same_dtype)
from ._ks_pattern import cols as _cols, pattern as _pattern, patterns as _patterns, rows as _rows

_LAYOUTS = ("bsf", "bsl")


# Tensor types whose CUDA instances go straight to the GPU path (filled here once one has gone
# there: torch.Tensor, nn.Parameter), skipping the DLPack device probe of on_gpu.
_gpu_types: tuple = ()
_cuda_ks = None  # strux._cuda_ks, set with _gpu_types


def _gpu(x=None):
    """The CUDA path of ks (torch / CuPy arrays), or a clear error when absent."""
    global _gpu_types, _cuda_ks
    cuda_backend()  # raises when this build or machine has no CUDA
    from . import _cuda_ks
    if not _gpu_types and x is not None:
        _gpu_types, _cuda_ks = _cuda_ks.fast_types(x), _cuda_ks
    return _cuda_ks


def _act(x, name: str, width: int, layout: str) -> np.ndarray:
    """A rank-2 activation with `width` along the layout's feature axis."""
    a = real_array(x, name, 2)
    check_shape(a, name, (None, width) if layout == "bsf" else (width, None))
    return a


def _weights(w, name: str, p) -> np.ndarray:
    a = real_array(w, name, 4)
    check_shape(a, name, p)
    return a


def _weight_list(ws, ps) -> list:
    if isinstance(ws, np.ndarray) or not hasattr(ws, "__len__"):
        raise ValueError(f"argument 'ws': expected a list of {len(ps)} weight arrays, got {type(ws).__name__}")
    if len(ws) != len(ps):
        raise ValueError(f"argument 'ws': expected {len(ps)} weight arrays (one per pattern), got {len(ws)}")
    return [_weights(w, f"ws[{q}]", p) for q, (w, p) in enumerate(zip(ws, ps))]


def _fn(name: str, dt: np.dtype):
    return getattr(_ext, name + ("_f32" if dt == np.float32 else "_f64"))


def _flat(ps) -> list:
    return [v for p in ps for v in p]


def ks_matmul(x, w, pattern, *, layout: str = "bsf"):
    """One KS factor: ``x @ K.T`` (layout "bsf", x (batch, N)) or ``K @ x`` ("bsl", x (N, batch)).

    ``w`` has shape ``pattern = (a, b, c, d)``; ``K`` is defined in the module docstring.
    Returns an array of shape (batch, M) or (M, batch) in the dtype of x.
    """
    if type(x) in _gpu_types and x.is_cuda:
        return _cuda_ks.ks_matmul(x, w, pattern, layout=layout)
    if on_gpu(x):
        return _gpu(x).ks_matmul(x, w, pattern, layout=layout)
    layout = choice(layout, "layout", _LAYOUTS)
    p = _pattern(pattern)
    w = _weights(w, "w", p)
    x = _act(x, "x", _cols(p), layout)
    dt = same_dtype(x=x, w=w)
    cdt = compute_dtype(dt)
    return result(_fn("ks_matmul", cdt)(native(x, cdt), native(w, cdt), list(p), layout), dt)


def ks_matmul_vjp(dy, x, w, pattern, *, layout: str = "bsf"):
    """Gradients of one KS factor ``y = ks_matmul(x, w, pattern, layout=layout)``.

    Arguments: ``dy`` (the cotangent of y, shaped like y), then x, w, pattern as in ks_matmul.
    Returns ``(dx, dw)``: ``dx = dy @ K`` for "bsf" (``K.T @ dy`` for "bsl"), shaped like x, and
    ``dw[i, k, l, j] = Σ_t dy[t, i*b*d + k*d + j] * x[t, i*c*d + l*d + j]`` ("bsf"; for "bsl" the
    batch runs along axis 1), shaped like w. Both in the dtype of x.
    """
    if type(x) in _gpu_types and x.is_cuda:
        return _cuda_ks.ks_matmul_vjp(dy, x, w, pattern, layout=layout)
    if on_gpu(x):
        return _gpu(x).ks_matmul_vjp(dy, x, w, pattern, layout=layout)
    layout = choice(layout, "layout", _LAYOUTS)
    p = _pattern(pattern)
    w = _weights(w, "w", p)
    x = _act(x, "x", _cols(p), layout)
    dy = _act(dy, "dy", _rows(p), layout)
    batch_axis = 0 if layout == "bsf" else 1
    if dy.shape[batch_axis] != x.shape[batch_axis]:
        raise ValueError(f"argument 'dy': expected batch {x.shape[batch_axis]} (that of 'x') along axis "
                         f"{batch_axis}, got shape {dy.shape}")
    dt = same_dtype(x=x, w=w, dy=dy)
    cdt = compute_dtype(dt)
    dx, dw = _fn("ks_matmul_vjp", cdt)(native(dy, cdt), native(x, cdt), native(w, cdt), list(p), layout)
    return result(dx, dt), result(dw, dt)


def ks_chain(x, ws, patterns, *, layout: str = "bsf"):
    """A chain of KS factors: ``x @ (K_1 K_2 ⋯ K_P).T`` ("bsf") or ``K_1 ⋯ K_P @ x`` ("bsl").

    ``patterns[p]`` is ``(a_p, b_p, c_p, d_p)`` with ``a_p*c_p*d_p == a_{p+1}*b_{p+1}*d_{p+1}``;
    ``ws[p]`` has shape ``patterns[p]``. x has N = a_P*c_P*d_P features, the result
    M = a_1*b_1*d_1. K_P is applied first.
    """
    if type(x) in _gpu_types and x.is_cuda:
        return _cuda_ks.ks_chain(x, ws, patterns, layout=layout)
    if on_gpu(x):
        return _gpu(x).ks_chain(x, ws, patterns, layout=layout)
    layout = choice(layout, "layout", _LAYOUTS)
    ps = _patterns(patterns)
    ws = _weight_list(ws, ps)
    x = _act(x, "x", _cols(ps[-1]), layout)
    dt = same_dtype(x=x, **{f"ws[{q}]": w for q, w in enumerate(ws)})
    cdt = compute_dtype(dt)
    y = _fn("ks_chain", cdt)(native(x, cdt), [native(w, cdt) for w in ws], _flat(ps), layout)
    return result(y, dt)


def ks_chain_vjp(dy, x, ws, patterns, *, layout: str = "bsf"):
    """Gradients of ``y = ks_chain(x, ws, patterns, layout=layout)``.

    Arguments: ``dy`` (the cotangent of y, shaped like y), then x, ws, patterns as in ks_chain.
    Returns ``(dx, [dw_1, …, dw_P])``: dx shaped like x (``dy @ K`` for "bsf", ``K.T @ dy`` for
    "bsl", K = K_1 ⋯ K_P) and one gradient per weight array, shaped like it. The forward
    intermediates are recomputed (not taken from an earlier ks_chain call).
    """
    if type(x) in _gpu_types and x.is_cuda:
        return _cuda_ks.ks_chain_vjp(dy, x, ws, patterns, layout=layout)
    if on_gpu(x):
        return _gpu(x).ks_chain_vjp(dy, x, ws, patterns, layout=layout)
    layout = choice(layout, "layout", _LAYOUTS)
    ps = _patterns(patterns)
    ws = _weight_list(ws, ps)
    x = _act(x, "x", _cols(ps[-1]), layout)
    dy = _act(dy, "dy", _rows(ps[0]), layout)
    batch_axis = 0 if layout == "bsf" else 1
    if dy.shape[batch_axis] != x.shape[batch_axis]:
        raise ValueError(f"argument 'dy': expected batch {x.shape[batch_axis]} (that of 'x') along axis "
                         f"{batch_axis}, got shape {dy.shape}")
    dt = same_dtype(x=x, dy=dy, **{f"ws[{q}]": w for q, w in enumerate(ws)})
    cdt = compute_dtype(dt)
    dx, dws = _fn("ks_chain_vjp", cdt)(native(dy, cdt), native(x, cdt), [native(w, cdt) for w in ws],
                                       _flat(ps), layout)
    return result(dx, dt), [result(g, dt) for g in dws]


def ks_dense(w, pattern):
    """The dense (M, N) matrix K of one factor, in the dtype of w (for tests and small sizes)."""
    p = _pattern(pattern)
    w = _weights(w, "w", p)
    a, b, c, d = p
    i, k, l, j = np.indices(p, sparse=True)
    K = np.zeros((a * b * d, a * c * d), dtype=w.dtype)
    K[i * b * d + k * d + j, i * c * d + l * d + j] = w
    return K
