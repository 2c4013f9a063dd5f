"""Linear scans on the GPU (diagonal, circulant, block-circulant), for torch tensors and CuPy
arrays (strux.scan and strux.torch call here).

Arrays are checked once (through the array adapter strux._cuda; torch calls of diag_scan by cheap
attribute tests, diag_ok, else the full checks that name the argument), outputs and scratch
allocated of the input's kind and device, and raw device pointers passed to the native entries
(python/src/bind_cuda_scan.cpp), which keep the plans in the plan cache and launch on the
current stream of the arrays' library.

dtypes: diag_scan float32, float16, bfloat16 (float32 arithmetic), complex64, float64 and
complex128 (float64 arithmetic); circulant_scan float32 / float64 (half types cast to float32);
block_circulant_scan float32 (half types cast), float64 by the operator layer's direct kernels
(n = p*k up to their shared-memory limit, python/src/bind_cuda_f64.cpp) or, beyond it, in the
array library. Every function takes ``options=None``: explicit kernel choices
(strux._cuda_options), passed to the plan.
"""
from __future__ import annotations

import functools

from . import _cuda as _a
from . import _cuda_options as _O
from . import _ext
from ._arrays import choice as _choice
from ._cuda import DTYPE_CODE as _DTYPE_CODE
from ._cuda import available  # noqa: F401  (the GPU modules answer available() alike)

_SCAN_DTYPES = ("float32", "float16", "bfloat16", "complex64", "float64", "complex128")
_COMPLEX_CODE = min(_DTYPE_CODE["complex64"], _DTYPE_CODE["complex128"])  # codes from here on are complex
assert all((c >= _COMPLEX_CODE) == n.startswith("complex") for n, c in _DTYPE_CODE.items())


def diag_ok(a, b, h0):
    """(device, dtype code) when torch a, b, h0 (or None) pass every check of diag_scan as they
    are: one scan dtype and CUDA device, shapes (B, T, n) and (B, n), every size >= 1,
    C-contiguous; else None. One read of each attribute: this runs on every call."""
    s = a.shape
    if len(s) != 3 or type(b) is not type(a) or b.shape != s or 0 in s:
        return None
    dt = a.dtype
    c = _a.TORCH_CODE.get(dt)
    # Lazy views take the full path: a conjugate bit only on complex tensors, a negative bit on
    # any (the imaginary part of a conjugated tensor is a real negative view).
    if c is None or b.dtype is not dt or not (a.is_cuda and a.is_contiguous() and b.is_contiguous()) \
            or a.is_neg() or b.is_neg() or (c >= _COMPLEX_CODE and (a.is_conj() or b.is_conj())):
        return None
    dev = a.get_device()
    if b.get_device() != dev:
        return None
    if h0 is not None and (type(h0) is not type(a) or h0.dtype is not dt or h0.shape != (s[0], s[2])
                           or not h0.is_contiguous() or h0.get_device() != dev or h0.is_conj() or h0.is_neg()):
        return None
    return dev, c


def _scan_args(a, b, h0, names=("a", "b")):
    a = _a.array(a, names[0], 3, _SCAN_DTYPES)
    b = _a.array(b, names[1], 3, _SCAN_DTYPES)
    if tuple(b.shape) != tuple(a.shape):
        raise ValueError(f"argument '{names[1]}': expected shape {tuple(a.shape)} (that of '{names[0]}'), got {tuple(b.shape)}")
    _a.same(a, names[0], **{names[1]: b})
    if h0 is not None:
        h0 = _a.array(h0, "h0", 2, _SCAN_DTYPES)
        if tuple(h0.shape) != (a.shape[0], a.shape[2]):
            raise ValueError(f"argument 'h0': expected shape {(a.shape[0], a.shape[2])} (B, n), got {tuple(h0.shape)}")
        _a.same(a, names[0], h0=h0)
    return _a.contig(a), _a.contig(b), _a.contig(h0)


_WS: dict = {}  # (query, its arguments) -> workspace bytes of that plan


def _asked_once(query, *key):
    """query(*key), a plan's workspace bytes, asked once per key (the plans are cached too; the
    memo is cleared past 1024 entries)."""
    k = (query, *key)
    nbytes = _WS.get(k)
    if nbytes is None:
        if len(_WS) > 1024:
            _WS.clear()
        nbytes = _WS[k] = query(*key)
    return nbytes


