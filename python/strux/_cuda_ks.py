"""Kronecker-sparse products on the GPU, for torch tensors and CuPy arrays (strux.ks and
strux.torch call here).

One path: the arrays are checked once, then their device addresses and sizes go to the native
entries (python/src/bind_cuda_ks.cpp), which keep KsPlans in the plan cache (per host thread:
a plan reserves that thread's cuBLAS resources) and launch on the current stream of the arrays'
library. A small product costs tens of microseconds of GPU time, so the checks of a torch call
are cheap attribute tests (``*_ok``): a call either passes them all, or takes the full checks
(``_checked_*``), which raise errors that name the argument, make non-contiguous inputs
contiguous (a documented copy) and cover CuPy arrays. Both end in the same launchers.

dtypes: float32, float16 and bfloat16 (float32 accumulation, results in the input dtype);
float64, computed in float64 by the operator layer's direct kernels (strux::op::KSFactor /
KSChain through python/src/bind_cuda_f64.cpp; a whole chain in one call). Layouts: "bsf"
(x (batch, N) -> x K^T) and "bsl" (x (N, batch) -> K x). Every function takes
``options=None``: explicit kernel choices (strux._cuda_options), passed to the plan.
"""
from __future__ import annotations

import functools

from . import _cuda as _a
from . import _cuda_options as _O
from . import _ext
from ._arrays import choice as _choice
from ._cuda import DTYPE_CODE as _DTYPE_CODE
from ._cuda import available  # noqa: F401  (the GPU modules answer available() alike)
from ._ks_pattern import cols as _cols, pattern as _pattern, patterns as _patterns, rows as _rows

_LAYOUTS = ("bsf", "bsl")
_KS_DTYPES = ("float32", "float16", "bfloat16", "float64")
_KERNEL_DTYPES = ("float32", "float16", "bfloat16")

_TDT: dict = {}  # torch dtype -> DType code of the kernel dtypes, filled on the first torch tensor


def fast_types(x) -> tuple:
    """The exact array types whose CUDA instances strux.ks may send straight here (torch's, once
    x is a torch tensor; else none)."""
    global _TDT
    tt = _a.see_torch(x)
    if tt and not _TDT:
        _TDT = {t: c for t, c in _a.TORCH_CODE.items() if c in (0, 2, 3)}
    return tt


# ---- cheap checks (torch tensors): a subset of what the full checks accept --------------------

def fast_pattern(p):
    """(a, b, c, d) when p is a tuple or list of 4 Python ints >= 1, else None."""
    if (type(p) is tuple or type(p) is list) and len(p) == 4:
        a, b, c, d = p
        if type(a) is int and type(b) is int and type(c) is int and type(d) is int \
                and a > 0 and b > 0 and c > 0 and d > 0:
            return a, b, c, d
    return None


def fast_patterns(ps):
    """(list of (a, b, c, d), flat list) for a non-empty list/tuple of compatible patterns that
    pass fast_pattern, else None."""
    if not (type(ps) is list or type(ps) is tuple) or not ps:
        return None
    out, flat = [], []
    for q in ps:
        p = fast_pattern(q)
        if p is None:
            return None
        if out:
            a0, _, c0, d0 = out[-1]
            if a0 * c0 * d0 != p[0] * p[1] * p[3]:
                return None
        out.append(p)
        flat += p
    return out, flat


def fast_layout(lay):
    """True for "bsl", False for "bsf", None otherwise."""
    if type(lay) is str:
        if lay == "bsf":
            return False
        if lay == "bsl":
            return True
    return None


def _tbatch(x, width, bl):
    """x's batch when x is contiguous, 2-D with `width` features and batch >= 1; else 0."""
    s = x.shape
    if len(s) != 2 or not x.is_contiguous() or x.is_neg():  # a lazy negative view: the full path
        return 0
    n, batch = (s[0], s[1]) if bl else (s[1], s[0])
    return batch if n == width and batch > 0 else 0


