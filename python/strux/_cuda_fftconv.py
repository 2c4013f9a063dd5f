"""fftconv and fftconv_spectral on the GPU, for torch tensors and CuPy arrays (strux.fftconv,
strux.fftconv_spectral and strux.torch call here).

Arrays are checked once (torch tensors by cheap attribute tests, _fast, else through the array
adapter strux._cuda with messages that name the argument), outputs allocated of the input's kind
and device, and raw device pointers passed to one native entry per call (python/src/bind_cuda.cpp),
which runs a cached FFTConvPlan (the C++ plan cache, keyed by shape, dtype, mode, algorithm and
device): filter spectrum, then the transform, on the caller's current stream, so
calls compose with CUDA graphs and torch.compile. A plan's filter spectrum and workspace serve
one call at a time: do not run the same shapes concurrently on two streams.
"""
from __future__ import annotations

from . import _cuda as D
from . import _ext
from ._arrays import solver_option
from ._cuda import available  # noqa: F401  (the GPU modules answer available() alike)

#: fftconv algorithm for new plans: 0 = automatic (9 where at most 32 taps are used, causal
#: min(Lk, L), circular Lk; else 10 for causal float32/float16/bfloat16 rows where m = min(Lk, L)
#: > 32, L + m - 1 > 32768 and its block FFT N is at most (L + m - 1) / 8 (measured 2.5-4.9x the
#: whole-row solvers on an H200: bench/NOTES-gpu-fftconv-blocks.md); else 2 for float16/bfloat16 where its FFT size
#: is 256 or 512, i.e. causal L + min(Lk, L) - 1 <= 512 or circular L in {256, 512}; else 4 where the
#: fused kernels apply; else 8 where it applies (float32/float16/bfloat16, causal
#: L + min(Lk, L) - 1 > 32768 or circular L a power of two >= 65536, nfft <= 4194304); else cuFFT);
#: 1 = always the cuFFT path; 2 = the tensor-core kernels for the forward, forced
#: (float16/bfloat16; causal L + min(Lk, L) - 1 <= 16384, circular L a power of two in
#: [256, 16384]; ValueError elsewhere), gradients as with 4; 3 = as 2 with one tensor-core product
#: per real product instead of three (a benchmark probe of the hi/lo operand splits' cost;
#: float16 error about 5-6e-4); 4 = the fused single-kernel path where it applies (float32,
#: float16, bfloat16; causal with L + min(Lk, L) - 1 <= 32768; circular with L a power of two in
#: [1024, 32768]), else cuFFT; 5 = as 2 with short mma chains in the tensor-core passes, 6 = as 5
#: with the radix passes' indices out of their loops, 7 = as 2 with factored twiddles (variants
#: to measure); 8 = the four-step kernels, forced (float32, float16, bfloat16; causal nfft =
#: the next power of two >= max(65536, L + min(Lk, L) - 1), circular L a power of two;
#: nfft <= 4194304; ValueError elsewhere), forward and gradients (under 0 the gradients go to
#: cuFFT where B > 1 and the row pass's H·(M1/2 + 1) CTAs are under two per SM); 9 = the direct
#: kernels (sums over the taps, no transform; at most 64 taps used: causal min(Lk, L), circular
#: Lk; every dtype); 10 = "blocks": overlap-save over blocks of N = the power of two
#: >= max(1024, 8m, min(16m, 4096)) (>= 4m past N = 32768) taps through an inner circular plan of
#: length N (blocks in the input dtype, float32 arithmetic for the 16-bit types; every dtype, causal
#: and circular, any L and Lk; src/cuda/fftconv/blocks.hpp); 11, 12, 13 = as 10 with N >= 8m, 16m,
#: 4m (probes of the block size); 14 = as 8 with its row pass's grid row by row (a probe of the
#: batch rows' order against K̂'s reuse, bench/NOTES-gpu-fftconv-long.md); 15 = dense: Toeplitz
#: blocks of the filter on tensor cores (float16/bfloat16, at most 8192 taps used, L <= 32768,
#: circular L a multiple of 32; forward and gradients, the gradients by the automatic choice
#: without it where their shared memory does not fit: src/cuda/fftconv/dense.hpp; under 0, on a
#: device of compute capability 9.0, the ungated forward as 17 where its model beats mma.sync's);
#: 16 = the automatic choice without the dense kernels; 17 = as 15 with the ungated forward on
#: wgmma (compute capability 9.0 with the sm_90a build; circular L a multiple of 64; rows whose
#: CTA fits in shared memory, about L <= 8000 at Lk = L; ValueError elsewhere:
#: src/cuda/fftconv/dense_wgmma.hpp).
#: Part of the plan cache key.
fftconv_algo = 0