def _ws_bytes(dev, B, T, n, dt, algo):
    """The workspace bytes of that diag_scan plan (0: its kernel takes none), asked once."""
    return _asked_once(_ext.cuda_diag_scan_workspace, dev, B, T, n, dt, algo)


def _workspace(a, B, T, n, dt, dev, algo):
    nbytes = _ws_bytes(dev, B, T, n, dt, algo)
    return (_a.scratch(a, nbytes) if nbytes else None), nbytes


def _diag_fwd(a, b, h0, scale=1.0, algo=-1, out=None):
    """h (or `out`, which may be b: in place) from checked contiguous a, b, h0."""
    B, T, n = a.shape
    dt, dev = _a.code(a), _a.device_id(a)
    h = _a.empty(a, (B, T, n)) if out is None else out
    ws, nbytes = _workspace(a, B, T, n, dt, dev, algo)
    _ext.cuda_diag_scan_forward(_a.ptr(a), _a.ptr(b), _a.ptr(h0), _a.ptr(h), _a.ptr(ws), nbytes, B, T, n, dt,
                                float(scale), algo, dev, _a.stream(a))
    return h


_empty_like = None  # torch.empty_like, bound on the first torch call


def diag_fwd_torch(a, b, h0, r, algo=-1):
    """h from torch a, b, h0 that passed diag_ok (r: its answer): _diag_fwd with no re-reads."""
    global _empty_like
    if _empty_like is None:
        import torch
        _empty_like = torch.empty_like
    dev, dt = r
    s = a.shape
    h = _empty_like(a)  # a is C-contiguous (diag_ok); empty_like costs about half of new_empty(shape)
    nbytes = _ws_bytes(dev, s[0], s[1], s[2], dt, algo)
    ws = a.new_empty((nbytes,), dtype=_a._TORCH_DTYPE["uint8"]) if nbytes else None  # held until enqueued
    _ext.cuda_diag_scan_forward(a.data_ptr(), b.data_ptr(), 0 if h0 is None else h0.data_ptr(), h.data_ptr(),
                                0 if ws is None else ws.data_ptr(), nbytes, s[0], s[1], s[2], dt, 1.0, algo, dev,
                                _a._torch_stream(dev))
    return h


def diag_scan(a, b, *, h0=None, return_final=False, options=None):
    """h_t = a_t ⊙ h_{t-1} + b_t on the GPU, h_{-1} = h0 (zeros when None); a, b (B, T, n).

    One pass over a and b (chunked along T with a decoupled look-back, so long sequences fill
    the GPU). Returns h (B, T, n), or (h, h[:, -1]) when ``return_final``.
    """
    algo = -1 if options is None else _O.diag_scan_code(options)
    r = diag_ok(a, b, h0) if type(a) in _a.TT else None
    if r is not None:
        if type(return_final) is not bool:
            return_final = _a.flag(return_final, "return_final")
        h = diag_fwd_torch(a, b, h0, r, algo)
    else:
        _a.need()
        return_final = _a.flag(return_final, "return_final")
        a, b, h0 = _scan_args(a, b, h0)
        h = _diag_fwd(a, b, h0, 1.0, algo)
    return (h, h[:, -1]) if return_final else h


def _diag_bwd(dh, a, h, h0, algo=-1):
    """(da, db, dh0) from checked contiguous arrays (dh0 None without h0)."""
    B, T, n = a.shape
    dt, dev = _a.code(a), _a.device_id(a)
    da, db = _a.empty(a, (B, T, n)), _a.empty(a, (B, T, n))
    dh0 = _a.empty(a, (B, n)) if h0 is not None else None
    ws, nbytes = _workspace(a, B, T, n, dt, dev, algo)
    _ext.cuda_diag_scan_backward(_a.ptr(a), _a.ptr(h), _a.ptr(h0), _a.ptr(dh), _a.ptr(da), _a.ptr(db), _a.ptr(dh0),
                                 _a.ptr(ws), nbytes, B, T, n, dt, algo, dev, _a.stream(a))
    return da, db, dh0


@functools.lru_cache(maxsize=256)
def _rows_choice(device: int, rows: int, T: int, code: int) -> bool:
    return ": rows" in _ext.cuda_diag_scan_describe(device, rows, T, 1, code, _O.diag_scan_code(None))


