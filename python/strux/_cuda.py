"""CUDA paths of fftconv and BlockToeplitz, for torch tensors and CuPy arrays on a GPU.

Inputs pass to the native plans as DLPack capsules made without stream synchronisation
(torch.utils.dlpack.to_dlpack / cupy toDlpack), and all work runs on the caller's current
stream (torch.cuda.current_stream / cupy.cuda.get_current_stream), so calls compose with
CUDA graphs and torch.compile. Outputs are allocated here, of the input's kind and device.

Plans (cuFFT/cuBLAS plans + workspace) are cached by (device, shapes, mode, dtype); a plan's
workspace is used by one call at a time, so do not run the same shapes concurrently on two
streams. Non-contiguous inputs are copied to contiguous ones (documented copy).
"""
from __future__ import annotations

from collections import OrderedDict

from . import _ext

_FLOATS = ("float32", "float64", "float16", "bfloat16")
_PLAN_CACHE_SIZE = 16


def available() -> bool:
    """True when strux was built with CUDA and a device is visible."""
    return bool(_ext.has_cuda) and _ext.cuda_device_count() > 0


# ---- array kinds (torch / cupy) -------------------------------------------------------------

class _Torch:
    name = "torch"

    def __init__(self):
        import torch
        import torch.utils.dlpack
        self.t = torch

    def dtype(self, x):
        return str(x.dtype).replace("torch.", "")

    def device(self, x):
        return x.device.index if x.device.type == "cuda" else None

    def contiguous(self, x):
        return x.contiguous()

    def empty(self, shape, dtype, like):
        return self.t.empty(shape, dtype=getattr(self.t, dtype), device=like.device)

    def capsule(self, x):
        return self.t.utils.dlpack.to_dlpack(x)

    def stream(self, x):
        return self.t.cuda.current_stream(x.device).cuda_stream

    def guard(self, x):
        return self.t.cuda.device(x.device)


class _Cupy:
    name = "cupy"

    def __init__(self):
        import cupy
        self.cp = cupy

    def dtype(self, x):
        return x.dtype.name

    def device(self, x):
        return x.device.id

    def contiguous(self, x):
        return self.cp.ascontiguousarray(x)

    def empty(self, shape, dtype, like):
        with self.cp.cuda.Device(like.device.id):
            return self.cp.empty(shape, dtype=dtype)

    def capsule(self, x):
        # legacy export: no stream synchronisation (work is ordered on the current stream)
        if hasattr(x, "toDlpack"):
            return x.toDlpack()
        return x.__dlpack__(stream=-1)

    def stream(self, x):
        return self.cp.cuda.get_current_stream().ptr

    def guard(self, x):
        return self.cp.cuda.Device(x.device.id)


_KINDS: dict = {}


def _kind(x, name):
    mod = type(x).__module__.split(".")[0]
    if mod not in ("torch", "cupy"):
        raise TypeError(f"argument '{name}': expected a torch tensor or CuPy array on a CUDA device, "
                        f"got {type(x).__name__}")
    if mod not in _KINDS:
        _KINDS[mod] = _Torch() if mod == "torch" else _Cupy()
    return _KINDS[mod]


def _check_array(x, name, kind, ndim=None, dtype=None, device=None, floats=_FLOATS):
    """Kind, device, rank, sizes and dtype of one array; returns it contiguous."""
    if x is None:
        raise TypeError(f"argument '{name}': expected an array, got None")
    k = _kind(x, name)
    if k is not kind:
        raise TypeError(f"argument '{name}': expected a {kind.name} array like the others, got {k.name}")
    dev = kind.device(x)
    if dev is None:
        raise ValueError(f"argument '{name}': expected an array on a CUDA device, got one on {x.device}")
    if device is not None and dev != device:
        raise ValueError(f"argument '{name}': expected an array on CUDA device {device}, got device {dev}")
    if ndim is not None and x.ndim != ndim:
        raise ValueError(f"argument '{name}': expected {ndim} dimensions, got {x.ndim} (shape {tuple(x.shape)})")
    for i, s in enumerate(x.shape):
        if s == 0:
            raise ValueError(f"argument '{name}': expected every size >= 1, got shape {tuple(x.shape)} (axis {i} is 0)")
    dt = kind.dtype(x)
    if dtype is not None and dt != dtype:
        raise TypeError(f"argument '{name}': expected dtype {dtype} (the dtype of the first array), got {dt}")
    if dtype is None and dt not in floats:
        raise TypeError(f"argument '{name}': expected one of {', '.join(floats)}, got {dt}")
    return kind.contiguous(x)