def _w_ok(w, x, dev, p):
    return type(w) in _a.TT and w.dtype is x.dtype and w.get_device() == dev and w.shape == p \
        and w.is_contiguous() and not w.is_neg()


def ks_ok(x, w, p, bl):
    """(batch, dtype code, device) when torch x, w pass every check of ks_matmul, else None.
    One read of each attribute: this runs on every call."""
    if type(x) not in _a.TT or type(w) not in _a.TT:
        return None
    s, xd = x.shape, x.dtype
    dt = _TDT.get(xd)
    if dt is None or len(s) != 2 or w.dtype is not xd or w.shape != p:
        return None
    dev = x.get_device()
    if dev < 0 or w.get_device() != dev or not x.is_contiguous() or not w.is_contiguous():
        return None
    n, batch = (s[0], s[1]) if bl else (s[1], s[0])
    return (batch, dt, dev) if n == p[0] * p[2] * p[3] and batch > 0 else None


def _dy_ok(dy, r, width, bl):
    return type(dy) in _a.TT and _TDT.get(dy.dtype) == r[1] and dy.get_device() == r[2] \
        and _tbatch(dy, width, bl) == r[0]


def vjp_ok(dy, x, w, p, bl):
    """As ks_ok, for ks_matmul_vjp (dy too)."""
    r = ks_ok(x, w, p, bl)
    return r if r is not None and _dy_ok(dy, r, p[0] * p[1] * p[3], bl) else None


def chain_ok(x, ws, ps, bl):
    """(batch, dtype code, device) when torch x, ws pass every check of ks_chain (ps: patterns
    that passed fast_patterns), else None."""
    if type(x) not in _a.TT or (type(ws) is not list and type(ws) is not tuple) or len(ws) != len(ps):
        return None
    dt = _TDT.get(x.dtype)
    dev = x.get_device()
    if dt is None or dev < 0:
        return None
    for w, p in zip(ws, ps):
        if not _w_ok(w, x, dev, p):
            return None
    a, _, c, d = ps[-1]
    batch = _tbatch(x, a * c * d, bl)
    return (batch, dt, dev) if batch else None


def chain_vjp_ok(dy, x, ws, ps, bl):
    r = chain_ok(x, ws, ps, bl)
    if r is None:
        return None
    a, b, _, d = ps[0]
    return r if _dy_ok(dy, r, a * b * d, bl) else None


# ---- launchers (checked arrays of any kind, C-contiguous) -----------------------------------------

_FORWARD = getattr(_ext, "cuda_ks_forward", None)  # the native entries, read once
_CHAIN_WS = getattr(_ext, "cuda_ks_chain_workspace", None)  # bytes of scratch a chain call needs


@functools.lru_cache(maxsize=256)
def _chain_bytes(flat, batch, bl, dt, dev, opts, backward):
    """Scratch bytes of a chain call: the plan's answer (its path's intermediates or the fused
    pair's weight copies), asked once per problem instead of by a second native call every call."""
    return _CHAIN_WS(list(flat), batch, bl, dt, dev, opts, backward)


def ks_forward(x, w, p, bl, batch, dt, dev, opts=0):
    """y = x K^T / K x; opts: the packed plan options (strux._cuda_options.ks_code)."""
    a, b, c, d = p
    M = a * b * d
    if type(x) in _a.TT:  # torch (the per-call path): no adapter calls
        y = x.new_empty((M, batch) if bl else (batch, M))
        _FORWARD(x.data_ptr(), w.data_ptr(), y.data_ptr(), a, b, c, d, batch, bl, dt, dev, opts,
                 _a._torch_stream(dev))
        return y
    y = _a.empty(x, (M, batch) if bl else (batch, M))
    _FORWARD(_a.ptr(x), _a.ptr(w), _a.ptr(y), a, b, c, d, batch, bl, dt, dev, opts, _a.stream(x))
    return y


