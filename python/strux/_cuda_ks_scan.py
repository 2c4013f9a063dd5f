"""Kronecker-sparse products and linear scans on CUDA device arrays (PyTorch tensors, CuPy arrays).

Arrays pass to the native kernels through DLPack without copies (non-contiguous inputs are made
C-contiguous first: a documented copy). Outputs and scratch are allocated here, of the same kind
(torch or CuPy) and on the same device as the first input, and every kernel runs on the current
stream of that library (``torch.cuda.current_stream()``, ``cupy.cuda.get_current_stream()``),
so the calls compose with CUDA graphs and other work on that stream.

dtypes: float32, float16 and bfloat16 (half types are computed with float32 accumulation and
returned in their own dtype); ks also takes float64, computed in float64 by cuBLAS DGEMM through
the array library's einsum (permuted copies: the strux ks kernels are float32 machines); diag_scan also takes complex64, and float64 / complex128 (computed
in float64); circulant_scan takes float64 too (cuFFT D2Z/Z2D and the complex128 scan).

Functions mirror the CPU API (``strux.ks``, ``strux.scan``): ks_matmul, ks_matmul_vjp, ks_chain,
ks_chain_vjp, diag_scan, diag_scan_vjp, circulant_scan, circulant_scan_vjp, block_circulant_scan,
block_circulant_scan_vjp. Layouts: "bsf" (batch-size-first,
x (batch, N) -> x K^T) and "bsl" (batch-size-last, x (N, batch) -> K x).

Each takes ``options=None``: explicit kernel choices for tests and benchmarks (a dict, see
strux._cuda_options), passed to the plan; ``*_describe`` say in words what a plan chose.
"""
from __future__ import annotations

from . import _cuda_ks_lean as _L
from . import _cuda_options as _O
from . import _ext
from ._arrays import choice as _choice
from .ks import _pattern, _patterns  # one validation of patterns for both backends

_LAYOUTS = ("bsf", "bsl")
_KS_DTYPES = ("float32", "float16", "bfloat16", "float64")
_SCAN_DTYPES = ("float32", "float16", "bfloat16", "complex64", "float64", "complex128")
_DTYPE_CODE = {"float32": 0, "float64": 1, "float16": 2, "bfloat16": 3, "complex64": 4,
               "complex128": 5}  # strux::cuda::DType


_available = None


def available() -> bool:
    """True when this build has the CUDA kernels and a GPU is visible (asked once: the device
    count of a process does not change)."""
    global _available
    if _available is None:
        _available = bool(getattr(_ext, "has_cuda", False)) and hasattr(_ext, "cuda_ks_forward") \
            and _ext.cuda_device_count() > 0
    return _available


# ---- array kinds ------------------------------------------------------------------------------

def _is_torch(x) -> bool:
    return type(x).__module__.split(".")[0] == "torch"


def _is_cupy(x) -> bool:
    return type(x).__module__.split(".")[0] == "cupy"


def _dtname(x) -> str:
    return str(x.dtype).replace("torch.", "")


def _dev_array(x, name: str, ndim: int | None, dtypes):
    """Checks that x is a CUDA torch tensor or CuPy array of rank ndim with an allowed dtype."""
    if x is None:
        raise TypeError(f"argument '{name}': expected a CUDA array, got None")
    if _is_torch(x):
        if not x.is_cuda:
            raise ValueError(f"argument '{name}': expected a tensor on a CUDA device, got device {x.device}")
    elif not _is_cupy(x):
        raise TypeError(f"argument '{name}': expected a torch.Tensor or cupy.ndarray on a CUDA device, "
                        f"got {type(x).__name__}")
    if _dtname(x) not in dtypes:
        raise TypeError(f"argument '{name}': expected dtype {', '.join(dtypes)}, got {_dtname(x)}")
    if ndim is not None and x.ndim != ndim:
        raise ValueError(f"argument '{name}': expected {ndim} dimensions, got {x.ndim} (shape {tuple(x.shape)})")
    for i, s in enumerate(x.shape):
        if s == 0:
            raise ValueError(f"argument '{name}': expected every size >= 1, got shape {tuple(x.shape)} "
                             f"(axis {i} is 0)")
    return x


def _same(ref, refname: str, **arrays):
    """Same kind, device and dtype as `ref`; errors name the argument."""
    for n, x in arrays.items():
        if x is None:
            continue
        if _is_torch(x) != _is_torch(ref):
            raise TypeError(f"argument '{n}': expected the array kind of '{refname}' "
                            f"({type(ref).__name__}), got {type(x).__name__}")
        if _dtname(x) != _dtname(ref):
            raise TypeError(f"argument '{n}': expected dtype {_dtname(ref)} (the dtype of '{refname}'), "
                            f"got {_dtname(x)}")
        if _device_id(x) != _device_id(ref):
            raise ValueError(f"argument '{n}': expected device {_device_id(ref)} (that of '{refname}'), "
                             f"got {_device_id(x)}")


