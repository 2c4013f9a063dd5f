"""The lean host path of the GPU ks products for PyTorch tensors (strux._cuda_ks_scan, strux.torch).

A small product costs tens of microseconds of GPU time, so the host work per call matters: the
checked path (_cuda_ks_scan: full validation, DLPack import of every array, a KsPlan built per
call, a torch Stream object) spent ~35 us before the launch. Here:

- ``*_ok`` functions accept only the case the checked path would pass through unchanged (exact
  torch.Tensor / nn.Parameter, CUDA, float32/float16/bfloat16, one device, C-contiguous, the
  pattern's shapes, Python-int pattern entries >= 1, sizes >= 1) using cheap tensor attributes,
  and return None for anything else; the caller then runs the checked path, which raises the
  errors that name the argument, or copies a non-contiguous input. So no check is lost: a case
  either passes every check here or goes to the checked path.
- launchers pass raw data pointers and sizes to _ext.cuda_ks_*_raw (python/src/
  bind_cuda_ks_raw.cpp), which keeps KsPlans in a per-thread cache, on the current raw stream
  (torch._C._cuda_getCurrentRawStream) of the arrays' device.

Nothing here imports torch: ``init`` runs once the checked path has seen a torch tensor (so the
types tuple ``TT`` stays empty, and every ``type(x) in TT`` test false, until then).
"""
from __future__ import annotations

from . import _ext

TT: tuple = ()     # exact tensor types the lean path takes: (torch.Tensor, torch.nn.Parameter)
_TDT: dict = {}    # torch dtype -> strux::cuda::DType code
_F32 = None        # torch.float32
_stream = None     # torch._C._cuda_getCurrentRawStream


def init():
    """Fills the torch globals and lets strux.ks send CUDA tensors straight here (called by the
    checked path once it has run on a torch tensor, and by strux.torch_ks_scan at import); a
    build without the CUDA entries leaves the lean path off."""
    global TT, _TDT, _F32, _stream
    if TT or not hasattr(_ext, "cuda_ks_forward_raw"):
        return
    import torch
    from . import _cuda_ks_scan, ks
    _TDT = {torch.float32: 0, torch.float16: 2, torch.bfloat16: 3}
    _F32 = torch.float32
    _stream = torch._C._cuda_getCurrentRawStream
    TT = (torch.Tensor, torch.nn.Parameter)
    ks._cuda_ks_scan = _cuda_ks_scan
    ks._gpu_types = TT


def pattern(p):
    """(a, b, c, d) when p is a tuple or list of 4 Python ints >= 1 (a subset of what
    strux.ks._pattern accepts, checked without it), else None."""
    if (type(p) is tuple or type(p) is list) and len(p) == 4:
        a, b, c, d = p
        if type(a) is int and type(b) is int and type(c) is int and type(d) is int \
                and a > 0 and b > 0 and c > 0 and d > 0:
            return a, b, c, d
    return None


def patterns(ps):
    """(list of (a, b, c, d), flat list) for a non-empty list/tuple of compatible lean patterns,
    else None."""
    if not (type(ps) is list or type(ps) is tuple) or not ps:
        return None
    out, flat = [], []
    for q in ps:
        p = pattern(q)
        if p is None:
            return None
        if out:
            a0, _, c0, d0 = out[-1]
            if a0 * c0 * d0 != p[0] * p[1] * p[3]:
                return None
        out.append(p)
        flat += p
    return out, flat


def layout(lay):
    """True for "bsl", False for "bsf", None otherwise."""
    if type(lay) is str:
        if lay == "bsf":
            return False
        if lay == "bsl":
            return True
    return None


def _batch(x, width, bl):
    """x's batch when x is contiguous, 2-D with `width` features and batch >= 1; else 0."""
    s = x.shape
    if len(s) != 2 or not x.is_contiguous():
        return 0
    n, batch = (s[0], s[1]) if bl else (s[1], s[0])
    return batch if n == width and batch > 0 else 0


def _act_batch(x, dt, dev, width, bl):
    """As _batch, for a tensor that must also be of dtype code dt on device dev."""
    if type(x) not in TT or _TDT.get(x.dtype) != dt or x.get_device() != dev:
        return 0
    return _batch(x, width, bl)


def _w_ok(w, x, dev, p):
    return type(w) in TT and w.dtype is x.dtype and w.get_device() == dev and w.shape == p \
        and w.is_contiguous()


def ks_ok(x, w, p, bl):
    """(batch, dtype code, device) when ks_matmul(x, w, p) may take the lean path, else None.
    p: a lean pattern, bl: a lean layout."""
    if type(x) not in TT:
        return None
    dt = _TDT.get(x.dtype)
    dev = x.get_device()
    if dt is None or dev < 0 or not _w_ok(w, x, dev, p):
        return None
    batch = _batch(x, p[0] * p[2] * p[3], bl)
    return (batch, dt, dev) if batch else None


