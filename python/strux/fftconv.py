"""fftconv: long depthwise FFT convolution, causal or circular, with gates (DESIGN.md).

    v = u * pregate                                   (v = u without pregate)
    causal:   y[b,h,t] = sum_{s=0}^{min(t, Lk-1)} k[h,s] v[b,h,t-s]
    circular: y[b,h,t] = sum_{s=0}^{Lk-1} k[h,s] v[b,h,(t-s) mod L]      (needs Lk <= L)
    y += skip[h] v  (if skip);  y *= postgate  (if postgate)

Shapes: u, pregate, postgate, y (B, H, L); k (H, Lk); skip (H,). All inputs share one real
dtype; float16/bfloat16 are computed in float32 and returned in the input dtype. A float32 `k`
with float16/bfloat16 `u` is allowed (DESIGN.md): u, the gates and skip (of u's dtype or
float32) are computed in float32 and y comes back in u's dtype; dk stays float32.
Non-contiguous inputs are copied to C order before the native call.
"""
from __future__ import annotations

import numpy as np

from . import _ext
from ._runtime import planning
from ._arrays import (check_shape, cuda_backend, on_gpu, choice, compute_dtype, integer, is_half, native,
                      native_dtype, real_array, result, same_dtype, solver_option, to_numpy)

# FFTW transforms take 32-bit sizes: L (and L + Lk - 1 in causal mode) must fit them.
_MAX_FFT = 2**31 - 1

_MODES = ("causal", "circular")
#: options={"solver": ...} of the CPU path: "auto" (the plan's rule: the direct sums where at most
#: strux's kDirectAutoTaps = 16 taps are used, else "blocks" where L >= 16384 and the block FFT is
#: at most an eighth of the whole row's, else FFTW), "fft", "direct" (sums over the taps,
#: no transform; at most 64 taps used, causal min(Lk, L), circular Lk; else ValueError) or "blocks"
#: (overlap-save over blocks of an FFT size of a few times the taps used: short filters, long rows).
_CPU_SOLVERS = {"auto": "", "fft": "fft", "direct": "direct", "blocks": "blocks"}
_PLANS = {np.dtype(np.float32): _ext.FFTConvPlanFloat32, np.dtype(np.float64): _ext.FFTConvPlanFloat64}


def _check_filter(k, L: int, mode: str) -> np.ndarray:
    k = real_array(k, "k", 2)
    if mode == "circular" and k.shape[1] > L:
        raise ValueError(f"argument 'k': circular mode needs a filter no longer than the sequence "
                         f"(Lk <= L), got Lk = {k.shape[1]}, L = {L}")
    return k


_NO_DY = object()


def _check_inputs(u, H, L, pregate, postgate, skip, dy=_NO_DY):
    """Validated arrays (u, pregate, postgate, skip, dy); None stays None."""
    u = real_array(u, "u", 3)
    check_shape(u, "u", (None, H, L))
    out = [u]
    for name, g in (("pregate", pregate), ("postgate", postgate)):
        if g is not None:
            g = real_array(g, name, 3)
            check_shape(g, name, u.shape)
        out.append(g)
    if skip is not None:
        skip = real_array(skip, "skip", 1)
        check_shape(skip, "skip", (H,))
    out.append(skip)
    if dy is not _NO_DY:
        dy = real_array(dy, "dy", 3)  # None is a TypeError naming 'dy'
        check_shape(dy, "dy", u.shape)
    out.append(dy)
    return out