def _device_id(x) -> int:
    return x.device.index if _is_torch(x) else x.device.id


def _contig(x):
    if x is None:
        return None
    if _is_torch(x):
        return x.contiguous()
    import cupy
    return cupy.ascontiguousarray(x)


def _empty(like, shape, dtype=None):
    if _is_torch(like):
        import torch
        return torch.empty(tuple(shape), dtype=like.dtype if dtype is None else getattr(torch, dtype),
                           device=like.device)
    import cupy
    with like.device:
        return cupy.empty(tuple(shape), dtype=like.dtype if dtype is None else dtype)


def _zeros(like, shape, dtype=None):
    if _is_torch(like):
        import torch
        return torch.zeros(tuple(shape), dtype=like.dtype if dtype is None else getattr(torch, dtype),
                           device=like.device)
    import cupy
    with like.device:
        return cupy.zeros(tuple(shape), dtype=like.dtype if dtype is None else dtype)


def _bytes(like, nbytes: int):
    return _empty(like, (max(int(nbytes), 1),), "uint8")


def _cast(x, dtype: str):
    if _dtname(x) == dtype:
        return x
    if _is_torch(x):
        import torch
        return x.to(getattr(torch, dtype))
    return x.astype(dtype)


def _stream(like) -> int:
    if _is_torch(like):
        import torch
        return int(torch.cuda.current_stream(like.device).cuda_stream)
    import cupy
    with like.device:
        return int(cupy.cuda.get_current_stream().ptr)


def _need():
    if not (bool(getattr(_ext, "has_cuda", False)) and hasattr(_ext, "cuda_ks_forward")):
        raise RuntimeError("strux was built without its CUDA backend (ks/scan kernels)")


def _seen(x):
    """After a checked ks call on a CUDA torch tensor: turns on the lean path for the next calls
    (strux._cuda_ks_lean) and the fast GPU dispatch of strux.ks."""
    if not _L.TT and _is_torch(x):
        _L.init()


# ---- ks ---------------------------------------------------------------------------------------

def _rows(p) -> int:
    return p[0] * p[1] * p[3]


def _cols(p) -> int:
    return p[0] * p[2] * p[3]


def _act(x, name, width, layout):
    x = _dev_array(x, name, 2, _KS_DTYPES)
    ax = 1 if layout == "bsf" else 0
    if x.shape[ax] != width:
        want = f"(*, {width})" if layout == "bsf" else f"({width}, *)"
        raise ValueError(f"argument '{name}': expected shape {want} for layout {layout!r}, got {tuple(x.shape)}")
    return x


def _weights(w, name, p):
    w = _dev_array(w, name, 4, _KS_DTYPES)
    if tuple(w.shape) != tuple(p):
        raise ValueError(f"argument '{name}': expected shape {tuple(p)} (the pattern), got {tuple(w.shape)}")
    return w


def _batch(x, layout):
    return x.shape[0] if layout == "bsf" else x.shape[1]


def _xp(x):
    """The array library of x (torch or cupy)."""
    if _is_torch(x):
        import torch
        return torch
    import cupy
    return cupy


def _ks_fwd_f64(x, w, p, layout):
    """float64: the DESIGN.md formula as one einsum of the array library (cuBLAS DGEMM on the
    library's current stream)."""
    a, b, c, d = p
    ein = _xp(x).einsum
    if layout == "bsl":
        return _contig(ein("iljn,iklj->ikjn", x.reshape(a, c, d, -1), w).reshape(a * b * d, -1))
    return _contig(ein("nilj,iklj->nikj", x.reshape(-1, a, c, d), w).reshape(-1, a * b * d))


def _ks_bwd_f64(dy, x, w, p, layout, need_dx, need_dw):
    """float64 gradients: dx = dy K and dw (summed over the batch in float64), as einsums."""
    a, b, c, d = p
    ein = _xp(x).einsum
    if layout == "bsl":
        dyr, xr, sub = dy.reshape(a, b, d, -1), x.reshape(a, c, d, -1), ("ikjn", "iljn")
    else:
        dyr, xr, sub = dy.reshape(-1, a, b, d), x.reshape(-1, a, c, d), ("nikj", "nilj")
    dx = _contig(ein(f"{sub[0]},iklj->{sub[1]}", dyr, w).reshape(x.shape)) if need_dx else None
    dw = _contig(ein(f"{sub[0]},{sub[1]}->iklj", dyr, xr)) if need_dw else None
    return dx, dw


def _no_options_f64(opts):
    if opts:
        raise ValueError("argument 'options': float64 ks runs as einsums of the array library (no "
                         "kernel choice), got options for the float32 / half plans")