def ks_forward(x, w, p, bl, batch, dt, dev, opts=0):
    """opts: the packed plan options (strux._cuda_options.ks_code; 0: the solver table)."""
    a, b, c, d = p
    M = a * b * d
    y = x.new_empty((M, batch) if bl else (batch, M))
    _ext.cuda_ks_forward_raw(x.data_ptr(), w.data_ptr(), y.data_ptr(), a, b, c, d, batch, bl, dt, dev, opts,
                             _stream(dev))
    return y


def vjp_ok(dy, x, w, p, bl):
    """(batch, dtype code, device) when ks_matmul_vjp(dy, x, w, p) may take the lean path."""
    r = ks_ok(x, w, p, bl)
    if r is None or _act_batch(dy, r[1], r[2], p[0] * p[1] * p[3], bl) != r[0]:
        return None
    return r


def ks_backward(dy, x, w, p, bl, batch, dt, dev, need_dx=True, need_dw=True, opts=0):
    """(dx, dw), each None where not needed; dw summed in float32, returned in x's dtype."""
    dx = x.new_empty(x.shape) if need_dx else None
    dw32 = w.new_empty(p, dtype=_F32) if need_dw else None
    a, b, c, d = p
    _ext.cuda_ks_backward_raw(dy.data_ptr(), x.data_ptr(), w.data_ptr(), 0 if dx is None else dx.data_ptr(),
                              0 if dw32 is None else dw32.data_ptr(), a, b, c, d, batch, bl, dt, dev, opts,
                              _stream(dev))
    return dx, (dw32 if dw32 is None or dt == 0 else dw32.to(x.dtype))


def chain_ok(x, ws, ps, bl):
    """(batch, dtype code, device) when ks_chain(x, ws, ps) may take the lean path (ps: the
    list of lean patterns)."""
    if type(x) not in TT or (type(ws) is not list and type(ws) is not tuple) or len(ws) != len(ps):
        return None
    dt = _TDT.get(x.dtype)
    dev = x.get_device()
    if dt is None or dev < 0:
        return None
    for w, p in zip(ws, ps):
        if not _w_ok(w, x, dev, p):
            return None
    a, _, c, d = ps[-1]
    batch = _batch(x, a * c * d, bl)
    return (batch, dt, dev) if batch else None


def _region(n):
    """Scratch regions start on 128-element boundaries (bind_cuda_ks_raw.cpp, region())."""
    return (n + 127) // 128 * 128


def chain_forward(x, ws, ps, flat, bl, batch, dt, dev, opts=0):
    P = len(ps)
    a, b, _, d = ps[0]
    y = x.new_empty((a * b * d, batch) if bl else (batch, a * b * d))
    if P == 1:
        _ext.cuda_ks_forward_raw(x.data_ptr(), ws[0].data_ptr(), y.data_ptr(), *ps[0], batch, bl, dt, dev, opts,
                                 _stream(dev))
        return y
    inter = max(_region(q[0] * q[1] * q[3] * batch) for q in ps[1:]) * min(P - 1, 2)
    s = x.new_empty((inter,))
    _ext.cuda_ks_chain_forward_raw(x.data_ptr(), [w.data_ptr() for w in ws], y.data_ptr(), s.data_ptr(),
                                   inter, flat, batch, bl, dt, dev, opts, _stream(dev))
    return y


def chain_vjp_ok(dy, x, ws, ps, bl):
    r = chain_ok(x, ws, ps, bl)
    if r is None:
        return None
    a, b, _, d = ps[0]
    return r if _act_batch(dy, r[1], r[2], a * b * d, bl) == r[0] else None


def chain_backward(dy, x, ws, ps, flat, bl, batch, dt, dev, need_dx=True, need_dw=None, opts=0):
    """(dx or None, [dw_q or None]); the forward intermediates are recomputed on the GPU."""
    P = len(ps)
    if P == 1:
        dx, dw = ks_backward(dy, x, ws[0], ps[0], bl, batch, dt, dev, need_dx,
                             True if need_dw is None else need_dw[0], opts)
        return dx, [dw]
    dx = x.new_empty(x.shape) if need_dx else None
    dw32 = [w.new_empty(p, dtype=_F32) if need_dw is None or need_dw[q] else None
            for q, (w, p) in enumerate(zip(ws, ps))]
    acts = [_region(q[0] * q[2] * q[3] * batch) for q in ps[:-1]]
    n = sum(acts) + max(acts) * min(P - 1, 2)
    s = x.new_empty((n,))
    _ext.cuda_ks_chain_backward_raw(dy.data_ptr(), x.data_ptr(), [w.data_ptr() for w in ws],
                                    0 if dx is None else dx.data_ptr(),
                                    [0 if g is None else g.data_ptr() for g in dw32], s.data_ptr(), n, flat,
                                    batch, bl, dt, dev, opts, _stream(dev))
    if dt != 0:
        dw32 = [None if g is None else g.to(x.dtype) for g in dw32]
    return dx, dw32