def runs_as_rows(b) -> bool:
    """Whether the automatic plan for b's time-last shape (B, n, T), seen as (B * n, T, 1), takes the
    row kernel: reading the time-last layout in place pays only there (elsewhere the copies to
    (B, T, n) feed a faster kernel). False for dtypes the scans do not take (the general path
    raises the error)."""
    B, n, T = b.shape
    try:
        code = _a.code(b)
    except (KeyError, TypeError, ValueError):
        return False
    return _rows_choice(_a.device_id(b), B * n, T, code)


def diag_scan_describe(B: int, T: int, n: int, dtype: str = "float32", device: int = 0, options=None) -> str:
    """What the diag_scan plan for this shape and dtype chose, in words."""
    _a.need()
    return _ext.cuda_diag_scan_describe(int(device), int(B), int(T), int(n),
                                        _DTYPE_CODE[_choice(dtype, "dtype", _SCAN_DTYPES)], _O.diag_scan_code(options))


def diag_scan_vjp(dh, a, b, *, h0=None, dh_last=None, h=None, options=None):
    """Gradients of ``diag_scan`` on the GPU: returns (da, db, dh0); dh0 is None when h0 is None.

    dh (B, T, n) = dL/dconj(h); dh_last (B, n) or None, the cotangent of h[:, -1] (added to
    dh[:, -1]); h: the forward's output if at hand (else it is recomputed). One reverse pass:
    g_t = dh_t + conj(a_{t+1}) g_{t+1}, db = g, da_t = g_t conj(h_{t-1}), dh0 = conj(a_0) g_0.
    """
    _a.need()
    algo = _O.diag_scan_code(options)
    a, b, h0 = _scan_args(a, b, h0)
    dh = _a.array(dh, "dh", 3, _SCAN_DTYPES)
    if tuple(dh.shape) != tuple(a.shape):
        raise ValueError(f"argument 'dh': expected shape {tuple(a.shape)}, got {tuple(dh.shape)}")
    _a.same(a, "a", dh=dh)
    dh = _a.contig(dh)
    if dh_last is not None:
        dh_last = _a.array(dh_last, "dh_last", 2, _SCAN_DTYPES)
        if tuple(dh_last.shape) != (a.shape[0], a.shape[2]):
            raise ValueError(f"argument 'dh_last': expected shape {(a.shape[0], a.shape[2])}, got {tuple(dh_last.shape)}")
        _a.same(a, "a", dh_last=dh_last)
        dh = dh.clone() if _a.is_torch(dh) else dh.copy()
        dh[:, -1] += dh_last
    if h is None:
        h = _diag_fwd(a, b, h0, 1.0, algo)
    else:
        h = _a.array(h, "h", 3, _SCAN_DTYPES)
        if tuple(h.shape) != tuple(a.shape):
            raise ValueError(f"argument 'h': expected shape {tuple(a.shape)}, got {tuple(h.shape)}")
        _a.same(a, "a", h=h)
        h = _a.contig(h)
    return _diag_bwd(dh, a, h, h0, algo)


_REALS = ("float32", "float16", "bfloat16", "float64")  # real scans (circulant, block-circulant)


def _real_cotangents(dh, dh_last, u, shape, real):
    """Checks a real scan's cotangents against u (dh of `shape`, dh_last (B, n) or None);
    returns them contiguous in the compute dtype `real`."""
    B, T, n = shape
    dh = _a.array(dh, "dh", 3, _REALS)
    if tuple(dh.shape) != (B, T, n):
        raise ValueError(f"argument 'dh': expected shape {(B, T, n)}, got {tuple(dh.shape)}")
    _a.same(u, "u", dh=dh)
    if dh_last is not None:
        dh_last = _a.array(dh_last, "dh_last", 2, _REALS)
        if tuple(dh_last.shape) != (B, n):
            raise ValueError(f"argument 'dh_last': expected shape {(B, n)}, got {tuple(dh_last.shape)}")
        _a.same(u, "u", dh_last=dh_last)
        dh_last = _a.contig(_a.cast(dh_last, real))
    return _a.contig(_a.cast(dh, real)), dh_last


def _folded(dh, dh_last):
    """A copy of dh with dh_last added to its last step (the cotangent of h[:, -1])."""
    dh = dh.clone() if _a.is_torch(dh) else dh.copy()
    dh[:, -1] += dh_last
    return dh