class FFTConv:
    """A reusable fftconv operator for one filter `k` (H, Lk) and sequence length `L`.

    Building it computes the filter spectrum (and FFTW plans) once; calls then cost two FFTs
    per (b, h) row. `mode` is "causal" (default) or "circular" (needs Lk <= L). `planner`:
    FFTW effort for new sizes, "estimate" / "measure" / "patient" (None: strux.set_planning's).
    `solver`: "auto" (default: direct sums over the taps where at most 16 taps are used, else
    "blocks" where L >= 16384 and its block FFT is at most an eighth of the whole row's, else
    FFTW), "fft", "direct" (at most 64 taps used: causal min(Lk, L), circular Lk), or "blocks"
    (overlap-save over blocks of an FFT size of a few times the taps used).

        op = strux.FFTConv(k, L)
        y = op(u, pregate=None, postgate=None, skip=None)
        du, dk, dpregate, dpostgate, dskip = op.vjp(dy, u, pregate=..., postgate=..., skip=...)

    Inputs must have the dtype of `k`, except that a float32 `k` takes float16/bfloat16 `u`
    (gates and skip of u's dtype or float32): computed in float32, y in u's dtype. Pickling keeps `k`, `L` and `mode` and rebuilds the
    plan on load (for multiprocessing, joblib, Dask).
    """

    def __init__(self, k, L: int, *, mode: str = "causal", planner=None, solver: str = "auto"):
        mode = choice(mode, "mode", _MODES)
        self._solver = solver_option({"solver": solver}, _CPU_SOLVERS)
        L = integer(L, "L", 1, _MAX_FFT)
        k = _check_filter(k, L, mode)
        if mode == "causal" and L + min(k.shape[1], L) - 1 > _MAX_FFT:
            raise ValueError(f"argument 'L': causal mode needs L + min(Lk, L) - 1 <= {_MAX_FFT} "
                             f"(FFTW's 32-bit sizes), got L = {L}, Lk = {k.shape[1]}")
        self.mode, self.L, self.H, self.Lk = mode, L, k.shape[0], k.shape[1]
        self.dtype = k.dtype
        self._cdt = compute_dtype(k.dtype)
        self._k = np.array(k, copy=True)  # for pickling; the plan keeps only the spectrum
        self._k.flags.writeable = False
        self._planner = planner
        with planning(planner):
            self._plan = _PLANS[self._cdt](native(k, self._cdt), L, mode, self._solver)

    def __getstate__(self):
        return {"k": self._k, "L": self.L, "mode": self.mode, "planner": self._planner,
                "solver": self._solver or "auto"}

    def __setstate__(self, state):
        self.__init__(state["k"], state["L"], mode=state["mode"], planner=state.get("planner"),
                      solver=state.get("solver", "auto"))

    @property
    def nfft(self) -> int:
        """FFT length used: causal good_fft_size(L + min(Lk, L) - 1), circular L; 0 for the direct solver;
        the block FFT size for the blocks solver."""
        return self._plan.nfft

    @property
    def solver(self) -> str:
        """What the plan runs: "fft", "direct" or "blocks"."""
        return self._plan.solver

    def __repr__(self) -> str:
        return (f"FFTConv(H={self.H}, L={self.L}, Lk={self.Lk}, mode={self.mode!r}, dtype={self.dtype}, "
                f"solver={self.solver!r}, nfft={self.nfft})")

    def _half_u(self, u) -> bool:
        """A float16/bfloat16 u with this float32 filter (DESIGN.md: allowed, computed in float32)."""
        return self.dtype == np.float32 and is_half(u.dtype)

    def _native(self, arrays: dict):
        u = arrays["u"]
        if self._half_u(u):
            want = native_dtype(u.dtype)
            for n, a in arrays.items():
                if a is not None and native_dtype(a.dtype) not in (want, np.dtype(np.float32)):
                    raise TypeError(f"argument '{n}': expected dtype {want} (the dtype of 'u') or float32 "
                                    f"(the dtype of 'k'), got {a.dtype}")
        else:
            same_dtype(k=np.empty(0, self.dtype), **arrays)
        return [native(a, self._cdt) for a in arrays.values()]

    def __call__(self, u, *, pregate=None, postgate=None, skip=None) -> np.ndarray:
        """y (B, H, L) in the dtype of u."""
        u, pregate, postgate, skip, _ = _check_inputs(u, self.H, self.L, pregate, postgate, skip)
        dt = u.dtype
        u, pregate, postgate, skip = self._native(dict(u=u, pregate=pregate, postgate=postgate, skip=skip))
        return result(self._plan.forward(u, pregate, postgate, skip), dt)

    def vjp(self, dy, u, *, pregate=None, postgate=None, skip=None):
        """(du, dk, dpregate, dpostgate, dskip) for cotangent dy; None for absent inputs."""
        u, pregate, postgate, skip, dy = _check_inputs(u, self.H, self.L, pregate, postgate, skip, dy)
        dt = u.dtype
        # each gradient in its input's dtype (they all equal u's unless a float32 k takes half u)
        dts = [dt, self.dtype] + [dt if a is None else a.dtype for a in (pregate, postgate, skip)]
        u, dy, pregate, postgate, skip = self._native(
            dict(u=u, dy=dy, pregate=pregate, postgate=postgate, skip=skip))
        grads = self._plan.backward(dy, u, pregate, postgate, skip)
        return tuple(None if g is None else result(g, d) for g, d in zip(grads, dts))


def _operator(u, k, mode, options):
    mode = choice(mode, "mode", _MODES)
    solver = solver_option(options, _CPU_SOLVERS) or "auto"
    u = real_array(u, "u", 3)
    k = real_array(k, "k", 2)
    check_shape(k, "k", (u.shape[1], None))
    if not (is_half(u.dtype) and native_dtype(k.dtype) == np.float32):  # DESIGN.md: float32 k, half u
        same_dtype(u=u, k=k)
    return u, FFTConv(k, u.shape[2], mode=mode, solver=solver)