def _shape(x, name, expected):
    if tuple(x.shape) != tuple(expected):
        raise ValueError(f"argument '{name}': expected shape {tuple(expected)}, got {tuple(x.shape)}")


def _cap(kind, x):
    return None if x is None else kind.capsule(x)


class _LRU(OrderedDict):
    def get_or(self, key, make):
        if key in self:
            self.move_to_end(key)
            return self[key]
        v = make()
        self[key] = v
        while len(self) > _PLAN_CACHE_SIZE:
            self.popitem(last=False)
        return v


_fftconv_plans = _LRU()

#: fftconv algorithm for new plans: 0 = the fused single-kernel path where it applies (float32,
#: float16, bfloat16; causal with L + min(Lk, L) - 1 <= 32768; circular with L a power of two in
#: [1024, 32768]), else cuFFT; 1 = always the cuFFT path. Part of the plan cache key.
fftconv_algo = 0


def _fftconv_plan(dev, B, H, L, Lk, mode, dtype, backward):
    """A backward-capable plan serves forward calls too; asking for one drops the forward-only one."""
    key = (dev, B, H, L, Lk, mode, dtype, fftconv_algo)
    if (key, True) in _fftconv_plans:
        return _fftconv_plans.get_or((key, True), None)
    if not backward and (key, False) in _fftconv_plans:
        return _fftconv_plans.get_or((key, False), None)
    _fftconv_plans.pop((key, False), None)
    return _fftconv_plans.get_or((key, backward),
                                 lambda: _ext.cuda.FFTConvPlan(B, H, L, Lk, mode, dtype, backward, fftconv_algo))


def _fftconv_args(u, k, mode, pregate, postgate, skip):
    kind = _kind(u, "u")
    u = _check_array(u, "u", kind, ndim=3)
    dev, dt = kind.device(u), kind.dtype(u)
    B, H, L = (int(s) for s in u.shape)
    k = _check_array(k, "k", kind, ndim=2, dtype=dt, device=dev)
    if int(k.shape[0]) != H:
        raise ValueError(f"argument 'k': expected shape ({H}, Lk) (H = u.shape[1]), got {tuple(k.shape)}")
    Lk = int(k.shape[1])
    if mode not in ("causal", "circular"):
        raise ValueError(f"argument 'mode': expected one of 'causal', 'circular', got {mode!r}")
    if mode == "circular" and Lk > L:
        raise ValueError(f"argument 'k': circular mode needs Lk <= L, got Lk = {Lk} and L = {L}")
    gates = []
    for name, g in (("pregate", pregate), ("postgate", postgate)):
        if g is not None:
            g = _check_array(g, name, kind, ndim=3, dtype=dt, device=dev)
            _shape(g, name, (B, H, L))
        gates.append(g)
    if skip is not None:
        skip = _check_array(skip, "skip", kind, ndim=1, dtype=dt, device=dev)
        _shape(skip, "skip", (H,))
    return kind, u, k, gates[0], gates[1], skip, (dev, B, H, L, Lk, dt)


def fftconv(u, k, mode: str = "causal", pregate=None, postgate=None, skip=None):
    """y = postgate ⊙ (k * v + skip ⊙ v), v = u ⊙ pregate, on the GPU (DESIGN.md fftconv).

    u (B, H, L), k (H, Lk), pregate/postgate (B, H, L), skip (H,): one dtype among float16,
    bfloat16, float32 (computed in float32) and float64; torch tensors or CuPy arrays on one
    CUDA device. Returns y (B, H, L) of u's kind, dtype and device. The filter spectrum is
    recomputed on every call (use FFTConvCUDA to keep it).
    """
    kind, u, k, pre, post, skip, (dev, B, H, L, Lk, dt) = _fftconv_args(u, k, mode, pregate, postgate, skip)
    with kind.guard(u):
        plan = _fftconv_plan(dev, B, H, L, Lk, mode, dt, False)
        s = kind.stream(u)
        y = kind.empty((B, H, L), dt, u)
        plan.set_filter(_cap(kind, k), s)
        plan.forward(_cap(kind, u), _cap(kind, pre), _cap(kind, post), _cap(kind, skip), _cap(kind, y), s)
    return y