def ks_backward(dy, x, w, p, bl, batch, dt, dev, need_dx=True, need_dw=True, opts=0):
    """(dx, dw), each None where not needed; dw summed in float32, returned in x's dtype."""
    dx = _a.empty(x, tuple(x.shape)) if need_dx else None
    dw32 = _a.empty(w, p, "float32") if need_dw else None  # zeroed by the entry
    a, b, c, d = p
    _ext.cuda_ks_backward(_a.ptr(dy), _a.ptr(x), _a.ptr(w), _a.ptr(dx), _a.ptr(dw32), a, b, c, d, batch, bl, dt,
                          dev, opts, _a.stream(x))
    return dx, (dw32 if dw32 is None or dt == 0 else _a.cast(dw32, _a.dtname(x)))


def chain_forward(x, ws, ps, flat, bl, batch, dt, dev, opts=0):
    P = len(ps)
    if P == 1:
        return ks_forward(x, ws[0], ps[0], bl, batch, dt, dev, opts)
    a, b, _, d = ps[0]
    y = _a.empty(x, (a * b * d, batch) if bl else (batch, a * b * d))
    # the plan says how much scratch its path needs (the intermediates, or the fused pair's weight copies)
    nbytes = _chain_bytes(tuple(flat), batch, bl, dt, dev, opts, False)
    s = _a.scratch(x, nbytes)
    _ext.cuda_ks_chain_forward(_a.ptr(x), [_a.ptr(w) for w in ws], _a.ptr(y), _a.ptr(s), nbytes, flat, batch, bl,
                               dt, dev, opts, _a.stream(x))
    return y


def chain_backward(dy, x, ws, ps, flat, bl, batch, dt, dev, need_dx=True, need_dw=None, opts=0):
    """(dx or None, [dw_q or None]); the forward intermediates are recomputed on the GPU."""
    P = len(ps)
    if P == 1:
        dx, dw = ks_backward(dy, x, ws[0], ps[0], bl, batch, dt, dev, need_dx,
                             True if need_dw is None else need_dw[0], opts)
        return dx, [dw]
    dx = _a.empty(x, tuple(x.shape)) if need_dx else None
    dw32 = [_a.empty(w, p, "float32") if need_dw is None or need_dw[q] else None
            for q, (w, p) in enumerate(zip(ws, ps))]
    nbytes = _chain_bytes(tuple(flat), batch, bl, dt, dev, opts, True)
    s = _a.scratch(x, nbytes)
    _ext.cuda_ks_chain_backward(_a.ptr(dy), _a.ptr(x), [_a.ptr(w) for w in ws], _a.ptr(dx),
                                [_a.ptr(g) for g in dw32], _a.ptr(s), nbytes, flat, batch, bl, dt, dev, opts,
                                _a.stream(x))
    if dt != 0:
        dw32 = [None if g is None else _a.cast(g, _a.dtname(x)) for g in dw32]
    return dx, dw32


# ---- full checks (any call the cheap checks decline; CuPy arrays) ---------------------------------

def _act(x, name, width, lay):
    _a.array(x, name, 2, _KS_DTYPES)
    ax = 1 if lay == "bsf" else 0
    if x.shape[ax] != width:
        want = f"(*, {width})" if lay == "bsf" else f"({width}, *)"
        raise ValueError(f"argument '{name}': expected shape {want} for layout {lay!r}, got {tuple(x.shape)}")
    return _a.contig(x)


def _weights(w, name, p):
    _a.array(w, name, 4, _KS_DTYPES)
    if tuple(w.shape) != tuple(p):
        raise ValueError(f"argument '{name}': expected shape {tuple(p)} (the pattern), got {tuple(w.shape)}")
    return _a.contig(w)


def _nbatch(x, lay):
    return int(x.shape[0] if lay == "bsf" else x.shape[1])


def _same_batch(dy, x, lay):
    if _nbatch(dy, lay) != _nbatch(x, lay):
        raise ValueError(f"argument 'dy': expected batch {_nbatch(x, lay)} (that of 'x'), got shape {tuple(dy.shape)}")


def _code(x):
    """The kernel dtype code of a checked array, or None for float64 (the operator layer)."""
    return _DTYPE_CODE[_a.dtname(x)] if _a.dtname(x) != "float64" else None