#: options={"solver": name} of strux.fftconv on the GPU -> plan algo ("auto": fftconv_algo).
GPU_SOLVERS = {"auto": None, "fused": 4, "cufft": 1, "tensor": 2, "fourstep": 8, "direct": 9, "blocks": 10,
               "dense": 15, "dense_wgmma": 17}


def _algo(options) -> int:
    """The plan algo for options (None or {"solver": name})."""
    if options is None:
        return fftconv_algo
    a = solver_option(options, GPU_SOLVERS)
    return fftconv_algo if a is None else a

_MODES = ("causal", "circular")


def _fftconv_plan(dev, B, H, L, Lk, mode, dtype, backward):
    """The cached plan (a backward-capable plan serves forward calls too)."""
    return _ext.cuda.fftconv_plan(dev, B, H, L, Lk, mode, dtype, backward, fftconv_algo)


def _gate(g, name, ref, shape, ref_name="u"):
    """g (None stays None) checked against ref's kind, dtype and device and `shape`; contiguous."""
    if g is None:
        return None
    D.array(g, name, len(shape))
    D.same(ref, ref_name, **{name: g})
    D.shape(g, name, shape)
    return D.contig(g)


def _fast(u, k, mode, pre, post, skip):
    """(dev, B, H, L, Lk, circular, dtype code) when torch u, k, pre, post, skip (None or tensors)
    pass every check of fftconv as they are (contiguous, one float dtype and CUDA device, shapes,
    sizes >= 1), else None. Attribute reads are kept to one of each: this runs on every call."""
    s = u.shape
    if len(s) != 3 or type(k) is not type(u):
        return None
    ks, dt = k.shape, u.dtype
    if len(ks) != 2 or ks[0] != s[1] or k.dtype is not dt or 0 in s or ks[1] == 0:
        return None
    c = D.TORCH_FLOAT_CODE.get(dt)
    if c is None or not u.is_cuda or not u.is_contiguous() or not k.is_contiguous() or u.is_neg() or k.is_neg():
        return None
    dev = u.get_device()
    if k.get_device() != dev:
        return None
    if mode == "causal":
        circ = False
    elif mode == "circular" and ks[1] <= s[2]:
        circ = True
    else:
        return None
    if pre is not None or post is not None or skip is not None:
        for g, shape in ((pre, s), (post, s), (skip, (s[1],))):
            if g is not None and (type(g) is not type(u) or g.shape != shape or g.dtype is not dt
                                  or not g.is_contiguous() or g.get_device() != dev or g.is_neg()):
                return None
    return dev, s[0], s[1], s[2], ks[1], circ, c


def _fftconv_args(u, k, mode, pregate, postgate, skip):
    """Checks fftconv's arrays; returns them contiguous and (dev, B, H, L, Lk, circular, dtype code)."""
    D.array(u, "u", 3)
    u = D.contig(u)
    B, H, L = (int(s) for s in u.shape)
    D.array(k, "k", 2)
    D.same(u, "u", k=k)
    if int(k.shape[0]) != H:
        raise ValueError(f"argument 'k': expected shape ({H}, Lk) (H = u.shape[1]), got {tuple(k.shape)}")
    Lk = int(k.shape[1])
    if mode not in _MODES:
        raise ValueError(f"argument 'mode': expected one of 'causal', 'circular', got {mode!r}")
    if mode == "circular" and Lk > L:
        raise ValueError(f"argument 'k': circular mode needs Lk <= L, got Lk = {Lk} and L = {L}")
    pre = _gate(pregate, "pregate", u, (B, H, L))
    post = _gate(postgate, "postgate", u, (B, H, L))
    skip = _gate(skip, "skip", u, (H,))
    r = (D.device_id(u), B, H, L, Lk, mode == "circular", D.DTYPE_CODE[D.dtname(u)])
    return u, D.contig(k), pre, post, skip, r


#: The native entries: one call each runs the cached plan (filter spectrum, then the transform).
_FORWARD = getattr(getattr(_ext, "cuda", None), "fftconv_forward", None)
_BACKWARD = getattr(getattr(_ext, "cuda", None), "fftconv_backward", None)