def fftconv_vjp(dy, u, k, mode: str = "causal", pregate=None, postgate=None, skip=None):
    """Vector-Jacobian product of fftconv at (u, k, pregate, postgate, skip) for cotangent dy.

    Argument order: dy (B, H, L), then fftconv's arguments. Returns the tuple
    (du, dk, dpregate, dpostgate, dskip), each shaped like its input, with None for the
    inputs that were not given.
    """
    kind, u, k, pre, post, skip, (dev, B, H, L, Lk, dt) = _fftconv_args(u, k, mode, pregate, postgate, skip)
    dy = _check_array(dy, "dy", kind, ndim=3, dtype=dt, device=dev)
    _shape(dy, "dy", (B, H, L))
    with kind.guard(u):
        plan = _fftconv_plan(dev, B, H, L, Lk, mode, dt, True)
        s = kind.stream(u)
        du = kind.empty((B, H, L), dt, u)
        dk = kind.empty((H, Lk), dt, u)
        dpre = kind.empty((B, H, L), dt, u) if pre is not None else None
        dpost = kind.empty((B, H, L), dt, u) if post is not None else None
        dskip = kind.empty((H,), dt, u) if skip is not None else None
        plan.set_filter(_cap(kind, k), s)
        plan.backward(_cap(kind, dy), _cap(kind, u), _cap(kind, pre), _cap(kind, post), _cap(kind, skip),
                      _cap(kind, du), _cap(kind, dk), _cap(kind, dpre), _cap(kind, dpost), _cap(kind, dskip), s)
    return du, dk, dpre, dpost, dskip


class FFTConvCUDA:
    """fftconv with a fixed filter: the filter spectrum is computed once, here.

    FFTConvCUDA(k, B, L, mode) then conv(u, pregate=None, postgate=None, skip=None) for u
    of shape (B, H, L) with H = k.shape[0]. Call set_filter(k) when k changes.
    """

    def __init__(self, k, B: int, L: int, mode: str = "causal"):
        self._kind = _kind(k, "k")
        k = _check_array(k, "k", self._kind, ndim=2)
        self.H, self.Lk = (int(s) for s in k.shape)
        self.B, self.L, self.mode = int(B), int(L), mode
        self.dtype, self.device = self._kind.dtype(k), self._kind.device(k)
        if mode not in ("causal", "circular"):
            raise ValueError(f"argument 'mode': expected one of 'causal', 'circular', got {mode!r}")
        with self._kind.guard(k):
            self._plan = _ext.cuda.FFTConvPlan(self.B, self.H, self.L, self.Lk, mode, self.dtype, False,
                                               fftconv_algo)
        self.set_filter(k)

    def describe(self) -> str:
        """What the plan chose, in words."""
        p = self._plan
        return (f"fftconv (B={self.B}, H={self.H}, L={self.L}, Lk={self.Lk}) {self.mode} {self.dtype}: "
                + ("the fused single-kernel path" if p.fused else f"cuFFT, nfft {p.nfft}"))

    def set_filter(self, k):
        k = _check_array(k, "k", self._kind, ndim=2, dtype=self.dtype, device=self.device)
        _shape(k, "k", (self.H, self.Lk))
        with self._kind.guard(k):
            self._plan.set_filter(_cap(self._kind, k), self._kind.stream(k))

    def __call__(self, u, pregate=None, postgate=None, skip=None):
        kind = self._kind
        u = _check_array(u, "u", kind, ndim=3, dtype=self.dtype, device=self.device)
        _shape(u, "u", (self.B, self.H, self.L))
        args = []
        for name, g in (("pregate", pregate), ("postgate", postgate)):
            if g is not None:
                g = _check_array(g, name, kind, ndim=3, dtype=self.dtype, device=self.device)
                _shape(g, name, (self.B, self.H, self.L))
            args.append(g)
        if skip is not None:
            skip = _check_array(skip, "skip", kind, ndim=1, dtype=self.dtype, device=self.device)
            _shape(skip, "skip", (self.H,))
        with kind.guard(u):
            y = kind.empty((self.B, self.H, self.L), self.dtype, u)
            self._plan.forward(_cap(kind, u), _cap(kind, args[0]), _cap(kind, args[1]), _cap(kind, skip),
                               _cap(kind, y), kind.stream(u))
        return y


# ---- block Toeplitz -----------------------------------------------------------------------------

_LAYOUTS = ("time-major", "space-major")
_COMPLEX = {"float32": "complex64", "float64": "complex128"}