def _no_options_f64(opts):
    if opts:
        raise ValueError("argument 'options': float64 ks has one kernel (the operator layer's float64 direct "
                         "kernels, no choice), got options for the float32 / half plans")


def _ks_fwd_f64(x, w, p, lay):
    """float64: one call of strux::op::KSFactor (bind_cuda_f64.cpp) on x's stream and device."""
    a, b, c, d = p
    bl, batch = lay == "bsl", _nbatch(x, lay)
    y = _a.empty(x, (a * b * d, batch) if bl else (batch, a * b * d))
    _ext.cuda_ks_f64_forward(_a.ptr(x), _a.ptr(w), _a.ptr(y), a, b, c, d, batch, bl, _a.device_id(x), _a.stream(x))
    return y


def _ks_bwd_f64(dy, x, w, p, lay, need_dx, need_dw):
    """float64 gradients: dx = dy K and dw (summed over the batch in float64), None where not needed."""
    a, b, c, d = p
    dx = _a.empty(x, tuple(x.shape)) if need_dx else None
    dw = _a.empty(w, tuple(p)) if need_dw else None
    _ext.cuda_ks_f64_backward(_a.ptr(dy), _a.ptr(x), _a.ptr(w), _a.ptr(dx), _a.ptr(dw), a, b, c, d, _nbatch(x, lay),
                              lay == "bsl", _a.device_id(x), _a.stream(x))
    return dx, dw


def _chain_f64(x, ws, ps, lay, dy=None):
    """float64 chain forward (dy None: y) or backward ((dx, [dw_q])) in one call of strux::op::KSChain,
    its activations in a scratch array of x's kind."""
    flat, bl, batch, dev = [v for p in ps for v in p], lay == "bsl", _nbatch(x, lay), _a.device_id(x)
    nbytes = _ext.cuda_ks_f64_chain_workspace(flat, batch, bl, dev)
    work = _a.scratch(x, nbytes)
    if dy is None:
        a, b, _, d = ps[0]
        y = _a.empty(x, (a * b * d, batch) if bl else (batch, a * b * d))
        _ext.cuda_ks_f64_chain_forward(_a.ptr(x), [_a.ptr(w) for w in ws], _a.ptr(y), _a.ptr(work), nbytes, flat,
                                       batch, bl, dev, _a.stream(x))
        return y
    dx = _a.empty(x, tuple(x.shape))
    dws = [_a.empty(w, tuple(p)) for w, p in zip(ws, ps)]
    _ext.cuda_ks_f64_chain_backward(_a.ptr(dy), _a.ptr(x), [_a.ptr(w) for w in ws], _a.ptr(dx),
                                    [_a.ptr(g) for g in dws], _a.ptr(work), nbytes, flat, batch, bl, dev,
                                    _a.stream(x))
    return dx, dws


def _ks_fwd(x, w, p, lay, opts=0):
    """One checked factor (x, w contiguous, same kind / dtype / device)."""
    dt = _code(x)
    if dt is None:
        _no_options_f64(opts)
        return _ks_fwd_f64(x, w, p, lay)
    return ks_forward(x, w, p, lay == "bsl", _nbatch(x, lay), dt, _a.device_id(x), opts)


def _ks_bwd(dy, x, w, p, lay, need_dx=True, need_dw=True, opts=0):
    """Gradients of one checked factor (dx, dw), None where not needed."""
    dt = _code(x)
    if dt is None:
        _no_options_f64(opts)
        return _ks_bwd_f64(dy, x, w, p, lay, need_dx, need_dw)
    return ks_backward(dy, x, w, p, lay == "bsl", _nbatch(x, lay), dt, _a.device_id(x), need_dx, need_dw, opts)