# Tensor types whose CUDA instances go straight to the GPU path (filled once one has gone there:
# torch.Tensor, nn.Parameter), skipping the DLPack device probe of on_gpu and the imports of _gpu.
_gpu_types: tuple = ()
_cuda_fftconv = None  # strux._cuda_fftconv, set with _gpu_types


def _gpu(x=None):
    """The CUDA path of fftconv (torch / CuPy arrays), or a clear error when absent."""
    global _gpu_types, _cuda_fftconv
    cuda = cuda_backend()  # raises when this build or machine has no CUDA
    from . import _cuda_fftconv as mod
    if not _gpu_types and x is not None:
        _gpu_types, _cuda_fftconv = cuda.see_torch(x), mod
    return mod


def fftconv(u, k, *, mode: str = "causal", pregate=None, postgate=None, skip=None, options=None) -> np.ndarray:
    """Depthwise FFT convolution of u (B, H, L) with k (H, Lk) along the last axis.

    mode: "causal" (default; taps s >= L have no effect) or "circular" (requires Lk <= L).
    pregate, postgate: optional (B, H, L) gates, v = u * pregate, y = (k * v + skip v) * postgate.
    skip: optional (H,) per-channel skip weight.
    Returns y (B, H, L) in the dtype of u (float16/bfloat16 computed in float32; a float32 k
    with float16/bfloat16 u is allowed, the gates and skip then of u's dtype or float32).
    CUDA arrays (torch, CuPy) run on the GPU on the current stream and come back of their kind.
    options: None, or {"solver": name} to force a solver: on the CPU "auto", "fft", "direct"
    (sums over the taps; at most 64 taps used; "auto" takes it up to 16) or "blocks" (overlap-save
    over blocks of a few times the taps, for short filters on long rows; "auto" takes it from
    L = 16384 where its block FFT is at most an eighth of the whole row's); on the GPU "auto" (the
    direct kernels where at most 32 taps are used, else "dense" for float16/bfloat16 where its cost
    model beats the FFT kernels, about 1000 taps per output at FFT 4K; gated calls and gradients
    past its own limits run the FFT kernels, else the FFT kernels), "fused", "cufft",
    "tensor", "fourstep", "direct", "blocks" (overlap-save over blocks, for short filters on long
    rows; "auto" takes it for long causal rows, float32/float16/bfloat16), "dense" (Toeplitz
    blocks of the filter on tensor cores, mma.sync, float16/bfloat16, at most 8192 taps used) or
    "dense_wgmma" (as "dense" with the ungated forward on wgmma: compute capability 9.0, rows up
    to about 8000 at Lk = L; "auto" takes it there where its model beats mma.sync's)
    (strux._cuda_fftconv.GPU_SOLVERS). A forced solver that does not apply raises ValueError.
    """
    if options is None and type(u) in _gpu_types and u.is_cuda:
        return _cuda_fftconv.fftconv(u, k, mode, pregate, postgate, skip)
    if on_gpu(u):
        return _gpu(u).fftconv(u, k, mode, pregate, postgate, skip, options)
    u, op = _operator(u, k, mode, options)
    return op(u, pregate=pregate, postgate=postgate, skip=skip)


def fftconv_vjp(dy, u, k, *, mode: str = "causal", pregate=None, postgate=None, skip=None, options=None):
    """Vector-Jacobian product of `fftconv` at (u, k, pregate, postgate, skip) for cotangent dy.

    Arguments: dy (B, H, L) the gradient of a loss w.r.t. y, then the inputs of `fftconv`.
    Returns (du, dk, dpregate, dpostgate, dskip): gradients with the shapes of u, k, pregate,
    postgate, skip, each None when that optional input was not given. In causal mode
    dk[:, s] = 0 for taps s >= L (they never reach an output). CUDA arrays run on the GPU.
    options: as for `fftconv`.
    """
    if on_gpu(u):
        return _gpu().fftconv_vjp(dy, u, k, mode, pregate, postgate, skip, options)
    u, op = _operator(u, k, mode, options)
    return op.vjp(dy, u, pregate=pregate, postgate=postgate, skip=skip)


# ---- fftconv_spectral: the filter as its lowest m frequencies --------------------------------------

_COMPLEX_OF = {np.dtype(np.float32): np.dtype(np.complex64), np.dtype(np.float64): np.dtype(np.complex128)}


def spectral_size(L: int, mode: str) -> int:
    """n of fftconv_spectral: L (circular) or 2L (causal); k_hat may hold up to n // 2 + 1 bins."""
    return L if mode == "circular" else 2 * L