def forward_torch(u, k, pregate, postgate, skip, r, algo=None):
    """y from torch tensors that passed _fast (r: its answer): the pointers straight to the entry."""
    y = D.torch_empty_like(u)
    _FORWARD(u.data_ptr(), k.data_ptr(), 0 if pregate is None else pregate.data_ptr(),
             0 if postgate is None else postgate.data_ptr(), 0 if skip is None else skip.data_ptr(),
             y.data_ptr(), *r, fftconv_algo if algo is None else algo, D._torch_stream(r[0]))
    return y


_HALF = ("float16", "bfloat16")


def _f32_filter(u, k) -> bool:
    """A float32 k with float16 / bfloat16 u (DESIGN.md: allowed; arithmetic in float32)."""
    return hasattr(u, "dtype") and hasattr(k, "dtype") and D.dtname(u) in _HALF and D.dtname(k) == "float32"


def _up(x, name: str, half: str):
    """x (of u's half dtype or float32) as float32; None stays None; another dtype is a TypeError."""
    if x is None:
        return None
    D.array(x, name)
    if D.dtname(x) not in (half, "float32"):
        raise TypeError(f"argument '{name}': expected dtype {half} (the dtype of 'u') or float32 (the dtype "
                        f"of 'k'), got {D.dtname(x)}")
    return D.cast(x, "float32")


def fftconv(u, k, mode: str = "causal", pregate=None, postgate=None, skip=None, options=None):
    """y = postgate ⊙ (k * v + skip ⊙ v), v = u ⊙ pregate, on the GPU (DESIGN.md fftconv).

    u (B, H, L), k (H, Lk), pregate/postgate (B, H, L), skip (H,): one dtype among float16,
    bfloat16, float32 (computed in float32) and float64, or a float32 k with float16 / bfloat16
    u (the gates and skip of u's dtype or float32: all taken to float32, the float32 path run, y
    rounded to u's dtype once); torch tensors or CuPy arrays on one CUDA device. Returns y
    (B, H, L) of u's kind, dtype and device. The filter spectrum is recomputed on every call (use
    FFTConvCUDA to keep it). options: None or {"solver": name}, name in GPU_SOLVERS.
    """
    if _f32_filter(u, k):
        half = D.dtname(u)
        y = fftconv(_up(u, "u", half), k, mode, _up(pregate, "pregate", half), _up(postgate, "postgate", half),
                    _up(skip, "skip", half), options)
        return D.cast(y, half)
    algo = _algo(options)
    r = _fast(u, k, mode, pregate, postgate, skip) if type(u) in D.TT else None
    if r is not None:
        return forward_torch(u, k, pregate, postgate, skip, r, algo)
    u, k, pregate, postgate, skip, r = _fftconv_args(u, k, mode, pregate, postgate, skip)
    y = D.empty(u, r[1:4])
    _FORWARD(D.ptr(u), D.ptr(k), D.ptr(pregate), D.ptr(postgate), D.ptr(skip), D.ptr(y), *r, algo, D.stream(u))
    return y


def fftconv_vjp(dy, u, k, mode: str = "causal", pregate=None, postgate=None, skip=None, options=None):
    """Vector-Jacobian product of fftconv at (u, k, pregate, postgate, skip) for cotangent dy.

    Argument order: dy (B, H, L), then fftconv's arguments. Returns the tuple
    (du, dk, dpregate, dpostgate, dskip), each shaped like its input, with None for the
    inputs that were not given. options: as for fftconv. With a float32 k and float16 / bfloat16 u
    (see fftconv) each gradient comes back in its own input's dtype (dk float32).
    """
    if _f32_filter(u, k):
        half = D.dtname(u)
        ins = (pregate, postgate, skip)
        g = fftconv_vjp(_up(dy, "dy", half), _up(u, "u", half), k, mode, _up(pregate, "pregate", half),
                        _up(postgate, "postgate", half), _up(skip, "skip", half), options)
        return (D.cast(g[0], half), g[1]) + tuple(None if x is None else D.cast(gx, D.dtname(x))
                                                  for x, gx in zip(ins, g[2:]))
    algo = _algo(options)
    r = _fast(u, k, mode, pregate, postgate, skip) if type(u) in D.TT else None
    if r is not None and type(dy) is type(u) and dy.shape == u.shape and dy.dtype is u.dtype \
            and dy.is_contiguous() and dy.get_device() == r[0] and not dy.is_neg():
        return _vjp(dy, u, k, pregate, postgate, skip, r, u.new_empty, algo)
    u, k, pre, post, skip, r = _fftconv_args(u, k, mode, pregate, postgate, skip)
    dy = _gate(D.array(dy, "dy", 3), "dy", u, r[1:4])  # dy is required: None is a TypeError
    return _vjp(dy, u, k, pre, post, skip, r, lambda shape: D.empty(u, shape), algo)