def _circ_args(a, u, h0, fourier):
    """Checks circulant_scan's arrays; returns contiguous u, h0 and a in the compute precision
    (float64 for float64 u, else float32; a complex for fourier=True), and u's dtype."""
    fourier = _a.flag(fourier, "fourier")
    u = _a.array(u, "u", 3, _REALS)
    B, T, n = u.shape
    real = "float64" if _a.dtname(u) == "float64" else "float32"
    if fourier:
        a = _a.array(a, "a", 3, ("complex128",) if real == "float64" else ("complex64",))
        want = (B, T, n // 2 + 1)
    else:
        a = _a.array(a, "a", 3, _REALS)
        want = (B, T, n)
        _a.same(u, "u", a=a)
    if tuple(a.shape) != want:
        raise ValueError(f"argument 'a': expected shape {want}, got {tuple(a.shape)}")
    if _a.device_id(a) != _a.device_id(u):
        raise ValueError(f"argument 'a': expected device {_a.device_id(u)} (that of 'u'), got {_a.device_id(a)}")
    if h0 is not None:
        h0 = _a.array(h0, "h0", 2, _REALS)
        if tuple(h0.shape) != (B, n):
            raise ValueError(f"argument 'h0': expected shape {(B, n)} (B, n), got {tuple(h0.shape)}")
        _a.same(u, "u", h0=h0)
    cr = lambda x: None if x is None else _a.contig(_a.cast(x, real))
    a = _a.contig(a) if fourier else cr(a)
    return a, cr(u), cr(h0), fourier, _a.dtname(u)


def circ_ok(a, u, h0, fourier):
    """The device when torch a, u, h0 (or None) pass every check of a float32 circulant_scan as
    they are: u float32 (B, T, n), n >= 2; a float32 (B, T, n), or with ``fourier`` (a bool)
    complex64 (B, T, n//2 + 1); h0 float32 (B, n); one CUDA device, C-contiguous, no lazy
    conjugate / negative bits; else None (the full checks then name the argument). One read of
    each attribute: the eager torch path calls this on every call."""
    s = u.shape
    if len(s) != 3 or type(a) is not type(u) or 0 in s or s[2] < 2:
        return None
    f32 = _a._TORCH_DTYPE.get("float32")
    if u.dtype is not f32 or a.dtype is not (_a._TORCH_DTYPE["complex64"] if fourier else f32) \
            or a.shape != ((s[0], s[1], s[2] // 2 + 1) if fourier else s) \
            or not (u.is_cuda and u.is_contiguous() and a.is_contiguous()) or u.is_neg() or a.is_neg() \
            or (fourier and a.is_conj()):
        return None
    dev = u.get_device()
    if a.get_device() != dev:
        return None
    if h0 is not None and (type(h0) is not type(u) or h0.dtype is not f32 or h0.shape != (s[0], s[2])
                           or not h0.is_contiguous() or h0.get_device() != dev or h0.is_neg()):
        return None
    return dev


_F32_CODE = _DTYPE_CODE["float32"]


def circ_fwd_torch(a, u, h0, fourier, dev, fused=-1):
    """h from torch a, u, h0 that passed circ_ok (dev: its answer): the native forward with no
    re-reads (float32 only, so no casts)."""
    B, T, n = u.shape
    nbytes = _asked_once(_ext.cuda_circulant_scan_workspace, dev, B, T, n, _F32_CODE, fused)
    h = _a.torch_empty_like(u)
    ws = u.new_empty((nbytes,), dtype=_a._TORCH_DTYPE["uint8"])  # held until enqueued
    _ext.cuda_circulant_scan_forward(a.data_ptr(), fourier, u.data_ptr(), 0 if h0 is None else h0.data_ptr(),
                                     h.data_ptr(), ws.data_ptr(), nbytes, B, T, n, _F32_CODE, dev, _a._torch_stream(dev),
                                     fused)
    return h


def circulant_scan(a, u, h0=None, *, fourier=False, return_final=False, options=None):
    """h_t = circ(a_t) h_{t-1} + u_t on the GPU (circ(a)[i, j] = a[(i - j) mod n]); u real (B, T, n).

    a: real (B, T, n), or with ``fourier=True`` its half spectrum rfft(a_t) (B, T, n//2 + 1)
    complex64 (imaginary parts at frequency 0 and, even n, n/2 ignored, as irfft does).
    Computed in float32 (float16/bfloat16 are cast and the result cast back) or float64. Spatial a,
    float32, n = 256, 512 or 1024 (B <= 65535): the single-pass fused kernel (FFT over n, the
    Fourier-domain scan and the inverse FFT in one launch; a NaN / Inf entering at step t may also
    reach h_{t-1} of its row, as two steps share one inverse FFT); ``fourier=True``, float32,
    n a power of two in [64, 1024]: the same kernel's Fourier form (â and u read once, h written once);
    otherwise cuFFT rfft over n, the complex diagonal scan of the half spectra, irfft. Float32
    torch tensors that pass circ_ok as they are go straight to the native call. Returns h, or
    (h, h[:, -1]).
    ``options={"path": "fft" | "fused" | "onepass"}`` forces a path (strux._cuda_options.circulant_scan_code);
    circulant_scan_describe says which one runs.
    """
    fused = _O.circulant_scan_code(options)
    if type(u) in _a.TT and (fourier is True or fourier is False) and (dev := circ_ok(a, u, h0, fourier)) is not None:
        h = circ_fwd_torch(a, u, h0, fourier, dev, fused)
        return (h, h[:, -1]) if _a.flag(return_final, "return_final") else h
    _a.need()
    return_final = _a.flag(return_final, "return_final")
    a, u32, h032, fourier, dt = _circ_args(a, u, h0, fourier)
    B, T, n = u32.shape
    if n == 1:  # a 1x1 circulant is a scalar: no transform needed
        a1 = _a.contig(a.real) if fourier else a
        h = _a.cast(_diag_fwd(a1, u32, h032), dt)
        return (h, h[:, -1]) if return_final else h
    h = _a.empty(u32, (B, T, n))
    code, dev = _DTYPE_CODE[_a.dtname(u32)], _a.device_id(u32)
    nbytes = _asked_once(_ext.cuda_circulant_scan_workspace, dev, B, T, n, code, fused)
    ws = _a.scratch(u32, nbytes)
    _ext.cuda_circulant_scan_forward(_a.ptr(a), fourier, _a.ptr(u32), _a.ptr(h032), _a.ptr(h), _a.ptr(ws), nbytes,
                                     B, T, n, code, dev, _a.stream(u32), fused)
    h = _a.cast(h, dt)
    return (h, h[:, -1]) if return_final else h


def circulant_scan_describe(B, T, n, dtype="float32", device=0, options=None) -> str:
    """What circulant_scan's plan for this shape and dtype (float32 / float64) runs, in words."""
    _a.need()
    code = _DTYPE_CODE[_choice(dtype, "dtype", ("float32", "float64"))]
    return _ext.cuda_circulant_scan_describe(int(device), int(B), int(T), int(n), code, _O.circulant_scan_code(options))


def circulant_scan_vjp(dh, a, u, h0=None, *, fourier=False, dh_last=None):
    """Gradients of ``circulant_scan`` on the GPU: returns (da, du, dh0); dh0 is None when h0 is None.

    dh (B, T, n) real = dL/dh; dh_last (B, n) or None, added to dh[:, -1]. With
    g_t = dh_t + circ(a_{t+1})^T g_{t+1}: du = g, dh0 = circ(a_0)^T g_0,
    da_t[m] = Σ_i g_t[i] h_{t-1}[(i - m) mod n]; with ``fourier=True`` da is complex64
    (B, T, n//2 + 1), dL/dRe(a_hat) + i dL/dIm(a_hat). One native pass in the Fourier domain
    (rfft, the complex diagonal scan forward to recompute ĥ and backward, irfft); float32 inside,
    real gradients returned in u's dtype.
    """
    _a.need()
    a, u32, h032, fourier, dt = _circ_args(a, u, h0, fourier)
    B, T, n = u32.shape
    real = _a.dtname(u32)
    dh, dh_last = _real_cotangents(dh, dh_last, u, (B, T, n), real)
    if dh_last is not None:
        dh = _folded(dh, dh_last)
    back = lambda x: None if x is None else _a.cast(x, dt)
    if n == 1:  # scalar recurrence
        a1 = _a.contig(a.real) if fourier else a
        da, du, dh0 = _diag_bwd(dh, a1, _diag_fwd(a1, u32, h032), h032)
        if fourier:
            da = _a.cast(da, "complex128" if real == "float64" else "complex64")
        return (da if fourier else back(da)), back(du), back(dh0)
    da = _a.empty(a, tuple(a.shape))
    du = _a.empty(u32, (B, T, n))
    dh0 = _a.empty(u32, (B, n)) if h032 is not None else None
    code, dev = _DTYPE_CODE[real], _a.device_id(u32)
    nbytes = _ext.cuda_circulant_scan_workspace(dev, B, T, n, code)
    ws = _a.scratch(u32, nbytes)
    _ext.cuda_circulant_scan_backward(_a.ptr(a), fourier, _a.ptr(u32), _a.ptr(h032), _a.ptr(dh), _a.ptr(da),
                                      _a.ptr(du), _a.ptr(dh0), _a.ptr(ws), nbytes, B, T, n, code, dev, _a.stream(u32))
    return (da if fourier else back(da)), back(du), back(dh0)



def _block_args(a, u, h0):
    """Checks block_circulant_scan's arrays; returns contiguous a, u, h0 in the compute dtype
    (float64 for float64 u, else float32), (p, k) and u's dtype."""
    a = _a.array(a, "a", 5, _REALS)
    u = _a.array(u, "u", 3, _REALS)
    B, T, n = u.shape
    if a.shape[2] != a.shape[3] or tuple(a.shape[:2]) != (B, T):
        raise ValueError(f"argument 'a': expected shape ({B}, {T}, p, p, k), got {tuple(a.shape)}")
    p, k = a.shape[2], a.shape[4]
    if p * k != n:
        raise ValueError(f"argument 'u': expected n = p*k = {p * k} channels, got shape {tuple(u.shape)}")
    _a.same(u, "u", a=a)
    if h0 is not None:
        h0 = _a.array(h0, "h0", 2, _REALS)
        if tuple(h0.shape) != (B, n):
            raise ValueError(f"argument 'h0': expected shape {(B, n)} (B, n), got {tuple(h0.shape)}")
        _a.same(u, "u", h0=h0)
    real = "float64" if _a.dtname(u) == "float64" else "float32"
    cr = lambda x: None if x is None else _a.contig(_a.cast(x, real))
    return cr(a), cr(u), cr(h0), (p, k), _a.dtname(u)


# float64 up to n = p*k = cuda_block_scan_f64_max_n (the two states of one batch item in shared
# memory): strux::op::BlockCirculantScan's direct kernels, one launch for the whole sequence.

_F64_MAX_N: dict = {}  # device -> the largest n of the float64 direct kernels there


def _f64_kernels(u, n) -> bool:
    dev = _a.device_id(u)
    m = _F64_MAX_N.get(dev)
    if m is None:
        m = _F64_MAX_N[dev] = _ext.cuda_block_scan_f64_max_n(dev)
    return n <= m


def _block_fwd_f64_kernels(a, u, h0, p, k):
    B, T, n = u.shape
    h = _a.empty(u, (B, T, n))
    _ext.cuda_block_scan_f64_forward(_a.ptr(a), _a.ptr(u), _a.ptr(h0), _a.ptr(h), B, T, p, k, _a.device_id(u),
                                     _a.stream(u))
    return h


def _block_bwd_f64_kernels(dh, dh_last, a, u, h0, p, k):
    """(da, du, dh0 or None); the kernels add dh_last to g_{T-1} and recompute h in scratch."""
    B, T, n = u.shape
    dev = _a.device_id(u)
    da, du = _a.empty(a, tuple(a.shape)), _a.empty(u, (B, T, n))
    dh0 = _a.empty(u, (B, n)) if h0 is not None else None
    nbytes = _ext.cuda_block_scan_f64_workspace(B, T, p, k, dev)
    ws = _a.scratch(u, nbytes)
    _ext.cuda_block_scan_f64_backward(_a.ptr(a), _a.ptr(u), _a.ptr(h0), _a.ptr(dh), _a.ptr(dh_last), _a.ptr(da),
                                      _a.ptr(du), _a.ptr(dh0), _a.ptr(ws), nbytes, B, T, p, k, dev, _a.stream(u))
    return da, du, dh0


# float64 beyond that n: the same Fourier-domain algorithm in the array library (its cuFFT
# Z2D/D2Z and batched complex128 products, one step of the p x p recurrence per time step):
# float64 accuracy where the strux kernels compute in float32. Slower (T small launches per
# call); for checking and for users who need float64.

def _block_states_f64(A, U, H0):
    """H_t = A_t H_{t-1} + U_t per frequency; A (B, T, p, p, f), U (B, T, p, f), H0 (B, p, f) or
    None (zeros: A_0 * 0 is still formed, so a NaN in A_0 gives NaN, as the formula does)."""
    ein = _a.xp(U).einsum
    Hs = _a.empty(U, tuple(U.shape), "complex128")
    if H0 is None:
        H0 = _a.zeros(U, (U.shape[0], U.shape[2], U.shape[3]), "complex128")
    H = ein("bijf,bjf->bif", A[:, 0], H0) + U[:, 0]
    Hs[:, 0] = H
    for t in range(1, U.shape[1]):
        H = ein("bijf,bjf->bif", A[:, t], H) + U[:, t]
        Hs[:, t] = H
    return Hs


def _block_fwd_f64(a, u, h0, p, k):
    fft = _a.xp(u).fft
    B, T, n = u.shape
    H0 = None if h0 is None else fft.rfft(h0.reshape(B, p, k))
    Hs = _block_states_f64(fft.rfft(a), fft.rfft(u.reshape(B, T, p, k)), H0)
    return _a.contig(fft.irfft(Hs, k).reshape(B, T, n))


def _block_bwd_f64(dh, a, u, h0, p, k):
    """g_t = dh_t + A_{t+1}^T g_{t+1}: in the Fourier domain G_t = D_t + A_{t+1}^H G_{t+1}
    (circ(x)^T has the spectrum conj(X)); du = g, dh0 = A_0^T g_0 and da_t[i, j] = the cyclic
    cross-correlation of g_t[i] and h_{t-1}[j], whose spectrum is G_t[i] conj(H_{t-1}[j])."""
    xp = _a.xp(u)
    fft, ein = xp.fft, xp.einsum
    B, T, n = u.shape
    A = fft.rfft(a)
    H0 = None if h0 is None else fft.rfft(h0.reshape(B, p, k))
    Hs = _block_states_f64(A, fft.rfft(u.reshape(B, T, p, k)), H0)
    D = fft.rfft(dh.reshape(B, T, p, k))
    Gs = _a.empty(D, tuple(D.shape), "complex128")
    G = D[:, T - 1]
    Gs[:, T - 1] = G
    for t in range(T - 2, -1, -1):
        G = D[:, t] + ein("bjif,bjf->bif", A[:, t + 1].conj(), G)
        Gs[:, t] = G
    Hprev = _a.zeros(D, tuple(D.shape), "complex128")
    Hprev[:, 1:] = Hs[:, :-1]
    if H0 is not None:
        Hprev[:, 0] = H0
    da = _a.contig(fft.irfft(ein("btif,btjf->btijf", Gs, Hprev.conj()), k))
    du = _a.contig(fft.irfft(Gs, k).reshape(B, T, n))
    dh0 = None if h0 is None else _a.contig(fft.irfft(ein("bjif,bjf->bif", A[:, 0].conj(), Gs[:, 0]), k).reshape(B, n))
    return da, du, dh0


def _block_code(options, dt):
    code = _O.block_scan_code(options)
    if dt == "float64" and code != (-1, 0):
        raise ValueError("argument 'options': float64 block_circulant_scan has one path (direct kernels, or "
                         "the array library beyond their n), no kernel choice; got options for the float32 plan")
    return code


def block_circulant_scan(a, u, h0=None, *, return_final=False, options=None):
    """Block-circulant h_t = A_t h_{t-1} + u_t on the GPU; a (B, T, p, p, k) real, u (B, T, n = p k).

    A_t is the p x p grid of k x k circulant blocks, block (i, j) = circ(a_t[i, j]); state index
    i*k + r. cuFFT rfft over k, one p x p complex recurrence per frequency (in chunks of time when
    B*(k//2+1) is too small to fill the GPU), irfft; float32 inside (float16/bfloat16 cast and
    the result cast back); float64 runs direct float64 kernels (a dense pass over the blocks per
    step) up to n = cuda_block_scan_f64_max_n, beyond it the Fourier algorithm in the array library.
    Returns h, or (h, h[:, -1]).
    """
    _a.need()
    return_final = _a.flag(return_final, "return_final")
    a32, u32, h032, (p, k), dt = _block_args(a, u, h0)
    reg, chunk = _block_code(options, dt)
    B, T, n = u32.shape
    if dt == "float64":
        f = _block_fwd_f64_kernels if _f64_kernels(u32, n) else _block_fwd_f64
        h = f(a32, u32, h032, p, k)
        return (h, h[:, -1]) if return_final else h
    h = _a.empty(u32, (B, T, n))
    dev = _a.device_id(u32)
    nbytes = _ext.cuda_block_circulant_scan_workspace(dev, B, T, p, k, reg, chunk)
    ws = _a.scratch(u32, nbytes)
    _ext.cuda_block_circulant_scan_forward(_a.ptr(a32), _a.ptr(u32), _a.ptr(h032), _a.ptr(h), _a.ptr(ws), nbytes,
                                           B, T, p, k, reg, chunk, dev, _a.stream(u32))
    h = _a.cast(h, dt)
    return (h, h[:, -1]) if return_final else h


def block_circulant_scan_vjp(dh, a, u, h0=None, *, dh_last=None, options=None):
    """Gradients of ``block_circulant_scan`` on the GPU: returns (da, du, dh0); dh0 is None when h0 is None.

    dh (B, T, n) real = dL/dh; dh_last (B, n) or None, the cotangent of h[:, -1] (added to
    dh[:, -1]). With g_t = dh_t + A_{t+1}^T g_{t+1}: du = g, dh0 = A_0^T g_0,
    da_t[i, j, m] = sum_r g_t[i*k + r] h_{t-1}[j*k + (r - m) mod k]. One native pass in the
    Fourier domain over k (rfft of a, u, h0, dh, dh_last; the forward recurrence recomputes the
    state spectra; the adjoint recurrence G_t = D_t + A_{t+1}^H G_{t+1} per frequency with
    da_hat_t = G_t conj(H_{t-1}); irfft). float32 inside, gradients returned in u's dtype.
    """
    _a.need()
    a32, u32, h032, (p, k), dt = _block_args(a, u, h0)
    reg, chunk = _block_code(options, dt)
    B, T, n = u32.shape
    real = _a.dtname(u32)
    dh, dh_last = _real_cotangents(dh, dh_last, u, (B, T, n), real)
    if real == "float64" and _f64_kernels(u32, n):
        return _block_bwd_f64_kernels(dh, dh_last, a32, u32, h032, p, k)
    if real == "float64":
        return _block_bwd_f64(dh if dh_last is None else _folded(dh, dh_last), a32, u32, h032, p, k)
    da = _a.empty(a32, tuple(a32.shape))
    du = _a.empty(u32, (B, T, n))
    dh0 = _a.empty(u32, (B, n)) if h032 is not None else None
    dev = _a.device_id(u32)
    nbytes = _ext.cuda_block_circulant_scan_backward_workspace(dev, B, T, p, k, reg, chunk)
    ws = _a.scratch(u32, nbytes)
    _ext.cuda_block_circulant_scan_backward(_a.ptr(a32), _a.ptr(u32), _a.ptr(h032), _a.ptr(dh), _a.ptr(dh_last),
                                            _a.ptr(da), _a.ptr(du), _a.ptr(dh0), _a.ptr(ws), nbytes, B, T, p, k, reg,
                                            chunk, dev, _a.stream(u32))
    back = lambda x: None if x is None else _a.cast(x, dt)
    return back(da), back(du), back(dh0)


def block_circulant_scan_path(B, T, p, k, device=0, options=None):
    """(register kernels?, time steps per chunk) the GPU plan picks for this shape (tests, bench)."""
    _a.need()
    return tuple(_ext.cuda_block_circulant_scan_path(int(device), int(B), int(T), int(p), int(k),
                                                     *_O.block_scan_code(options)))


def block_circulant_scan_describe(B, T, p, k, device=0, options=None) -> str:
    """What the float32 block_circulant_scan plan for this shape chose, in words."""
    _a.need()
    return _ext.cuda_block_circulant_scan_describe(int(device), int(B), int(T), int(p), int(k),
                                                   *_O.block_scan_code(options))