def _ks_fwd(x, w, p, layout, opts=0):
    if _dtname(x) == "float64":
        _no_options_f64(opts)
        return _ks_fwd_f64(x, w, p, layout)
    M = _rows(p)
    b = _batch(x, layout)
    y = _empty(x, (b, M) if layout == "bsf" else (M, b))
    _ext.cuda_ks_forward(x, w, y, list(p), layout == "bsl", opts, _stream(x))
    return y


def ks_matmul(x, w, pattern, *, layout: str = "bsf", options=None):
    """One KS factor on the GPU: ``x @ K.T`` ("bsf", x (batch, N)) or ``K @ x`` ("bsl", x (N, batch)).

    ``w`` has shape ``pattern = (a, b, c, d)``, K[i*b*d + k*d + j, i*c*d + l*d + j] = w[i, k, l, j].
    Returns (batch, M) or (M, batch), M = a*b*d, in the dtype of x, on x's device and stream.
    """
    opts = 0 if options is None else _O.ks_code(options)
    if type(x) in _L.TT:  # torch tensors: the lean path when every check passes (see _cuda_ks_lean)
        p, bl = _L.pattern(pattern), _L.layout(layout)
        r = None if p is None or bl is None else _L.ks_ok(x, w, p, bl)
        if r is not None:
            return _L.ks_forward(x, w, p, bl, *r, opts)
    return _ks_matmul_checked(x, w, pattern, layout, opts)


def _ks_matmul_checked(x, w, pattern, layout, opts=0):
    """ks_matmul with every check, copies of non-contiguous inputs and the DLPack entry: the
    path of CuPy arrays and of any torch call the lean path declines."""
    _need()
    layout = _choice(layout, "layout", _LAYOUTS)
    p = _pattern(pattern)
    x = _act(x, "x", _cols(p), layout)
    w = _weights(w, "w", p)
    _same(x, "x", w=w)
    _seen(x)
    return _ks_fwd(_contig(x), _contig(w), p, layout, opts)


def _ks_bwd(dy, x, w, p, layout, need_dx=True, need_dw=True, opts=0):
    if _dtname(x) == "float64":
        _no_options_f64(opts)
        return _ks_bwd_f64(dy, x, w, p, layout, need_dx, need_dw)
    dx = _empty(x, tuple(x.shape)) if need_dx else None
    dw32 = _zeros(x, tuple(p), "float32") if need_dw else None
    _ext.cuda_ks_backward(dy, x, w, dx, dw32, list(p), layout == "bsl", opts, _stream(x))
    return dx, (_cast(dw32, _dtname(x)) if need_dw else None)


def ks_matmul_vjp(dy, x, w, pattern, *, layout: str = "bsf", options=None):
    """Gradients of ``y = ks_matmul(x, w, pattern, layout=layout)`` on the GPU.

    Arguments: ``dy`` (shaped like y), then x, w, pattern as in ks_matmul. Returns ``(dx, dw)``:
    ``dx = dy @ K`` ("bsf"; ``K.T @ dy`` for "bsl"), shaped like x, and
    ``dw[i, k, l, j] = Σ_batch dy[., i*b*d + k*d + j] x[., i*c*d + l*d + j]``, shaped like w, both in
    x's dtype (dw is summed in float32).
    """
    opts = 0 if options is None else _O.ks_code(options)
    if type(x) in _L.TT:
        p, bl = _L.pattern(pattern), _L.layout(layout)
        r = None if p is None or bl is None else _L.vjp_ok(dy, x, w, p, bl)
        if r is not None:
            return _L.ks_backward(dy, x, w, p, bl, *r, True, True, opts)
    _need()
    layout = _choice(layout, "layout", _LAYOUTS)
    p = _pattern(pattern)
    x = _act(x, "x", _cols(p), layout)
    w = _weights(w, "w", p)
    dy = _act(dy, "dy", _rows(p), layout)
    _same(x, "x", w=w, dy=dy)
    if _batch(dy, layout) != _batch(x, layout):
        raise ValueError(f"argument 'dy': expected batch {_batch(x, layout)} (that of 'x'), got shape {tuple(dy.shape)}")
    _seen(x)
    return _ks_bwd(_contig(dy), _contig(x), _contig(w), p, layout, opts=opts)


def _chain_args(x, ws, patterns, layout):
    layout = _choice(layout, "layout", _LAYOUTS)
    ps = _patterns(patterns)
    if not hasattr(ws, "__len__") or len(ws) != len(ps):
        raise ValueError(f"argument 'ws': expected {len(ps)} weight arrays (one per pattern), got "
                         f"{len(ws) if hasattr(ws, '__len__') else type(ws).__name__}")
    ws = [_contig(_weights(w, f"ws[{q}]", p)) for q, (w, p) in enumerate(zip(ws, ps))]
    x = _act(x, "x", _cols(ps[-1]), layout)
    _same(x, "x", **{f"ws[{q}]": w for q, w in enumerate(ws)})
    return _contig(x), ws, ps, layout


