"""The block Toeplitz operator on the GPU, for torch tensors and CuPy arrays (strux.toeplitz and
strux.torch call here).

Arrays are checked once (through the array adapter strux._cuda), outputs allocated of the
input's kind and device, and raw device pointers passed to cached ToeplitzPlans (the C++ plan
cache, keyed by shapes, R, layout, dtype, algo, fft and device) on the caller's current stream.
"""
from __future__ import annotations

from . import _cuda as _a
from . import _ext
from ._cuda import available  # noqa: F401  (the GPU modules answer available() alike)

_LAYOUTS = ("time-major", "space-major")
_COMPLEX = {"float32": "complex64", "float64": "complex128"}
_REAL = ("float32", "float64")
_PHASE_DTYPE = {"single": "float32", "double": "float64"}


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

    `precision`: {phase: "single"/"double", "fhat": "auto"/"bfloat16"/"float16"} as in
    strux.toeplitz (missing phases follow the dtype). `dtype` is the product's precision; vectors
    are cast to the fft's precision and the result back from the ifft's (broadcast / reduce
    "single" round a float64 input / output through float32). Phases in different precisions run
    one plan per precision (fft 2, algo 2) staged by toeplitz_mixed_apply, with the spectra
    converted in between (two extra passes over them). A 16-bit F̂
    (float32 compute) is `fhat` as (nfreq, Nd, Nm, 2) int16 pairs divided by `fhat_scale`; its
    products run the one-right-hand-side kernels reading 4 bytes per entry (R > 1: once per
    right-hand side).
    """

    def __init__(self, blocks, layout: str = "time-major", algo: int = -1, fft: int | None = None, precision=None):
        _a.array(blocks, "blocks", 3, _REAL)
        blocks = _a.contig(blocks)
        Nt, Nd, Nm = (int(s) for s in blocks.shape)
        dt, dev = _a.dtname(blocks), _a.device_id(blocks)
        prec = _ext.toeplitz_resolve_precision(dict(precision or {}), dt == "float64")
        cdt = "float64" if prec["product"] == "double" else "float32"
        # Phases in different precisions: one plan per precision, staged (toeplitz_mixed_apply).
        self.mixed = not prec["fft"] == prec["product"] == prec["ifft"]
        if self.mixed and (algo not in (-1, 2) or fft not in (None, -1, 2)):
            raise ValueError(f"argument 'precision': phases in different precisions need algo 2 and fft 2, "
                             f"got algo {algo}, fft {fft}")
        storage = {"auto": 0, "bfloat16": 1, "float16": 2}[prec["fhat"]]
        nfreq = toeplitz_nfft(Nt) // 2 + 1
        with _a.device_guard(blocks):
            if storage:
                b32 = _a.contig(_a.cast(blocks, "float32"))
                fhat = _a.empty(blocks, (nfreq, Nd, Nm, 2), "int16")
                scale = _ext.cuda.build_toeplitz_fhat_half(_a.ptr(b32), _a.ptr(fhat), Nt, Nd, Nm, storage == 1, dev,
                                                           _a.stream(blocks))
            else:
                # F̂ in the higher of the blocks' and the product's precision, then rounded to the
                # product's complex dtype.
                bdt = "float64" if "float64" in (dt, cdt) else "float32"
                bb = _a.contig(_a.cast(blocks, bdt))
                fhat = _a.empty(blocks, (nfreq, Nd, Nm), _COMPLEX[bdt])
                _ext.cuda.build_toeplitz_fhat(_a.ptr(bb), _a.ptr(fhat), Nt, Nd, Nm, bdt, dev, _a.stream(blocks))
                fhat, scale = _a.contig(_a.cast(fhat, _COMPLEX[cdt])), 1.0
        self._init(fhat, Nt, Nd, Nm, cdt, dev, layout, 2 if self.mixed else algo, 2 if self.mixed else fft, storage,
                   scale)
        self.vector_dtype, self.precision = dt, prec
        self.mixed = not prec["fft"] == prec["product"] == prec["ifft"]

    def _init(self, fhat, Nt, Nd, Nm, dt, dev, layout, algo, fft=None, storage=0, scale=1.0):
        if layout not in _LAYOUTS:
            raise ValueError(f"argument 'layout': expected one of 'time-major', 'space-major', got {layout!r}")
        if algo not in (-1, 0, 1, 2, 3):
            raise ValueError(f"argument 'algo': expected -1 (automatic), 0, 1, 2 or 3, got {algo!r}")
        if fft is None:
            fft = -1
        if fft not in (-1, 0, 1, 2):
            raise ValueError(f"argument 'fft': expected -1 (automatic), 0, 1 or 2, got {fft!r}")
        self.fhat, self.storage, self.fhat_scale = fhat, storage, float(scale)
        # dtype: the compute dtype of the plans; vector_dtype: that of the arrays taken and returned.
        self.Nt, self.Nd, self.Nm, self.dtype, self.device = Nt, Nd, Nm, dt, dev
        self.vector_dtype = dt
        self.precision = _ext.toeplitz_resolve_precision({}, dt == "float64")
        self.mixed = False
        self.layout, self.algo, self.fft = layout, algo, fft
        self.shape = (Nt * Nd, Nt * Nm)

    @classmethod
    def from_fhat(cls, fhat, Nt: int, layout: str = "time-major", algo: int = -1, fft: int | None = None):
        """From a spectrum (nfreq, Nd, Nm) made by this class (nfreq = toeplitz_nfft(Nt)//2+1)."""
        _a.array(fhat, "fhat", 3, ("complex64", "complex128"))
        fhat = _a.contig(fhat)
        dt = {"complex64": "float32", "complex128": "float64"}[_a.dtname(fhat)]
        _a.shape(fhat, "fhat", (toeplitz_nfft(Nt) // 2 + 1,) + tuple(int(s) for s in fhat.shape[1:]))
        self = cls.__new__(cls)
        self._init(fhat, int(Nt), int(fhat.shape[1]), int(fhat.shape[2]), dt, _a.device_id(fhat), layout, algo, fft)
        return self

    @classmethod
    def from_lti(cls, A, B, C, D=None, Nt: int = 1, layout: str = "time-major", algo: int = -1,
                 fft: int | None = None, precision=None):
        """blocks[t] = C Aᵗ B (+ D at t = 0), computed on the GPU (lti_blocks), then as BlockToeplitzCUDA(blocks)."""
        return cls(lti_blocks(A, B, C, D, Nt), layout=layout, algo=algo, fft=fft, precision=precision)

    def _plan(self, R):
        """The cached plan for R right-hand sides."""
        return _ext.cuda.toeplitz_plan(self.device, self.Nt, self.Nd, self.Nm, int(R), self.layout, self.dtype,
                                       self.algo, self.fft, self.storage)

    def describe(self, R: int = 1) -> str:
        """What the plan for R right-hand sides chose, in words (algo and fft codes as in the
        class docstring)."""
        p = self._plan(int(R))
        return (f"toeplitz (Nt={self.Nt}, Nd={self.Nd}, Nm={self.Nm}, R={int(R)}) {self.layout} {self.dtype}: "
                f"matvec algo {p.algo}, rmatvec algo {p.rmatvec_algo}, fft {p.fft}, nfft {p.nfft}")

    def _vec(self, x, name, n):
        _a.array(x, name, None)
        if _a.is_torch(x) != _a.is_torch(self.fhat):
            raise TypeError(f"argument '{name}': expected the array kind of the operator "
                            f"({type(self.fhat).__name__}), got {type(x).__name__}")
        if _a.dtname(x) != self.vector_dtype:
            raise TypeError(f"argument '{name}': expected dtype {self.vector_dtype} (the operator's), "
                            f"got {_a.dtname(x)}")
        if _a.device_id(x) != self.device:
            raise ValueError(f"argument '{name}': expected an array on CUDA device {self.device}, "
                             f"got device {_a.device_id(x)}")
        if x.ndim not in (2, 3):
            raise ValueError(f"argument '{name}': expected 2 or 3 dimensions, got {x.ndim} (shape {tuple(x.shape)})")
        want = (self.Nt, n) if self.layout == "time-major" else (n, self.Nt)
        if tuple(int(s) for s in x.shape[:2]) != want:
            raise ValueError(f"argument '{name}': expected shape {want} or {want + ('R',)} ({self.layout}), "
                             f"got {tuple(x.shape)}")
        return _a.contig(x)

    def _apply(self, x, name, nin, nout, adjoint):
        x = self._vec(x, name, nin)
        R = int(x.shape[2]) if x.ndim == 3 else 1
        shape = ((self.Nt, nout) if self.layout == "time-major" else (nout, self.Nt)) + tuple(x.shape[2:])
        vdt = self.vector_dtype
        if vdt == "float64" and self.precision["broadcast"] == "single":
            x = _a.cast(_a.cast(x, "float32"), vdt)
        if self.mixed:
            tf, ti = (_PHASE_DTYPE[self.precision[k]] for k in ("fft", "ifft"))
            xc = _a.contig(_a.cast(x, tf))
            y = _a.empty(xc, shape, ti)
            pl = {d: _ext.cuda.toeplitz_plan(self.device, self.Nt, self.Nd, self.Nm, R, self.layout, d, 2, 2,
                                             self.storage if d == self.dtype else 0) for d in {tf, ti}}
            pp = self._plan(R)
            _ext.cuda.toeplitz_mixed_apply(pl[tf] if tf != self.dtype else pp, pp, pl[ti] if ti != self.dtype else pp,
                                           _a.ptr(self.fhat), _a.ptr(xc), _a.ptr(y), adjoint, _a.stream(xc),
                                           self.fhat_scale)
        else:
            plan = self._plan(R)
            xc = _a.contig(_a.cast(x, self.dtype))
            y = _a.empty(xc, shape)
            f = plan.rmatvec if adjoint else plan.matvec
            f(_a.ptr(self.fhat), _a.ptr(xc), _a.ptr(y), _a.stream(xc), self.fhat_scale)
        if vdt == "float64" and self.precision["reduce"] == "single":
            y = _a.cast(y, "float32")
        return _a.cast(y, vdt)

    def matvec(self, m):
        """d = F m."""
        return self._apply(m, "m", self.Nm, self.Nd, False)

    def rmatvec(self, d):
        """m = Fᵀ d (the adjoint)."""
        return self._apply(d, "d", self.Nd, self.Nm, True)

    def __matmul__(self, m):
        return self.matvec(m)

    def grad_blocks(self, m, dd):
        """The gradient for the blocks of d = F m given the cotangent dd (shaped like d, same R):
        dblocks[t] = Σ_r Σ_{i >= t} dd[i, :, r] m[i - t, :, r]ᵀ, shape (Nt, Nd, Nm), in the
        operator's dtype. A direct kernel (bind_cuda_f64.cpp, one thread per block entry,
        O(Nt² Nd Nm R) work), on m's stream."""
        x = self._vec(m, "m", self.Nm)
        g = self._vec(dd, "dd", self.Nd)
        if g.ndim != x.ndim or (x.ndim == 3 and g.shape[2] != x.shape[2]):
            raise ValueError(f"argument 'dd': expected the right-hand sides of 'm' (shape {tuple(x.shape)}), "
                             f"got shape {tuple(g.shape)}")
        R = int(x.shape[2]) if x.ndim == 3 else 1
        db = _a.empty(x, (self.Nt, self.Nd, self.Nm))
        _ext.cuda_toeplitz_grad_blocks(_a.ptr(x), _a.ptr(g), _a.ptr(db), self.Nt, self.Nd, self.Nm, R,
                                       self.layout == "space-major", self.vector_dtype, self.device, _a.stream(x))
        return db

    def vjp(self, m, dd):
        """(dm, dblocks) of d = F m: dm = Fᵀ dd (shaped like m) and grad_blocks(m, dd)."""
        db = self.grad_blocks(m, dd)
        return self.rmatvec(dd), db


def dtype_of(x) -> str:
    """The dtype name of a CUDA array (torch or CuPy)."""
    return _a.dtname(x)


def _sparse(x) -> bool:
    """torch sparse (COO/CSR) or cupyx.scipy.sparse."""
    if _a.is_torch(x):
        return str(x.layout) != "torch.strided"
    return type(x).__module__.startswith("cupyx.scipy.sparse")


def _transposed(x):
    """xᵀ as a matrix the @ operator multiplies with dense arrays of the same kind (sparse stays sparse;
    any other operator with .T and @, e.g. several time steps, as it is)."""
    if not hasattr(x, "__dlpack__") and not _sparse(x):
        return x.T
    if _a.is_torch(x) and _sparse(x):
        return x.t().to_sparse_csr()
    if _sparse(x):
        return x.T.tocsr()
    return x.T


def _dense(x):
    if _a.is_torch(x):
        return x.to_dense() if _sparse(x) else x
    return x.toarray() if _sparse(x) else x


def lti_blocks(A, B, C, D, Nt: int):
    """blocks[t] = C Aᵗ B (+ D at t = 0) on the GPU for dense or sparse (torch sparse CSR/COO,
    cupyx.scipy.sparse) A, B, C of one kind on one device, swept on the cheaper side: Nd adjoint
    sweeps Z_t = (Aᵀ)ᵗ Cᵀ, blocks[t] = (Bᵀ Z_t)ᵀ when Nd <= Nm, else X_t = Aᵗ B, blocks[t] = C X_t."""
    for name, x in (("A", A), ("B", B), ("C", C)):
        if len(x.shape) != 2:
            raise ValueError(f"argument '{name}': expected a matrix, got shape {tuple(x.shape)}")
    ns = int(A.shape[0])
    if tuple(int(v) for v in A.shape) != (ns, ns):
        raise ValueError(f"argument 'A': expected a square matrix (ns, ns), got shape {tuple(A.shape)}")
    if int(B.shape[0]) != ns:
        raise ValueError(f"argument 'B': expected shape ({ns}, Nm), got {tuple(B.shape)}")
    if int(C.shape[1]) != ns:
        raise ValueError(f"argument 'C': expected shape (Nd, {ns}), got {tuple(C.shape)}")
    Nd, Nm = int(C.shape[0]), int(B.shape[1])
    if D is not None and tuple(int(v) for v in D.shape) != (Nd, Nm):
        raise ValueError(f"argument 'D': expected shape {(Nd, Nm)} (Nd, Nm), got {tuple(D.shape)}")
    if int(Nt) < 1:
        raise ValueError(f"argument 'Nt': expected a size >= 1, got {Nt}")
    if not any(_sparse(x) for x in (A, B, C)) and hasattr(A, "__dlpack__"):
        _a.array(A, "A", 2, _REAL)
        _a.same(A, "A", B=B, C=C)
    dt = _a.dtname(C)
    if dt not in _REAL:
        raise TypeError(f"argument 'C': expected float32 or float64, got {dt}")
    if Nd <= Nm:
        # Nd adjoint sweeps: Z_t = (Aᵀ)ᵗ Cᵀ (ns, Nd); blocks[t]ᵀ = Bᵀ Z_t.
        At, Bt = _transposed(A), _transposed(B)
        Z = _a.contig(_dense(_transposed(C)))
        with _a.device_guard(Z):
            blocks = _a.empty(Z, (int(Nt), Nd, Nm), dt)
            for t in range(int(Nt)):
                if t:
                    Z = _dense(At @ Z)
                blocks[t] = _dense(Bt @ Z).T
    else:
        X = _a.contig(_dense(B))
        with _a.device_guard(X):
            blocks = _a.empty(X, (int(Nt), Nd, Nm), dt)
            for t in range(int(Nt)):
                if t:
                    X = _dense(A @ X)
                blocks[t] = _dense(C @ X)
    if D is not None:
        blocks[0] += _dense(D)
    return blocks