def _spectral_args(u, k_hat, mode, pregate, postgate, skip, dy=_NO_DY):
    """Validated (u, k_hat, pregate, postgate, skip, dy) in the compute dtypes, u's dtype and
    k_hat's (either complex width: k_hat is taken to u's compute width, complex64 for float16 /
    bfloat16 / float32 and complex128 for float64)."""
    mode = choice(mode, "mode", _MODES)
    u = real_array(u, "u", 3)
    B, H, L = u.shape
    if spectral_size(L, mode) > _MAX_FFT:
        raise ValueError(f"argument 'u': fftconv_spectral transforms at n = {'L' if mode == 'circular' else '2L'} "
                         f"= {spectral_size(L, mode)}, more than FFTW's 32-bit sizes allow ({_MAX_FFT}), "
                         f"got L = {L} ({mode})")
    k_hat = to_numpy(k_hat, "k_hat")
    if k_hat.dtype.kind != "c" or compute_dtype(k_hat.dtype) not in _COMPLEX_OF.values():
        raise TypeError(f"argument 'k_hat': expected a complex array (complex64 or complex128), got {k_hat.dtype}")
    if k_hat.ndim != 2 or k_hat.shape[0] != H:
        raise ValueError(f"argument 'k_hat': expected shape ({H}, m) (H = u.shape[1]), got {k_hat.shape}")
    n = spectral_size(L, mode)
    if not 1 <= k_hat.shape[1] <= n // 2 + 1:
        raise ValueError(f"argument 'k_hat': expected 1 <= m <= n // 2 + 1 = {n // 2 + 1} frequencies "
                         f"(n = {n}: L = {L}, {mode} mode), got m = {k_hat.shape[1]}")
    cdt = compute_dtype(u.dtype)
    kdt, kdt_in = _COMPLEX_OF[cdt], native_dtype(k_hat.dtype)
    u, pregate, postgate, skip, dy = _check_inputs(u, H, L, pregate, postgate, skip, dy)
    arrays = dict(u=u, pregate=pregate, postgate=postgate, skip=skip)
    if dy is not _NO_DY:
        arrays["dy"] = dy
    same_dtype(**arrays)
    dt = u.dtype
    conv = [native(a, cdt) for a in (u, pregate, postgate, skip)]
    return (conv[0], native(k_hat, kdt), conv[1], conv[2], conv[3], (native(dy, cdt) if dy is not _NO_DY else None),
            dt, kdt_in)


def fftconv_spectral(u, k_hat, *, mode: str = "causal", pregate=None, postgate=None, skip=None):
    """fftconv with the filter given by its lowest m frequencies (DESIGN.md fftconv_spectral).

    With n = L (circular) or 2L (causal) and K = k_hat zero-padded to n // 2 + 1 bins:
    y = irfft(rfft(v, n) * K, n)[..., :L], v = u * pregate; then y += skip[h] v, y *= postgate.
    u (B, H, L) real; k_hat (H, m) complex, 1 <= m <= n // 2 + 1, complex64 or complex128: taken to
    complex64 with float16, bfloat16 or float32 u (computed in float32), to complex128 with float64
    u. The imaginary parts
    of bins 0 and n / 2 have no effect (irfft reads their real parts). Returns y (B, H, L) in
    the dtype of u. CUDA arrays (torch, CuPy) run on the GPU on the current stream.
    """
    if on_gpu(u):
        return _gpu(u).fftconv_spectral(u, k_hat, mode, pregate, postgate, skip)
    u, k_hat, pregate, postgate, skip, _, dt, _ = _spectral_args(u, k_hat, mode, pregate, postgate, skip)
    return result(_ext.fftconv_spectral_forward(u, k_hat, mode, pregate, postgate, skip), dt)


def fftconv_spectral_vjp(dy, u, k_hat, *, mode: str = "causal", pregate=None, postgate=None, skip=None):
    """Vector-Jacobian product of `fftconv_spectral` for cotangent dy (B, H, L).

    Returns (du, dk_hat, dpregate, dpostgate, dskip), shaped like u, k_hat, pregate, postgate,
    skip (None for optional inputs not given). dk_hat follows PyTorch's convention for complex
    inputs, dL/dRe + i dL/dIm (the conjugate Wirtinger derivative), in k_hat's dtype; the others
    are in u's dtype. CUDA arrays run on the GPU.
    """
    if on_gpu(u):
        return _gpu(u).fftconv_spectral_vjp(dy, u, k_hat, mode, pregate, postgate, skip)
    u, k_hat, pregate, postgate, skip, dy, dt, kdt = _spectral_args(u, k_hat, mode, pregate, postgate, skip, dy)
    du, dk, dpre, dpost, dskip = _ext.fftconv_spectral_backward(dy, u, k_hat, mode, pregate, postgate, skip)
    return (result(du, dt), dk.astype(kdt, copy=False),
            *(None if g is None else result(g, dt) for g in (dpre, dpost, dskip)))