def ks_chain(x, ws, patterns, *, layout: str = "bsf", options=None):
    """A chain of KS factors on the GPU: ``x @ (K_1 ⋯ K_P).T`` ("bsf") or ``K_1 ⋯ K_P @ x`` ("bsl").

    One fused launch per factor (K_P first); intermediates are fresh arrays of x's kind.
    """
    opts = 0 if options is None else _O.ks_code(options)
    if type(x) in _L.TT:
        pf, bl = _L.patterns(patterns), _L.layout(layout)
        r = None if pf is None or bl is None else _L.chain_ok(x, ws, pf[0], bl)
        if r is not None:
            return _L.chain_forward(x, ws, pf[0], pf[1], bl, *r, opts)
    _need()
    x, ws, ps, layout = _chain_args(x, ws, patterns, layout)
    _seen(x)
    y = x
    for w, p in zip(reversed(ws), reversed(ps)):
        y = _ks_fwd(y, w, p, layout, opts)
    return y


def ks_chain_vjp(dy, x, ws, patterns, *, layout: str = "bsf", options=None):
    """Gradients of ``y = ks_chain(x, ws, patterns, layout=layout)``: returns ``(dx, [dw_1, …, dw_P])``.

    The forward intermediates are recomputed.
    """
    opts = 0 if options is None else _O.ks_code(options)
    if type(x) in _L.TT:
        pf, bl = _L.patterns(patterns), _L.layout(layout)
        r = None if pf is None or bl is None else _L.chain_vjp_ok(dy, x, ws, pf[0], bl)
        if r is not None:
            return _L.chain_backward(dy, x, ws, pf[0], pf[1], bl, *r, True, None, opts)
    _need()
    x, ws, ps, layout = _chain_args(x, ws, patterns, layout)
    _seen(x)
    dy = _contig(_act(dy, "dy", _rows(ps[0]), layout))
    _same(x, "x", dy=dy)
    if _batch(dy, layout) != _batch(x, layout):
        raise ValueError(f"argument 'dy': expected batch {_batch(x, layout)} (that of 'x'), got shape {tuple(dy.shape)}")
    acts = [x]  # acts[q] is the input of factor P-1-q
    for w, p in zip(reversed(ws[1:]), reversed(ps[1:])):
        acts.append(_ks_fwd(acts[-1], w, p, layout, opts))
    dws = [None] * len(ps)
    g = dy
    for q in range(len(ps)):
        inp = acts[len(ps) - 1 - q]
        g, dws[q] = _ks_bwd(g, inp, ws[q], ps[q], layout, opts=opts)
    return g, dws


def ks_paths(pattern, batch: int, *, layout: str = "bsf", dtype: str = "float32", options=None):
    """(forward path, backward_x path, (backward_w path, its batch chunk)) a plan picks: "kernels",
    "blas", "stream" or "tr" (tests, bench)."""
    _need()
    p, bl = list(_pattern(pattern)), _choice(layout, "layout", _LAYOUTS) == "bsl"
    dt, code = _DTYPE_CODE[_choice(dtype, "dtype", _KS_DTYPES[:3])], _O.ks_code(options)
    fwd, bx = _ext.cuda_ks_path(p, int(batch), bl, dt, code)
    return fwd, bx, tuple(_ext.cuda_ks_dw_path(p, int(batch), bl, dt, code))


def ks_describe(pattern, batch: int, *, layout: str = "bsf", dtype: str = "float32", options=None) -> str:
    """What the ks plan for these arguments chose, in words."""
    _need()
    return _ext.cuda_ks_describe(list(_pattern(pattern)), int(batch),
                                 _choice(layout, "layout", _LAYOUTS) == "bsl",
                                 _DTYPE_CODE[_choice(dtype, "dtype", _KS_DTYPES[:3])], _O.ks_code(options))


# ---- scans ------------------------------------------------------------------------------------

def _scan_args(a, b, h0, names=("a", "b")):
    a = _dev_array(a, names[0], 3, _SCAN_DTYPES)
    b = _dev_array(b, names[1], 3, _SCAN_DTYPES)
    if tuple(b.shape) != tuple(a.shape):
        raise ValueError(f"argument '{names[1]}': expected shape {tuple(a.shape)} (that of '{names[0]}'), got {tuple(b.shape)}")
    _same(a, names[0], **{names[1]: b})
    if h0 is not None:
        h0 = _dev_array(h0, "h0", 2, _SCAN_DTYPES)
        if tuple(h0.shape) != (a.shape[0], a.shape[2]):
            raise ValueError(f"argument 'h0': expected shape {(a.shape[0], a.shape[2])} (B, n), got {tuple(h0.shape)}")
        _same(a, names[0], h0=h0)
    return _contig(a), _contig(b), _contig(h0)


def _flag(v, name):
    if not isinstance(v, bool):
        raise TypeError(f"argument '{name}': expected a bool, got {type(v).__name__}")
    return v