def _checked(x, w, pattern_, lay, dy=None, with_dy=False):
    _a.need()
    lay = _choice(lay, "layout", _LAYOUTS)
    p = _pattern(pattern_)
    x = _act(x, "x", _cols(p), lay)
    w = _weights(w, "w", p)
    if with_dy:  # a required cotangent: None is a TypeError naming it (never a null pointer)
        dy = _act(dy, "dy", _rows(p), lay)
    _a.same(x, "x", w=w, dy=dy)
    if with_dy:
        _same_batch(dy, x, lay)
    fast_types(x)
    return x, w, p, lay, dy


def _chain_args(x, ws, patterns_, lay):
    _a.need()
    lay = _choice(lay, "layout", _LAYOUTS)
    ps = _patterns(patterns_)
    if not hasattr(ws, "__len__") or len(ws) != len(ps):
        raise ValueError(f"argument 'ws': expected {len(ps)} weight arrays (one per pattern), got "
                         f"{len(ws) if hasattr(ws, '__len__') else type(ws).__name__}")
    ws = [_weights(w, f"ws[{q}]", p) for q, (w, p) in enumerate(zip(ws, ps))]
    x = _act(x, "x", _cols(ps[-1]), lay)
    _a.same(x, "x", **{f"ws[{q}]": w for q, w in enumerate(ws)})
    fast_types(x)
    return x, ws, ps, lay


# ---- the functions --------------------------------------------------------------------------------

def ks_matmul(x, w, pattern, *, layout: str = "bsf", options=None):
    """One KS factor on the GPU: ``x @ K.T`` ("bsf", x (batch, N)) or ``K @ x`` ("bsl", x (N, batch)).

    ``w`` has shape ``pattern = (a, b, c, d)``, K[i*b*d + k*d + j, i*c*d + l*d + j] = w[i, k, l, j].
    Returns (batch, M) or (M, batch), M = a*b*d, in the dtype of x, on x's device and stream.
    """
    opts = 0 if options is None else _O.ks_code(options)
    if type(x) in _a.TT:
        p, bl = fast_pattern(pattern), fast_layout(layout)
        r = None if p is None or bl is None else ks_ok(x, w, p, bl)
        if r is not None:
            return ks_forward(x, w, p, bl, *r, opts)
    x, w, p, lay, _ = _checked(x, w, pattern, layout)
    return _ks_fwd(x, w, p, lay, opts)


def ks_matmul_vjp(dy, x, w, pattern, *, layout: str = "bsf", options=None):
    """Gradients of ``y = ks_matmul(x, w, pattern, layout=layout)`` on the GPU.

    Arguments: ``dy`` (shaped like y), then x, w, pattern as in ks_matmul. Returns ``(dx, dw)``:
    ``dx = dy @ K`` ("bsf"; ``K.T @ dy`` for "bsl"), shaped like x, and
    ``dw[i, k, l, j] = Σ_batch dy[., i*b*d + k*d + j] x[., i*c*d + l*d + j]``, shaped like w, both in
    x's dtype (dw is summed in float32).
    """
    opts = 0 if options is None else _O.ks_code(options)
    if type(x) in _a.TT:
        p, bl = fast_pattern(pattern), fast_layout(layout)
        r = None if p is None or bl is None else vjp_ok(dy, x, w, p, bl)
        if r is not None:
            return ks_backward(dy, x, w, p, bl, *r, True, True, opts)
    x, w, p, lay, dy = _checked(x, w, pattern, layout, dy, True)
    return _ks_bwd(dy, x, w, p, lay, opts=opts)