def good_fft_size(n: int) -> int:
    """Smallest m >= n whose prime factors are 2, 3, 5, 7 (as the native good_fft_size)."""
    m = max(int(n), 1)
    while True:
        r = m
        for p in (2, 3, 5, 7):
            while r % p == 0:
                r //= p
        if r == 1:
            return m
        m += 1


def toeplitz_nfft(Nt: int) -> int:
    """FFT length of the block Toeplitz spectrum: good_fft_size(2·Nt - 1), at least 2."""
    return max(2, good_fft_size(2 * int(Nt) - 1))


class BlockToeplitzCUDA:
    """Block lower-triangular Toeplitz operator on the GPU (DESIGN.md toeplitz).

    BlockToeplitzCUDA(blocks, layout="time-major"): blocks (Nt, Nd, Nm) float32 or float64, a
    torch tensor or CuPy array on a CUDA device. F̂ = rfft of the padded blocks along time,
    (nfreq, Nd, Nm) complex64/complex128, is built on the GPU and kept (attribute `fhat`);
    matvec and rmatvec both read it (rmatvec without a conjugate-transposed copy).
    Vectors: time-major m (Nt, Nm) → d (Nt, Nd); space-major m (Nm, Nt) → d (Nd, Nt); a
    trailing axis R gives several right-hand sides. `algo`: -1 = automatic (default: the plan
    picks per direction by shape and R, see toeplitz_auto_algo); 0 = cuBLAS gemv for one right-hand side, gemm
    for several; 1 = cuBLAS gemm always; 2 = strux's own kernels, which stream F̂ once per 16
    right-hand sides (8 for float64); 3 = matvec with several right-hand sides as one real gemm per
    frequency (F̂ read as a real Nd × 2Nm matrix; 0 elsewhere; the float32 default for R > 1 with
    fft 2). 0 and 1 stay for comparison. `fft`: the transform layout,
    -1 = automatic (toeplitz_auto_fft); 0 = strided R2C/C2R; 1 = two real columns per complex
    column through one strided C2C; 2 = contiguous R2C/C2R with tiled transposes (for benchmarks).
    None is -1. What a plan chose: ``describe(R)``.
    """

    def __init__(self, blocks, layout: str = "time-major", algo: int = -1, fft: int | None = None):
        kind = _kind(blocks, "blocks")
        blocks = _check_array(blocks, "blocks", kind, ndim=3, floats=("float32", "float64"))
        Nt, Nd, Nm = (int(s) for s in blocks.shape)
        dt = kind.dtype(blocks)
        with kind.guard(blocks):
            fhat = kind.empty((toeplitz_nfft(Nt) // 2 + 1, Nd, Nm), _COMPLEX[dt], blocks)
            _ext.cuda.build_toeplitz_fhat(_cap(kind, blocks), _cap(kind, fhat), dt, kind.stream(blocks))
        self._init(kind, fhat, Nt, Nd, Nm, dt, kind.device(blocks), layout, algo, fft)

    def _init(self, kind, fhat, Nt, Nd, Nm, dt, dev, layout, algo, fft=None):
        if layout not in _LAYOUTS:
            raise ValueError(f"argument 'layout': expected one of 'time-major', 'space-major', got {layout!r}")
        if algo not in (-1, 0, 1, 2, 3):
            raise ValueError(f"argument 'algo': expected -1 (automatic), 0, 1, 2 or 3, got {algo!r}")
        if fft is None:
            fft = -1
        if fft not in (-1, 0, 1, 2):
            raise ValueError(f"argument 'fft': expected -1 (automatic), 0, 1 or 2, got {fft!r}")
        self._kind, self.fhat = kind, fhat
        self.Nt, self.Nd, self.Nm, self.dtype, self.device = Nt, Nd, Nm, dt, dev
        self.layout, self.algo, self.fft = layout, algo, fft
        self.shape = (Nt * Nd, Nt * Nm)
        self._plans = {}

    @classmethod
    def from_fhat(cls, fhat, Nt: int, layout: str = "time-major", algo: int = -1, fft: int | None = None):
        """From a spectrum (nfreq, Nd, Nm) made by this class (nfreq = toeplitz_nfft(Nt)//2+1)."""
        kind = _kind(fhat, "fhat")
        fhat = _check_array(fhat, "fhat", kind, ndim=3, floats=("complex64", "complex128"))
        dt = {"complex64": "float32", "complex128": "float64"}[kind.dtype(fhat)]
        _shape(fhat, "fhat", (toeplitz_nfft(Nt) // 2 + 1,) + tuple(int(s) for s in fhat.shape[1:]))
        self = cls.__new__(cls)
        self._init(kind, fhat, int(Nt), int(fhat.shape[1]), int(fhat.shape[2]), dt, kind.device(fhat), layout, algo,
                   fft)
        return self

    @classmethod
    def from_lti(cls, A, B, C, D=None, Nt: int = 1, layout: str = "time-major", algo: int = -1,
                 fft: int | None = None):
        """blocks[t] = C Aᵗ B (+ D at t = 0), computed on the GPU, then as BlockToeplitzCUDA(blocks)."""
        kind = _kind(A, "A")
        A = _check_array(A, "A", kind, ndim=2, floats=("float32", "float64"))
        dt, dev = kind.dtype(A), kind.device(A)
        ns = int(A.shape[0])
        _shape(A, "A", (ns, ns))
        B = _check_array(B, "B", kind, ndim=2, dtype=dt, device=dev)
        C = _check_array(C, "C", kind, ndim=2, dtype=dt, device=dev)
        if int(B.shape[0]) != ns:
            raise ValueError(f"argument 'B': expected shape ({ns}, Nm), got {tuple(B.shape)}")
        if int(C.shape[1]) != ns:
            raise ValueError(f"argument 'C': expected shape (Nd, {ns}), got {tuple(C.shape)}")
        Nd, Nm = int(C.shape[0]), int(B.shape[1])
        if D is not None:
            D = _check_array(D, "D", kind, ndim=2, dtype=dt, device=dev)
            _shape(D, "D", (Nd, Nm))
        if int(Nt) < 1:
            raise ValueError(f"argument 'Nt': expected a size >= 1, got {Nt}")
        with kind.guard(A):
            blocks = kind.empty((int(Nt), Nd, Nm), dt, A)
            X = B
            for t in range(int(Nt)):
                blocks[t] = C @ X
                X = A @ X
            if D is not None:
                blocks[0] += D
        return cls(blocks, layout=layout, algo=algo, fft=fft)

    def _plan(self, R):
        key = R
        if key not in self._plans:
            with self._kind.guard(self.fhat):
                self._plans[key] = _ext.cuda.ToeplitzPlan(self.Nt, self.Nd, self.Nm, R, self.layout, self.dtype,
                                                          self.algo, self.fft)
        return self._plans[key]

    def describe(self, R: int = 1) -> str:
        """What the plan for R right-hand sides chose, in words (algo and fft codes as in the
        class docstring)."""
        p = self._plan(int(R))
        return (f"toeplitz (Nt={self.Nt}, Nd={self.Nd}, Nm={self.Nm}, R={int(R)}) {self.layout} {self.dtype}: "
                f"matvec algo {p.algo}, rmatvec algo {p.rmatvec_algo}, fft {p.fft}, nfft {p.nfft}")

    def _vec(self, x, name, n):
        x = _check_array(x, name, self._kind, dtype=self.dtype, device=self.device)
        if x.ndim not in (2, 3):
            raise ValueError(f"argument '{name}': expected 2 or 3 dimensions, got {x.ndim} (shape {tuple(x.shape)})")
        want = (self.Nt, n) if self.layout == "time-major" else (n, self.Nt)
        if tuple(int(s) for s in x.shape[:2]) != want:
            raise ValueError(f"argument '{name}': expected shape {want} or {want + ('R',)} ({self.layout}), "
                             f"got {tuple(x.shape)}")
        return x

    def _apply(self, x, name, nin, nout, adjoint):
        kind = self._kind
        x = self._vec(x, name, nin)
        R = int(x.shape[2]) if x.ndim == 3 else 1
        shape = ((self.Nt, nout) if self.layout == "time-major" else (nout, self.Nt)) + tuple(x.shape[2:])
        with kind.guard(x):
            plan = self._plan(R)
            y = kind.empty(shape, self.dtype, x)
            f = plan.rmatvec if adjoint else plan.matvec
            f(_cap(kind, self.fhat), _cap(kind, x), _cap(kind, y), kind.stream(x))
        return y

    def matvec(self, m):
        """d = F m."""
        return self._apply(m, "m", self.Nm, self.Nd, False)

    def rmatvec(self, d):
        """m = Fᵀ d (the adjoint)."""
        return self._apply(d, "d", self.Nd, self.Nm, True)

    def __matmul__(self, m):
        return self.matvec(m)