def _diag_fwd(a, b, h0, scale=1.0, algo=-1):
    B, T, n = a.shape
    h = _empty(a, tuple(a.shape))
    ws = _bytes(a, _ext.cuda_diag_scan_workspace(B, T, n, _DTYPE_CODE[_dtname(a)]))
    _ext.cuda_diag_scan_forward(a, b, h0, h, ws, float(scale), algo, _stream(a))
    return h


def diag_scan(a, b, *, h0=None, return_final=False, options=None):
    """h_t = a_t ⊙ h_{t-1} + b_t on the GPU, h_{-1} = h0 (zeros when None); a, b (B, T, n).

    One pass over a and b (chunked along T with a decoupled look-back, so long sequences fill
    the GPU). Returns h (B, T, n), or (h, h[:, -1]) when ``return_final``.
    """
    _need()
    return_final = _flag(return_final, "return_final")
    algo = _O.diag_scan_code(options)
    a, b, h0 = _scan_args(a, b, h0)
    h = _diag_fwd(a, b, h0, 1.0, algo)
    return (h, h[:, -1]) if return_final else h


def _diag_bwd(dh, a, h, h0, algo=-1):
    B, T, n = a.shape
    da, db = _empty(a, tuple(a.shape)), _empty(a, tuple(a.shape))
    dh0 = _empty(a, (B, n)) if h0 is not None else None
    ws = _bytes(a, _ext.cuda_diag_scan_workspace(B, T, n, _DTYPE_CODE[_dtname(a)]))
    _ext.cuda_diag_scan_backward(a, h, h0, dh, da, db, dh0, ws, algo, _stream(a))
    return da, db, dh0


def diag_scan_describe(B: int, T: int, n: int, dtype: str = "float32", options=None) -> str:
    """What the diag_scan plan for this shape and dtype chose, in words."""
    _need()
    return _ext.cuda_diag_scan_describe(int(B), int(T), int(n), _DTYPE_CODE[_choice(dtype, "dtype", _SCAN_DTYPES)],
                                        _O.diag_scan_code(options))


def diag_scan_vjp(dh, a, b, *, h0=None, dh_last=None, h=None, options=None):
    """Gradients of ``diag_scan`` on the GPU: returns (da, db, dh0); dh0 is None when h0 is None.

    dh (B, T, n) = dL/dconj(h); dh_last (B, n) or None, the cotangent of h[:, -1] (added to
    dh[:, -1]); h: the forward's output if at hand (else it is recomputed). One reverse pass:
    g_t = dh_t + conj(a_{t+1}) g_{t+1}, db = g, da_t = g_t conj(h_{t-1}), dh0 = conj(a_0) g_0.
    """
    _need()
    algo = _O.diag_scan_code(options)
    a, b, h0 = _scan_args(a, b, h0)
    dh = _dev_array(dh, "dh", 3, _SCAN_DTYPES)
    if tuple(dh.shape) != tuple(a.shape):
        raise ValueError(f"argument 'dh': expected shape {tuple(a.shape)}, got {tuple(dh.shape)}")
    _same(a, "a", dh=dh)
    dh = _contig(dh)
    if dh_last is not None:
        dh_last = _dev_array(dh_last, "dh_last", 2, _SCAN_DTYPES)
        if tuple(dh_last.shape) != (a.shape[0], a.shape[2]):
            raise ValueError(f"argument 'dh_last': expected shape {(a.shape[0], a.shape[2])}, got {tuple(dh_last.shape)}")
        _same(a, "a", dh_last=dh_last)
        dh = dh.clone() if _is_torch(dh) else dh.copy()
        dh[:, -1] += dh_last
    if h is None:
        h = _diag_fwd(a, b, h0, 1.0, algo)
    else:
        h = _dev_array(h, "h", 3, _SCAN_DTYPES)
        if tuple(h.shape) != tuple(a.shape):
            raise ValueError(f"argument 'h': expected shape {tuple(a.shape)}, got {tuple(h.shape)}")
        _same(a, "a", h=h)
        h = _contig(h)
    return _diag_bwd(dh, a, h, h0, algo)


_REALS = ("float32", "float16", "bfloat16", "float64")  # real scans (circulant, block-circulant)


def _real_cotangents(dh, dh_last, u, shape, real):
    """Checks a real scan's cotangents against u (dh of `shape`, dh_last (B, n) or None);
    returns them contiguous in the compute dtype `real`."""
    B, T, n = shape
    dh = _dev_array(dh, "dh", 3, _REALS)
    if tuple(dh.shape) != (B, T, n):
        raise ValueError(f"argument 'dh': expected shape {(B, T, n)}, got {tuple(dh.shape)}")
    _same(u, "u", dh=dh)
    if dh_last is not None:
        dh_last = _dev_array(dh_last, "dh_last", 2, _REALS)
        if tuple(dh_last.shape) != (B, n):
            raise ValueError(f"argument 'dh_last': expected shape {(B, n)}, got {tuple(dh_last.shape)}")
        _same(u, "u", dh_last=dh_last)
        dh_last = _contig(_cast(dh_last, real))
    return _contig(_cast(dh, real)), dh_last


