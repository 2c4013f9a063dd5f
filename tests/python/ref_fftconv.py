"""float64 references for fftconv: direct sums of the DESIGN.md formula (no FFT).

Every function takes float64-castable arrays and returns float64 arrays.
  ref_fftconv      the forward map
  ref_fftconv_jvp  its directional derivative (product rule), used to check ref_fftconv_vjp
  ref_fftconv_vjp  its exact adjoint, written as transposed direct sums
"""
import numpy as np


def _f64(x):
    return None if x is None else np.asarray(x, dtype=np.float64)


def conv(k, v, mode):
    """y[b,h,t] = sum_s k[h,s] v[b,h,t-s] (causal: t-s >= 0; circular: index mod L)."""
    L, Lk = v.shape[-1], k.shape[-1]
    y = np.zeros(v.shape)
    for s in range(Lk):
        if mode == "causal":
            if s >= L:
                break
            y[..., s:] += k[:, s, None] * v[..., :L - s]
        else:
            y += k[:, s, None] * np.roll(v, s, axis=-1)
    return y


def conv_adjoint(k, dz, mode):
    """Transpose of v -> conv(k, v): dv[b,h,t] = sum_s k[h,s] dz[b,h,t+s] (mod L when circular)."""
    L, Lk = dz.shape[-1], k.shape[-1]
    dv = np.zeros(dz.shape)
    for s in range(Lk):
        if mode == "causal":
            if s >= L:
                break
            dv[..., :L - s] += k[:, s, None] * dz[..., s:]
        else:
            dv += k[:, s, None] * np.roll(dz, -s, axis=-1)
    return dv


def filter_adjoint(dz, v, Lk, mode):
    """Transpose of k -> conv(k, v): dk[h,s] = sum_b sum_t dz[b,h,t] v[b,h,t-s]."""
    L = v.shape[-1]
    dk = np.zeros((v.shape[1], Lk))
    for s in range(Lk):
        if mode == "causal":
            if s >= L:
                break
            dk[:, s] = np.einsum("bht,bht->h", dz[..., s:], v[..., :L - s])
        else:
            dk[:, s] = np.einsum("bht,bht->h", dz, np.roll(v, s, axis=-1))
    return dk


def ref_fftconv(u, k, mode="causal", pregate=None, postgate=None, skip=None):
    u, k, pregate, postgate, skip = map(_f64, (u, k, pregate, postgate, skip))
    v = u if pregate is None else u * pregate
    y = conv(k, v, mode)
    if skip is not None:
        y = y + skip[:, None] * v
    if postgate is not None:
        y = y * postgate
    return y


def ref_fftconv_jvp(u, k, mode, pregate, postgate, skip, du, dk, dpregate, dpostgate, dskip):
    """d/de ref_fftconv(x + e dx) at e = 0 (absent inputs stay absent; their directions are ignored)."""
    u, k, pregate, postgate, skip, du, dk, dpregate, dpostgate, dskip = map(
        _f64, (u, k, pregate, postgate, skip, du, dk, dpregate, dpostgate, dskip))
    v = u if pregate is None else u * pregate
    dv = du if pregate is None else du * pregate + u * dpregate
    z = conv(k, v, mode)
    dz = conv(dk, v, mode) + conv(k, dv, mode)
    if skip is not None:
        z = z + skip[:, None] * v
        dz = dz + dskip[:, None] * v + skip[:, None] * dv
    return dz if postgate is None else dpostgate * z + postgate * dz


def ref_fftconv_vjp(dy, u, k, mode="causal", pregate=None, postgate=None, skip=None):
    """(du, dk, dpregate, dpostgate, dskip), None for absent inputs."""
    dy, u, k, pregate, postgate, skip = map(_f64, (dy, u, k, pregate, postgate, skip))
    v = u if pregate is None else u * pregate
    dpostgate = None
    if postgate is not None:
        z = conv(k, v, mode)
        if skip is not None:
            z = z + skip[:, None] * v
        dpostgate = dy * z
    dz = dy if postgate is None else dy * postgate
    dv = conv_adjoint(k, dz, mode)
    dskip = None
    if skip is not None:
        dv = dv + skip[:, None] * dz
        dskip = np.einsum("bht,bht->h", dz, v)
    dk = filter_adjoint(dz, v, k.shape[1], mode)
    du = dv if pregate is None else dv * pregate
    dpregate = None if pregate is None else dv * u
    return du, dk, dpregate, dpostgate, dskip