def ks_chain(x, ws, patterns, *, layout: str = "bsf", options=None):
    """A chain of KS factors on the GPU: ``x @ (K_1 ⋯ K_P).T`` ("bsf") or ``K_1 ⋯ K_P @ x`` ("bsl").

    Two factors may run as one kernel with the intermediate on chip: by default a Monarch pair
    monarch(1024, 32) in float16/bfloat16, batch-first, from 16 rows per SM (the persistent Monarch
    kernel, measured 2.35x the factor-by-factor chain back to back, 2.15x per call, on an H200); ``options={"chain": "fused"}``
    forces it for any pair it takes, ``"factors"`` the factor-by-factor forward; ks_chain_path says
    which runs. Else one launch per factor (K_P first) with the intermediates in one scratch array.
    """
    opts = 0 if options is None else _O.ks_code(options)
    if type(x) in _a.TT:
        pf, bl = fast_patterns(patterns), fast_layout(layout)
        r = None if pf is None or bl is None else chain_ok(x, ws, pf[0], bl)
        if r is not None:
            return chain_forward(x, ws, pf[0], pf[1], bl, *r, opts)
    x, ws, ps, lay = _chain_args(x, ws, patterns, layout)
    dt = _code(x)
    if dt is not None:
        return chain_forward(x, ws, ps, [v for p in ps for v in p], lay == "bsl", _nbatch(x, lay), dt,
                             _a.device_id(x), opts)
    _no_options_f64(opts)
    return _chain_f64(x, ws, ps, lay)


def ks_chain_vjp(dy, x, ws, patterns, *, layout: str = "bsf", options=None):
    """Gradients of ``y = ks_chain(x, ws, patterns, layout=layout)``: returns ``(dx, [dw_1, …, dw_P])``.

    The forward intermediates are recomputed.
    """
    opts = 0 if options is None else _O.ks_code(options)
    if type(x) in _a.TT:
        pf, bl = fast_patterns(patterns), fast_layout(layout)
        r = None if pf is None or bl is None else chain_vjp_ok(dy, x, ws, pf[0], bl)
        if r is not None:
            return chain_backward(dy, x, ws, pf[0], pf[1], bl, *r, True, None, opts)
    x, ws, ps, lay = _chain_args(x, ws, patterns, layout)
    dy = _act(dy, "dy", _rows(ps[0]), lay)
    _a.same(x, "x", dy=dy)
    _same_batch(dy, x, lay)
    dt = _code(x)
    if dt is not None:
        return chain_backward(dy, x, ws, ps, [v for p in ps for v in p], lay == "bsl", _nbatch(x, lay), dt,
                              _a.device_id(x), True, None, opts)
    _no_options_f64(opts)
    return _chain_f64(x, ws, ps, lay, dy)


def ks_paths(pattern, batch: int, *, layout: str = "bsf", dtype: str = "float32", options=None):
    """(forward path, backward_x path, (backward_w path, its batch chunk)) a plan picks: "kernels",
    "blas", "stream", "tr", "small" or (forced only) "dense" (tests, bench)."""
    _a.need()
    p, bl = list(_pattern(pattern)), _choice(layout, "layout", _LAYOUTS) == "bsl"
    dt, code = _DTYPE_CODE[_choice(dtype, "dtype", _KERNEL_DTYPES)], _O.ks_code(options)
    fwd, bx = _ext.cuda_ks_path(p, int(batch), bl, dt, code)
    return fwd, bx, tuple(_ext.cuda_ks_dw_path(p, int(batch), bl, dt, code))


def ks_chain_path(patterns, batch: int, *, layout: str = "bsf", dtype: str = "float32", options=None):
    """How ks_chain's forward runs for these arguments: ("fused", its block shape) or ("factors",
    why not fused) (tests, bench). A forced "fused" that cannot run raises ValueError saying why."""
    _a.need()
    flat = [v for p in _patterns(patterns) for v in p]
    return tuple(_ext.cuda_ks_chain_path(flat, int(batch), _choice(layout, "layout", _LAYOUTS) == "bsl",
                                         _DTYPE_CODE[_choice(dtype, "dtype", _KERNEL_DTYPES)], _O.ks_code(options)))


def ks_describe(pattern, batch: int, *, layout: str = "bsf", dtype: str = "float32", options=None) -> str:
    """What the ks plan for these arguments chose, in words."""
    _a.need()
    return _ext.cuda_ks_describe(list(_pattern(pattern)), int(batch), _choice(layout, "layout", _LAYOUTS) == "bsl",
                                 _DTYPE_CODE[_choice(dtype, "dtype", _KERNEL_DTYPES)], _O.ks_code(options))