def _folded(dh, dh_last):
    """A copy of dh with dh_last added to its last step (the cotangent of h[:, -1])."""
    dh = dh.clone() if _is_torch(dh) else dh.copy()
    dh[:, -1] += dh_last
    return dh


def _circ_args(a, u, h0, fourier):
    """Checks circulant_scan's arrays; returns contiguous u, h0 and a in the compute precision
    (float64 for float64 u, else float32; a complex for fourier=True), and u's dtype."""
    fourier = _flag(fourier, "fourier")
    u = _dev_array(u, "u", 3, _REALS)
    B, T, n = u.shape
    real = "float64" if _dtname(u) == "float64" else "float32"
    if fourier:
        a = _dev_array(a, "a", 3, ("complex128",) if real == "float64" else ("complex64",))
        want = (B, T, n // 2 + 1)
    else:
        a = _dev_array(a, "a", 3, _REALS)
        want = (B, T, n)
        _same(u, "u", a=a)
    if tuple(a.shape) != want:
        raise ValueError(f"argument 'a': expected shape {want}, got {tuple(a.shape)}")
    if _device_id(a) != _device_id(u):
        raise ValueError(f"argument 'a': expected device {_device_id(u)} (that of 'u'), got {_device_id(a)}")
    if h0 is not None:
        h0 = _dev_array(h0, "h0", 2, _REALS)
        if tuple(h0.shape) != (B, n):
            raise ValueError(f"argument 'h0': expected shape {(B, n)} (B, n), got {tuple(h0.shape)}")
        _same(u, "u", h0=h0)
    cr = lambda x: None if x is None else _contig(_cast(x, real))
    a = _contig(a) if fourier else cr(a)
    return a, cr(u), cr(h0), fourier, _dtname(u)


def circulant_scan(a, u, *, h0=None, fourier=False, return_final=False):
    """h_t = circ(a_t) h_{t-1} + u_t on the GPU (circ(a)[i, j] = a[(i - j) mod n]); u real (B, T, n).

    a: real (B, T, n), or with ``fourier=True`` its half spectrum rfft(a_t) (B, T, n//2 + 1)
    complex64 (imaginary parts at frequency 0 and, even n, n/2 ignored, as irfft does).
    cuFFT rfft over n, the complex diagonal scan of the half spectra, irfft; computed in float32
    (float16/bfloat16 are cast and the result cast back). Returns h, or (h, h[:, -1]).
    """
    _need()
    return_final = _flag(return_final, "return_final")
    a, u32, h032, fourier, dt = _circ_args(a, u, h0, fourier)
    B, T, n = u32.shape
    if n == 1:  # a 1x1 circulant is a scalar: no transform needed
        a1 = _contig(a.real) if fourier else a
        h = _cast(_diag_fwd(a1, u32, h032), dt)
        return (h, h[:, -1]) if return_final else h
    h = _empty(u32, (B, T, n))
    ws = _bytes(u32, _ext.cuda_circulant_scan_workspace(_device_id(u32), B, T, n, _DTYPE_CODE[_dtname(u32)]))
    if fourier:
        _ext.cuda_circulant_scan_forward_fourier(a, u32, h032, h, ws, _stream(u32))
    else:
        _ext.cuda_circulant_scan_forward(a, u32, h032, h, ws, _stream(u32))
    h = _cast(h, dt)
    return (h, h[:, -1]) if return_final else h


def circulant_scan_vjp(dh, a, u, *, h0=None, fourier=False, dh_last=None):
    """Gradients of ``circulant_scan`` on the GPU: returns (da, du, dh0); dh0 is None when h0 is None.

    dh (B, T, n) real = dL/dh; dh_last (B, n) or None, added to dh[:, -1]. With
    g_t = dh_t + circ(a_{t+1})^T g_{t+1}: du = g, dh0 = circ(a_0)^T g_0,
    da_t[m] = Σ_i g_t[i] h_{t-1}[(i - m) mod n]; with ``fourier=True`` da is complex64
    (B, T, n//2 + 1), dL/dRe(a_hat) + i dL/dIm(a_hat). One native pass in the Fourier domain
    (rfft, the complex diagonal scan forward to recompute ĥ and backward, irfft); float32 inside,
    real gradients returned in u's dtype.
    """
    _need()
    a, u32, h032, fourier, dt = _circ_args(a, u, h0, fourier)
    B, T, n = u32.shape
    real = _dtname(u32)
    dh, dh_last = _real_cotangents(dh, dh_last, u, (B, T, n), real)
    if dh_last is not None:
        dh = _folded(dh, dh_last)
    back = lambda x: None if x is None else _cast(x, dt)
    if n == 1:  # scalar recurrence
        a1 = _contig(a.real) if fourier else a
        da, du, dh0 = _diag_bwd(dh, a1, _diag_fwd(a1, u32, h032), h032)
        if fourier:
            da = _cast(da, "complex128" if real == "float64" else "complex64")
        return (da if fourier else back(da)), back(du), back(dh0)
    da = _empty(a, tuple(a.shape))
    du = _empty(u32, (B, T, n))
    dh0 = _empty(u32, (B, n)) if h032 is not None else None
    ws = _bytes(u32, _ext.cuda_circulant_scan_workspace(_device_id(u32), B, T, n, _DTYPE_CODE[_dtname(u32)]))
    _ext.cuda_circulant_scan_backward(a, fourier, u32, h032, dh, da, du, dh0, ws, _stream(u32))
    return (da if fourier else back(da)), back(du), back(dh0)



def _block_args(a, u, h0):
    """Checks block_circulant_scan's arrays; returns contiguous a, u, h0 in the compute dtype
    (float64 for float64 u, else float32), (p, k) and u's dtype."""
    a = _dev_array(a, "a", 5, _REALS)
    u = _dev_array(u, "u", 3, _REALS)
    B, T, n = u.shape
    if a.shape[2] != a.shape[3] or tuple(a.shape[:2]) != (B, T):
        raise ValueError(f"argument 'a': expected shape ({B}, {T}, p, p, k), got {tuple(a.shape)}")
    p, k = a.shape[2], a.shape[4]
    if p * k != n:
        raise ValueError(f"argument 'u': expected n = p*k = {p * k} channels, got shape {tuple(u.shape)}")
    _same(u, "u", a=a)
    if h0 is not None:
        h0 = _dev_array(h0, "h0", 2, _REALS)
        if tuple(h0.shape) != (B, n):
            raise ValueError(f"argument 'h0': expected shape {(B, n)} (B, n), got {tuple(h0.shape)}")
        _same(u, "u", h0=h0)
    real = "float64" if _dtname(u) == "float64" else "float32"
    cr = lambda x: None if x is None else _contig(_cast(x, real))
    return cr(a), cr(u), cr(h0), (p, k), _dtname(u)


# float64: the same Fourier-domain algorithm in the array library (its cuFFT Z2D/D2Z and batched
# complex128 products, one step of the p x p recurrence per time step): float64 accuracy where
# the strux kernels compute in float32. Slower (T small launches per call); for checking and
# for users who need float64.

def _block_states_f64(A, U, H0):
    """H_t = A_t H_{t-1} + U_t per frequency; A (B, T, p, p, f), U (B, T, p, f), H0 (B, p, f) or
    None (zeros: A_0 * 0 is still formed, so a NaN in A_0 gives NaN, as the formula does)."""
    ein = _xp(U).einsum
    Hs = _empty(U, tuple(U.shape), "complex128")
    if H0 is None:
        H0 = _zeros(U, (U.shape[0], U.shape[2], U.shape[3]), "complex128")
    H = ein("bijf,bjf->bif", A[:, 0], H0) + U[:, 0]
    Hs[:, 0] = H
    for t in range(1, U.shape[1]):
        H = ein("bijf,bjf->bif", A[:, t], H) + U[:, t]
        Hs[:, t] = H
    return Hs


def _block_fwd_f64(a, u, h0, p, k):
    fft = _xp(u).fft
    B, T, n = u.shape
    H0 = None if h0 is None else fft.rfft(h0.reshape(B, p, k))
    Hs = _block_states_f64(fft.rfft(a), fft.rfft(u.reshape(B, T, p, k)), H0)
    return _contig(fft.irfft(Hs, k).reshape(B, T, n))


def _block_bwd_f64(dh, a, u, h0, p, k):
    """g_t = dh_t + A_{t+1}^T g_{t+1}: in the Fourier domain G_t = D_t + A_{t+1}^H G_{t+1}
    (circ(x)^T has the spectrum conj(X)); du = g, dh0 = A_0^T g_0 and da_t[i, j] = the cyclic
    cross-correlation of g_t[i] and h_{t-1}[j], whose spectrum is G_t[i] conj(H_{t-1}[j])."""
    xp = _xp(u)
    fft, ein = xp.fft, xp.einsum
    B, T, n = u.shape
    A = fft.rfft(a)
    H0 = None if h0 is None else fft.rfft(h0.reshape(B, p, k))
    Hs = _block_states_f64(A, fft.rfft(u.reshape(B, T, p, k)), H0)
    D = fft.rfft(dh.reshape(B, T, p, k))
    Gs = _empty(D, tuple(D.shape), "complex128")
    G = D[:, T - 1]
    Gs[:, T - 1] = G
    for t in range(T - 2, -1, -1):
        G = D[:, t] + ein("bjif,bjf->bif", A[:, t + 1].conj(), G)
        Gs[:, t] = G
    Hprev = _zeros(D, tuple(D.shape), "complex128")
    Hprev[:, 1:] = Hs[:, :-1]
    if H0 is not None:
        Hprev[:, 0] = H0
    da = _contig(fft.irfft(ein("btif,btjf->btijf", Gs, Hprev.conj()), k))
    du = _contig(fft.irfft(Gs, k).reshape(B, T, n))
    dh0 = None if h0 is None else _contig(fft.irfft(ein("bjif,bjf->bif", A[:, 0].conj(), Gs[:, 0]), k).reshape(B, n))
    return da, du, dh0


def _block_code(options, dt):
    code = _O.block_scan_code(options)
    if dt == "float64" and code != (-1, 0):
        raise ValueError("argument 'options': float64 block_circulant_scan runs in the array library (no "
                         "kernel choice), got options for the float32 plan")
    return code


def block_circulant_scan(a, u, *, h0=None, return_final=False, options=None):
    """Block-circulant h_t = A_t h_{t-1} + u_t on the GPU; a (B, T, p, p, k) real, u (B, T, n = p k).

    A_t is the p x p grid of k x k circulant blocks, block (i, j) = circ(a_t[i, j]); state index
    i*k + r. cuFFT rfft over k, one p x p complex recurrence per frequency (in chunks of time when
    B*(k//2+1) is too small to fill the GPU), irfft; float32 inside (float16/bfloat16 cast and
    the result cast back); float64 runs the same algorithm in the array library, in float64.
    Returns h, or (h, h[:, -1]).
    """
    _need()
    return_final = _flag(return_final, "return_final")
    a32, u32, h032, (p, k), dt = _block_args(a, u, h0)
    reg, chunk = _block_code(options, dt)
    B, T, n = u32.shape
    if dt == "float64":
        h = _block_fwd_f64(a32, u32, h032, p, k)
        return (h, h[:, -1]) if return_final else h
    h = _empty(u32, (B, T, n))
    ws = _bytes(u32, _ext.cuda_block_circulant_scan_workspace(_device_id(u32), B, T, p, k, reg, chunk))
    _ext.cuda_block_circulant_scan_forward(a32, u32, h032, h, ws, reg, chunk, _stream(u32))
    h = _cast(h, dt)
    return (h, h[:, -1]) if return_final else h


def block_circulant_scan_vjp(dh, a, u, *, h0=None, dh_last=None, options=None):
    """Gradients of ``block_circulant_scan`` on the GPU: returns (da, du, dh0); dh0 is None when h0 is None.

    dh (B, T, n) real = dL/dh; dh_last (B, n) or None, the cotangent of h[:, -1] (added to
    dh[:, -1]). With g_t = dh_t + A_{t+1}^T g_{t+1}: du = g, dh0 = A_0^T g_0,
    da_t[i, j, m] = sum_r g_t[i*k + r] h_{t-1}[j*k + (r - m) mod k]. One native pass in the
    Fourier domain over k (rfft of a, u, h0, dh, dh_last; the forward recurrence recomputes the
    state spectra; the adjoint recurrence G_t = D_t + A_{t+1}^H G_{t+1} per frequency with
    da_hat_t = G_t conj(H_{t-1}); irfft). float32 inside, gradients returned in u's dtype.
    """
    _need()
    a32, u32, h032, (p, k), dt = _block_args(a, u, h0)
    reg, chunk = _block_code(options, dt)
    B, T, n = u32.shape
    real = _dtname(u32)
    dh, dh_last = _real_cotangents(dh, dh_last, u, (B, T, n), real)
    if real == "float64":
        return _block_bwd_f64(dh if dh_last is None else _folded(dh, dh_last), a32, u32, h032, p, k)
    da = _empty(a32, tuple(a32.shape))
    du = _empty(u32, (B, T, n))
    dh0 = _empty(u32, (B, n)) if h032 is not None else None
    ws = _bytes(u32, _ext.cuda_block_circulant_scan_backward_workspace(_device_id(u32), B, T, p, k, reg, chunk))
    _ext.cuda_block_circulant_scan_backward(a32, u32, h032, dh, dh_last, da, du, dh0, ws, reg, chunk, _stream(u32))
    back = lambda x: None if x is None else _cast(x, dt)
    return back(da), back(du), back(dh0)


def block_circulant_scan_path(B, T, p, k, device=0, options=None):
    """(register kernels?, time steps per chunk) the GPU plan picks for this shape (tests, bench)."""
    _need()
    return tuple(_ext.cuda_block_circulant_scan_path(int(device), int(B), int(T), int(p), int(k),
                                                     *_O.block_scan_code(options)))


def block_circulant_scan_describe(B, T, p, k, device=0, options=None) -> str:
    """What the float32 block_circulant_scan plan for this shape chose, in words."""
    _need()
    return _ext.cuda_block_circulant_scan_describe(int(device), int(B), int(T), int(p), int(k),
                                                   *_O.block_scan_code(options))