def _vjp(dy, u, k, pre, post, skip, r, empty, algo=None):
    """The gradients from checked contiguous arrays (r: (dev, B, H, L, Lk, circular, dtype code));
    empty(shape): an uninitialised array of u's kind, dtype and device."""
    B, H, L, Lk = r[1:5]
    du = empty((B, H, L))
    dk = empty((H, Lk))
    dpre = empty((B, H, L)) if pre is not None else None
    dpost = empty((B, H, L)) if post is not None else None
    dskip = empty((H,)) if skip is not None else None
    _BACKWARD(D.ptr(dy), D.ptr(u), D.ptr(k), D.ptr(pre), D.ptr(post), D.ptr(skip), D.ptr(du), D.ptr(dk),
              D.ptr(dpre), D.ptr(dpost), D.ptr(dskip), *r, fftconv_algo if algo is None else algo, D.stream(u))
    return du, dk, dpre, dpost, dskip


class FFTConvCUDA:
    """fftconv with a fixed filter: the filter spectrum is computed once, here.

    FFTConvCUDA(k, B, L, mode) then conv(u, pregate=None, postgate=None, skip=None) for u
    of shape (B, H, L) with H = k.shape[0]. Call set_filter(k) when k changes. The operator owns
    its plan (not shared through the plan cache: it holds this filter's spectrum).
    """

    def __init__(self, k, B: int, L: int, mode: str = "causal"):
        D.array(k, "k", 2)
        self._k = k  # the reference array: kind, dtype and device of every later argument
        self.H, self.Lk = (int(s) for s in k.shape)
        self.B, self.L, self.mode = int(B), int(L), mode
        self.dtype, self.device = D.dtname(k), D.device_id(k)
        if mode not in _MODES:
            raise ValueError(f"argument 'mode': expected one of 'causal', 'circular', got {mode!r}")
        with D.device_guard(k):
            self._plan = _ext.cuda.FFTConvPlan(self.B, self.H, self.L, self.Lk, mode, self.dtype, False,
                                               fftconv_algo)
        self.set_filter(k)

    def describe(self) -> str:
        """What the plan chose, in words."""
        p = self._plan
        return (f"fftconv (B={self.B}, H={self.H}, L={self.L}, Lk={self.Lk}) {self.mode} {self.dtype}: "
                + ("the direct kernels (sums over the taps)" if p.direct
                   else "the dense kernels (Toeplitz blocks on tensor cores"
                   + ("; ungated calls by wgmma" if p.dense_wgmma else "")
                   + ("" if p.dense_gated else "; gated calls by the FFT kernels")
                   + ")" if p.dense
                   else f"blocks of {p.nfft} (overlap-save, {p.blocks_per_row} per row)" if p.blocks
                   else "the tensor-core kernels" if p.tensor
                   else "the four-step kernels" if p.fourstep
                   else "the fused single-kernel path" if p.fused
                   else f"cuFFT, nfft {p.nfft}"))

    def set_filter(self, k):
        k = _gate(k, "k", self._k, (self.H, self.Lk), "the operator's filter")
        self._plan.set_filter(D.ptr(k), D.stream(k))

    def __call__(self, u, pregate=None, postgate=None, skip=None):
        shape = (self.B, self.H, self.L)
        u = _gate(u, "u", self._k, shape, "the operator's filter")
        pre = _gate(pregate, "pregate", u, shape)
        post = _gate(postgate, "postgate", u, shape)
        skip = _gate(skip, "skip", u, (self.H,))
        y = D.empty(u, shape)
        self._plan.forward(D.ptr(u), D.ptr(pre), D.ptr(post), D.ptr(skip), D.ptr(y), D.stream(u))
        return y


# ---- fftconv_spectral: the filter as its lowest m frequencies, k_hat (H, m) complex ----------------

#: The complex dtype k_hat is computed in for each dtype of u (float32 arithmetic for the half types).
_COMPLEX_OF = {"float32": "complex64", "float16": "complex64", "bfloat16": "complex64", "float64": "complex128"}
_SPEC_FORWARD = getattr(getattr(_ext, "cuda", None), "fftconv_spectral_forward", None)
_SPEC_BACKWARD = getattr(getattr(_ext, "cuda", None), "fftconv_spectral_backward", None)


def _spectral_args(u, k_hat, mode, pregate, postgate, skip):
    """Checks fftconv_spectral's arrays; returns them contiguous and (dev, B, H, L, m, circular, dtype code)."""
    D.array(u, "u", 3)
    u = D.contig(u)
    B, H, L = (int(s) for s in u.shape)
    if mode not in _MODES:
        raise ValueError(f"argument 'mode': expected one of 'causal', 'circular', got {mode!r}")
    D.array(k_hat, "k_hat", 2, dtypes=("complex64", "complex128"))
    D.same_device(u, "u", k_hat=k_hat)
    k_hat = D.cast(k_hat, _COMPLEX_OF[D.dtname(u)])  # either width: taken to u's compute width
    if int(k_hat.shape[0]) != H:
        raise ValueError(f"argument 'k_hat': expected shape ({H}, m) (H = u.shape[1]), got {tuple(k_hat.shape)}")
    m = int(k_hat.shape[1])
    n = L if mode == "circular" else 2 * L
    if m > n // 2 + 1:
        raise ValueError(f"argument 'k_hat': expected 1 <= m <= n // 2 + 1 = {n // 2 + 1} frequencies "
                         f"(n = {n}: L = {L}, {mode} mode), got m = {m}")
    pre = _gate(pregate, "pregate", u, (B, H, L))
    post = _gate(postgate, "postgate", u, (B, H, L))
    skip = _gate(skip, "skip", u, (H,))
    r = (D.device_id(u), B, H, L, m, mode == "circular", D.DTYPE_CODE[D.dtname(u)])
    return u, D.contig(k_hat), pre, post, skip, r


def fftconv_spectral(u, k_hat, mode: str = "causal", pregate=None, postgate=None, skip=None):
    """strux.fftconv_spectral on the GPU (DESIGN.md): u (B, H, L) float16 / bfloat16 / float32 with
    k_hat (H, m) complex64, or float64 with complex128 (a k_hat of the other width is taken to that
    one); gates like u. Returns y of u's kind, dtype and device, computed on the current stream."""
    u, k_hat, pre, post, skip, r = _spectral_args(u, k_hat, mode, pregate, postgate, skip)
    y = D.empty(u, r[1:4])
    _SPEC_FORWARD(D.ptr(u), D.ptr(k_hat), D.ptr(pre), D.ptr(post), D.ptr(skip), D.ptr(y), *r, D.stream(u))
    return y


def fftconv_spectral_vjp(dy, u, k_hat, mode: str = "causal", pregate=None, postgate=None, skip=None):
    """(du, dk_hat, dpregate, dpostgate, dskip) of fftconv_spectral for cotangent dy; dk_hat in
    k_hat's dtype (PyTorch's convention for complex inputs), None for inputs not given."""
    kdt = D.dtname(k_hat) if hasattr(k_hat, "dtype") else None  # before _spectral_args takes its width
    u, k_hat, pre, post, skip, r = _spectral_args(u, k_hat, mode, pregate, postgate, skip)
    B, H, L, m = r[1:5]
    dy = _gate(D.array(dy, "dy", 3), "dy", u, (B, H, L))  # dy is required: None is a TypeError
    du = D.empty(u, (B, H, L))
    dk = D.empty(u, (H, m), D.dtname(k_hat))
    dpre = D.empty(u, (B, H, L)) if pre is not None else None
    dpost = D.empty(u, (B, H, L)) if post is not None else None
    dskip = D.empty(u, (H,)) if skip is not None else None
    _SPEC_BACKWARD(D.ptr(dy), D.ptr(u), D.ptr(k_hat), D.ptr(pre), D.ptr(post), D.ptr(skip), D.ptr(du), D.ptr(dk),
                   D.ptr(dpre), D.ptr(dpost), D.ptr(dskip), *r, D.stream(u))
    return du, D.cast(dk, kdt), dpre, dpost, dskip
