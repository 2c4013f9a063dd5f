"""Block lower-triangular Toeplitz operators (FFT matvec and adjoint), and FFTMatvec files.

``BlockToeplitz(blocks)`` with ``blocks`` of shape (Nt, Nd, Nm) is the (Nt*Nd, Nt*Nm) matrix F
whose block (i, j) is ``blocks[i - j]`` for i >= j and 0 above the diagonal:

    matvec   d[i] = sum_{j <= i} blocks[i - j] @ m[j]
    rmatvec  m[j] = sum_{i >= j} blocks[i - j].T @ d[i]

Vectors come in one of two layouts (blocks are always (Nt, Nd, Nm)):

    "time-major"  (default)  m (Nt, Nm) -> d (Nt, Nd)    flat index  t*N + s
    "space-major"            m (Nm, Nt) -> d (Nd, Nt)    flat index  s*Nt + t   (FFTMatvec's SOTI)

A trailing axis R applies F to R right-hand sides at once: (Nt, Nm, R) or (Nm, Nt, R).
The plan computes F-hat = rfft(blocks, 2Nt-1 rounded up to a fast size) once; each product is
one batched FFT, one complex GEMV (GEMM for R > 1) per frequency, and one inverse FFT.

float32 and float64 are computed natively; float16/bfloat16 blocks compute in float32 and
results come back in the blocks' dtype. Inputs must have the operator's dtype. Strided
(non-contiguous) inputs are copied to C order first.
NaN or inf anywhere in an input series spreads to every output time step through the FFT
(a loop would leave the earlier steps finite).

Mixed precision (``precision=`` or ``tol=``): each phase of a product (``broadcast``: the input
as the distributed operator sends it, ``fft``, ``product``, ``ifft``, ``reduce``: the output as it
is summed across ranks) runs in "single" or "double", and F-hat is stored as complex in the
product's precision or as ``fhat="bfloat16"`` / ``"float16"`` pairs (half the bytes of complex64,
float32 accumulation). Vectors keep the operator's dtype. The relative error of a product is
predicted by an error model (``error_estimate``; bench/NOTES-toeplitz-precision.md):

    rms = sqrt( (0.6 u_b)^2 + (0.5 u_r)^2 + (0.65 u_f)^2 (1 + log2 nfft) + (0.45 u_F)^2
                + (0.65 u_h)^2 (1 + log2 nfft) + (u_p (0.6 + 0.12 sqrt(n_in)))^2
                + (0.65 u_i)^2 (1 + log2 nfft) ),     bound = 4 rms

with nfft ~ 2 Nt the FFT length, n_in = Nm (matvec) or Nd (rmatvec), u_b, u_f, u_p, u_i, u_r
the unit roundoffs of the phases (2^-24 single, 2^-53 double; u_b = 0 unless a float64 input is
rounded to single; u_r at least that of the vectors' dtype), u_F that of F-hat's storage (u_p
for complex, 2^-8 bfloat16, 2^-11 float16) and u_h that of F-hat's computation (single only
from float32 blocks with a single product). It holds for inputs without heavy cancellation
(||F x|| not far below ||F|| ||x||). ``tol=`` picks the configuration that moves the fewest
bytes per product (``product_bytes``) among those whose bound is <= tol in both directions.
"""
from __future__ import annotations

import numbers
import os

import numpy as np
from scipy.sparse.linalg import LinearOperator

from . import _ext
from ._runtime import planning
from ._arrays import (choice, compute_dtype, cuda_backend, integer, is_half, on_gpu, native, native_dtype, real_array,
                      result, same_dtype)

__all__ = ["BlockToeplitz", "read_vector", "write_vector", "error_estimate", "product_bytes", "choose_precision",
           "precision_candidates"]

_LAYOUTS = ("time-major", "space-major")
_SPACES = ("param", "obs")


def _plan_class(dt: np.dtype):
    return _ext.ToeplitzPlanF32 if dt == np.float32 else _ext.ToeplitzPlanF64


def _positive_int(value, name: str) -> int:
    return integer(value, name, 1, 2**62)


_PHASES = ("broadcast", "fft", "product", "ifft", "reduce")
_KINDS = ("auto", "single", "double")
_STORAGE = ("auto", "bfloat16", "float16")


def _precision(precision) -> dict:
    """{phase: kind, "fhat": storage} from None, "single"/"double" (every phase) or a dict/Precision-like
    mapping with some of the keys broadcast, fft, product, ifft, reduce, fhat."""
    if precision is None:
        return {}
    if isinstance(precision, str):
        choice(precision, "precision", _KINDS)
        return {k: precision for k in _PHASES}
    if not hasattr(precision, "items"):
        raise TypeError(f"argument 'precision': expected None, 'single', 'double' or a dict of phases, "
                        f"got {type(precision).__name__}")
    out = {}
    for k, v in precision.items():
        if k == "fhat":
            out[k] = choice(v, "precision.fhat", _STORAGE)
        elif k in _PHASES:
            out[k] = choice(v, f"precision.{k}", _KINDS)
        else:
            raise ValueError(f"argument 'precision': expected keys {_PHASES + ('fhat',)}, got {k!r}")
    return out


def _is_double(dtype) -> bool:
    return compute_dtype(np.dtype(dtype)) == np.float64


def error_estimate(precision, dtype, Nt: int, Nd: int, Nm: int, *, rms: bool = False) -> float:
    """The model's bound (rms=True: its root-mean-square estimate) on the relative error of a
    product with this precision, vectors of `dtype` and the shape (Nt, Nd, Nm), the larger of
    matvec and rmatvec (module docstring)."""
    p = _precision(precision)
    dbl = _is_double(dtype)
    nt = _positive_int(Nt, "Nt")
    f = _ext.toeplitz_error_rms if rms else _ext.toeplitz_error_estimate
    return max(f(p, dbl, nt, _positive_int(Nm, "Nm")), f(p, dbl, nt, _positive_int(Nd, "Nd")))


def product_bytes(precision, dtype, Nt: int, Nd: int, Nm: int, R: int = 1) -> float:
    """Bytes one product moves through memory under the cost model (vectors, spectra, F-hat)."""
    return _ext.toeplitz_product_bytes(_precision(precision), _is_double(dtype), _positive_int(Nt, "Nt"),
                                       _positive_int(Nd, "Nd"), _positive_int(Nm, "Nm"), _positive_int(R, "R"))


def precision_candidates(*, cuda: bool = False) -> list:
    """The configurations the automatic choice considers (cuda=True: those the GPU operator runs)."""
    return _ext.toeplitz_precision_candidates(bool(cuda))


def choose_precision(tol, dtype, Nt: int, Nd: int, Nm: int, R: int = 1, *, cuda: bool = False) -> dict:
    """The configuration of fewest bytes per product whose error bound is <= tol (ValueError
    naming 'tol' when none is)."""
    if not isinstance(tol, numbers.Real) or isinstance(tol, bool):
        raise TypeError(f"argument 'tol': expected a real number, got {type(tol).__name__}")
    return _ext.toeplitz_choose_precision(float(tol), _is_double(dtype), _positive_int(Nt, "Nt"),
                                          _positive_int(Nd, "Nd"), _positive_int(Nm, "Nm"), _positive_int(R, "R"),
                                          bool(cuda))


class _names_file_errors:
    """Errors about a file below a path argument name that argument (the file is in the message)."""

    def __init__(self, name: str):
        self.name = name

    def __enter__(self):
        return self

    def __exit__(self, typ, e, tb):
        if isinstance(e, ValueError) and not str(e).startswith("argument '"):
            raise ValueError(f"argument '{self.name}': {e}") from None
        return False


def _path(value, name: str) -> str:
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"argument '{name}': expected a path (str or os.PathLike), got {type(value).__name__}")
    return os.fspath(value)


def _check_lti_shapes(sa, sb, sc, sd) -> None:
    ns = sa[0]
    if tuple(sa) != (ns, ns):
        raise ValueError(f"argument 'A': expected a square matrix (ns, ns), got shape {tuple(sa)}")
    if sb[0] != ns:
        raise ValueError(f"argument 'B': expected shape ({ns}, Nm) to match A {tuple(sa)}, got {tuple(sb)}")
    if sc[1] != ns:
        raise ValueError(f"argument 'C': expected shape (Nd, {ns}) to match A {tuple(sa)}, got {tuple(sc)}")
    if sd is not None and tuple(sd) != (sc[0], sb[1]):
        raise ValueError(f"argument 'D': expected shape {(sc[0], sb[1])} (Nd, Nm), got {tuple(sd)}")


def _torch_sparse(x) -> bool:
    return type(x).__module__.startswith("torch") and getattr(x, "layout", None) is not None and \
        str(x.layout) != "torch.strided"


def _on_cuda(x) -> bool:
    """A CUDA array or sparse matrix (torch, CuPy, cupyx.scipy.sparse), or an operator saying
    it lives on CUDA (attribute device of type cuda)."""
    mod = type(x).__module__
    if mod.startswith("torch"):
        return x.device.type == "cuda"
    if mod.startswith(("cupy", "cupyx")):
        return True
    if hasattr(x, "__dlpack__") or hasattr(x, "__cuda_array_interface__"):
        return on_gpu(x)
    return str(getattr(x, "device", "")).startswith("cuda")


def _is_sparse_or_op(x) -> bool:
    import scipy.sparse as sp
    return sp.issparse(x) or isinstance(x, LinearOperator) or _torch_sparse(x)


def _as_scipy(x, name: str):
    """scipy sparse / LinearOperator as they are; torch CPU sparse as scipy CSR; dense as numpy."""
    import scipy.sparse as sp
    if sp.issparse(x) or isinstance(x, LinearOperator):
        if len(x.shape) != 2:
            raise ValueError(f"argument '{name}': expected a matrix, got shape {x.shape}")
        dt = np.dtype(x.dtype)
        if dt.kind != "f" or dt.itemsize > 8:  # float128 too: the sweeps run in float64 at most
            raise TypeError(f"argument '{name}': expected a real floating dtype (float16, float32 or float64), "
                            f"got {x.dtype}")
        return x
    if _torch_sparse(x):
        c = x.to_sparse_csr()
        return sp.csr_matrix((c.values().numpy(), c.col_indices().numpy(), c.crow_indices().numpy()),
                             shape=tuple(c.shape))
    return real_array(x, name, ndim=2)


def _lti_blocks_sparse(A, B, C, D, nt: int) -> np.ndarray:
    """blocks[t] = C A^t B (+ D) with sparse matrices or operators, swept on the cheaper side."""
    A, B, C = _as_scipy(A, "A"), _as_scipy(B, "B"), _as_scipy(C, "C")
    D = None if D is None else _as_scipy(D, "D")
    _check_lti_shapes(A.shape, B.shape, C.shape, None if D is None else D.shape)
    single = all(np.dtype(x.dtype) == np.float32 for x in (A, B, C) + ((D,) if D is not None else ()))
    dt = np.float32 if single else np.float64
    nd, nm = C.shape[0], B.shape[1]
    blocks = np.empty((nt, nd, nm), dtype=dt)
    dense = lambda y: np.asarray(y.toarray() if hasattr(y, "toarray") else y, dtype=dt)  # noqa: E731
    if nd <= nm:
        # Nd adjoint sweeps: Z_t = (A^T)^t C^T (ns, Nd); blocks[t]^T = B^T Z_t.
        At, Bt = A.T, B.T
        Z = dense(C.T)
        for t in range(nt):
            if t:
                Z = dense(At @ Z)
            blocks[t] = dense(Bt @ Z).T
    else:
        X = dense(B)
        for t in range(nt):
            if t:
                X = dense(A @ X)
            blocks[t] = dense(C @ X)
    if D is not None:
        blocks[0] += dense(D)
    return blocks


class BlockToeplitz(LinearOperator):
    """Block lower-triangular Toeplitz operator F from its Nt distinct blocks.

    A ``scipy.sparse.linalg.LinearOperator`` of shape (Nt*Nd, Nt*Nm): scipy's solvers
    (``cg(F, d)`` for square F, ``lsqr``, ``gmres``...) take it as it is, on flattened vectors
    in the operator's layout (time-major t*N + s, space-major s*Nt + t). ``matvec`` and
    ``rmatvec`` take both those flat vectors (N,) / (N, 1) and the shaped arrays below.
    Pickling keeps the blocks and layout and rebuilds the plan on load.

    Parameters
    ----------
    blocks : array (Nt, Nd, Nm), real (float16, bfloat16, float32, float64)
        ``blocks[k]`` is the block on the k-th block sub-diagonal.
    layout : "time-major" (default) or "space-major"
        Shape convention of the vectors passed to matvec/rmatvec/vjp and of the flattened
        vectors of ``as_linear_operator`` (see the module docstring).
    planner : None, "estimate", "measure" or "patient"
        FFTW effort for a new FFT size (None: the process-wide ``strux.set_planning``).
    precision : None, "single", "double" or dict
        Precision per phase and F-hat's storage (module docstring), e.g.
        ``{"fft": "single", "product": "single", "fhat": "bfloat16", "ifft": "double"}``;
        missing phases follow the dtype. None: every phase in the dtype's precision.
    tol : None or float
        A relative error tolerance instead of ``precision``: the cheapest configuration whose
        error bound (``error_estimate``) is <= tol. The chosen one is ``.precision``.
    """

    def __init__(self, blocks, *, layout: str = "time-major", planner=None, precision=None, tol=None):
        self._gpu = None
        if tol is not None and precision is not None:
            raise ValueError("argument 'tol': expected either tol or precision, got both")
        if on_gpu(blocks):
            # CUDA blocks: the operator lives on their device; matvec/rmatvec take and return
            # arrays of the same kind there (torch or CuPy) on the current stream.
            cuda_backend()  # raises when this build or machine has no CUDA
            from . import _cuda_toeplitz
            prec = _precision(precision)
            if tol is not None:
                if len(blocks.shape) != 3:
                    raise ValueError(f"argument 'blocks': expected 3 dimensions (Nt, Nd, Nm), got shape "
                                     f"{tuple(blocks.shape)}")
                prec = choose_precision(tol, _cuda_toeplitz.dtype_of(blocks), *(int(v) for v in blocks.shape),
                                        cuda=True)
            self._gpu = _cuda_toeplitz.BlockToeplitzCUDA(blocks, choice(layout, "layout", _LAYOUTS), precision=prec)
            self._nt, self._nd, self._nm = self._gpu.Nt, self._gpu.Nd, self._gpu.Nm
            self._layout, self._dtype = layout, None
            self._precision = self._gpu.precision
            LinearOperator.__init__(self, None, (self._nt * self._nd, self._nt * self._nm))
            self._blocks = blocks  # .blocks of a CUDA operator: the blocks it was built from
            return
        b = real_array(blocks, "blocks", ndim=3)
        self._layout = choice(layout, "layout", _LAYOUTS)
        self._dtype = b.dtype
        self._cdt = compute_dtype(b.dtype)
        # Our own read-only copy (C-contiguous, compute dtype) for to_dense / save_fftmatvec /
        # .blocks, so later writes to the caller's array cannot make them disagree with the plan.
        self._blocks = np.array(b, dtype=self._cdt, order="C", copy=True)
        self._blocks.flags.writeable = False
        self._planner = planner
        self._nt, self._nd, self._nm = self._blocks.shape
        prec = _precision(precision)
        if tol is not None:
            prec = choose_precision(tol, self._cdt, self._nt, self._nd, self._nm)
        with planning(planner):
            self._plan = _plan_class(self._cdt)(self._blocks, prec) if prec else _plan_class(self._cdt)(self._blocks)
        self._precision = dict(self._plan.precision)
        LinearOperator.__init__(self, self._dtype, (self._nt * self._nd, self._nt * self._nm))

    # ---- pickling: the blocks and layout; the plan (F-hat, FFTW plans) is rebuilt on load ----
    def __getstate__(self):
        if self._gpu is not None:
            raise TypeError("BlockToeplitz: an operator built from CUDA blocks cannot be pickled; "
                            "pickle BlockToeplitz(blocks.cpu().numpy()) and move it after loading")
        return {"blocks": self._blocks, "layout": self._layout, "dtype": self._dtype, "planner": self._planner,
                "precision": self._precision}

    def __setstate__(self, state):
        self.__init__(result(state["blocks"], state["dtype"]), layout=state["layout"], planner=state.get("planner"),
                      precision=state.get("precision"))
    def _require_cpu(self, what: str) -> None:
        if self._gpu is not None:
            raise ValueError(f"BlockToeplitz.{what}: not available for an operator built from CUDA blocks "
                             "(build it from numpy blocks, e.g. blocks.cpu().numpy())")

    # ---- constructors ------------------------------------------------------------------------
    @classmethod
    def from_lti(cls, A, B, C, nt, *, D=None, layout: str = "time-major", **kw) -> "BlockToeplitz":
        """Parameter-to-observable map of x_t = A x_{t-1} + B u_t, y_t = C x_t (+ D u_t), x_{-1} = 0.

        blocks[t] = C A^t B (+ D at t = 0). A (ns, ns), B (ns, Nm), C (Nd, ns), D (Nd, Nm) or None;
        nt >= 1. Dense numpy matrices (one real dtype) are computed natively with BLAS. Sparse
        ones (scipy.sparse, torch sparse on the CPU) and operators (scipy LinearOperator, e.g.
        several explicit or implicit time steps: anything with .shape, .dtype, .T and @) are swept on
        the cheaper side: Nd adjoint sweeps
        Z_t = (A^T)^t C^T, blocks[t] = (B^T Z_t)^T, when Nd <= Nm, else Nm forward sweeps
        X_t = A^t B, blocks[t] = C X_t -- nt products with a block of Nd (Nm) vectors each. The
        blocks of a sparse system are float64 unless every matrix is float32. CUDA arrays (torch
        dense or sparse CSR, CuPy / cupyx.scipy.sparse) build the GPU operator. Further keywords
        (precision, tol, planner) go to the constructor.
        """
        if any(_on_cuda(x) for x in (A, B, C)):
            cuda_backend()
            from . import _cuda_toeplitz
            blocks = _cuda_toeplitz.lti_blocks(A, B, C, D, _positive_int(nt, "nt"))
            return cls(blocks, layout=layout, **kw)
        if any(_is_sparse_or_op(x) for x in (A, B, C, D) if x is not None):
            return cls(_lti_blocks_sparse(A, B, C, D, _positive_int(nt, "nt")), layout=layout, **kw)
        A = real_array(A, "A", ndim=2)
        B = real_array(B, "B", ndim=2)
        C = real_array(C, "C", ndim=2)
        D = None if D is None else real_array(D, "D", ndim=2)
        nt = _positive_int(nt, "nt")
        choice(layout, "layout", _LAYOUTS)
        _check_lti_shapes(A.shape, B.shape, C.shape, None if D is None else D.shape)
        dt = same_dtype(A=A, B=B, C=C, D=D)
        cdt = compute_dtype(dt)
        blocks = _ext.toeplitz_lti_blocks(native(A, cdt), native(B, cdt), native(C, cdt),
                                          native(D, cdt), nt)
        return cls(result(blocks, dt), layout=layout, **kw)

    @classmethod
    def from_fftmatvec(cls, directory, *, layout: str = "space-major", dtype=np.float64) -> "BlockToeplitz":
        """Reads a matrix written in the FFTMatvec format.

        ``directory`` holds ``meta_adj`` (or is a matrix root holding ``binary/meta_adj``);
        block rows are ``<prefix><row:06d>.h5`` beside it (the prefix may name a folder, as in
        FFTMatvec's ``adj/vec_``) or in ``adj/``. Values are float64 on disk; ``dtype`` picks
        the operator's dtype. The default layout is FFTMatvec's space-major order.
        """
        directory = _path(directory, "directory")
        choice(layout, "layout", _LAYOUTS)
        if not os.path.exists(directory):
            raise FileNotFoundError(f"argument 'directory': '{directory}' does not exist")
        try:
            dt = np.dtype(dtype)
        except TypeError:
            raise TypeError(f"argument 'dtype': expected a real floating dtype (float16, bfloat16, float32 or "
                            f"float64), got {dtype!r}") from None
        if not ((dt.kind == "f" and dt.itemsize <= 8) or dt.name == "bfloat16"):
            raise TypeError(f"argument 'dtype': expected a real floating dtype (float16, bfloat16, float32 or "
                            f"float64), got {dt}")
        with _names_file_errors("directory"):
            blocks, _meta = _ext.toeplitz_read_fftmatvec(directory)
        return cls(blocks.astype(dt, copy=False), layout=layout)

    def save_fftmatvec(self, directory, *, prefix: str = "adj/vec_", is_p2q: int = 0, checksum: int = 0) -> None:
        """Writes this matrix in the FFTMatvec format (float64): ``directory/meta_adj`` and one
        file ``directory/<prefix><row:06d>.h5`` per block row (folders are created). The default
        prefix puts the rows in ``adj/`` as FFTMatvec's own data does."""
        self._require_cpu("save_fftmatvec")
        directory = _path(directory, "directory")
        if not isinstance(prefix, str) or not prefix or "\n" in prefix:
            raise ValueError(f"argument 'prefix': expected a non-empty one-line string, got {prefix!r}")
        is_p2q = integer(is_p2q, "is_p2q", -2**31, 2**31 - 1)
        checksum = integer(checksum, "checksum", -2**31, 2**31 - 1)
        with _names_file_errors("directory"):
            _ext.toeplitz_write_fftmatvec(directory, np.ascontiguousarray(self._blocks, dtype=np.float64),
                                          prefix, is_p2q, checksum)

    # ---- properties --------------------------------------------------------------------------
    # `shape` (Nt*Nd, Nt*Nm) and `dtype` (the blocks' dtype) are LinearOperator attributes.

    @property
    def layout(self) -> str:
        return self._layout

    @property
    def precision(self) -> dict:
        """The precision per phase in use ({phase: "single"/"double", "fhat": storage}), resolved."""
        return dict(self._precision)

    @property
    def error_bound(self) -> float:
        """The error model's bound on a product's relative error with this precision."""
        dt = self._cdt if self._gpu is None else self._gpu.vector_dtype
        return error_estimate(self._precision, dt, self._nt, self._nd, self._nm)

    @property
    def blocks(self) -> np.ndarray:
        """The (Nt, Nd, Nm) blocks (read-only, in the compute dtype; for an operator built from
        CUDA blocks, those blocks on their device)."""
        return self._blocks

    @property
    def nt(self) -> int:
        return self._nt

    @property
    def nd(self) -> int:
        return self._nd

    @property
    def nm(self) -> int:
        return self._nm

    def __repr__(self) -> str:
        return (f"BlockToeplitz(Nt={self._nt}, Nd={self._nd}, Nm={self._nm}, dtype={self._dtype}, "
                f"layout={self._layout!r}, precision={_ext.toeplitz_describe_precision(self._precision, True)!r})")

    # ---- products ----------------------------------------------------------------------------
    def _vec(self, x, name: str, n: int, n_label: str) -> np.ndarray:
        a = real_array(x, name)
        if a.ndim not in (2, 3):
            raise ValueError(f"argument '{name}': expected 2 or 3 dimensions, got {a.ndim} (shape {a.shape})")
        want = (self._nt, n) if self._layout == "time-major" else (n, self._nt)
        if a.shape[:2] != want:
            lbl = f"(Nt, {n_label}[, R])" if self._layout == "time-major" else f"({n_label}, Nt[, R])"
            raise ValueError(f"argument '{name}': expected shape {want} or {want + ('R',)} {lbl} in "
                             f"{self._layout} layout, got {a.shape}")
        if a.dtype != self._dtype:
            raise TypeError(f"argument '{name}': expected dtype {self._dtype} (the dtype of the blocks), got {a.dtype}")
        return native(a, self._cdt)

    def _flat_vector(self, x, n: int) -> bool:
        """Whether x is scipy's flat form (Nt*n,) or (Nt*n, 1) rather than this layout's shape
        (the shaped form wins where both read the same, e.g. Nm = 1)."""
        try:
            s = tuple(np.shape(x)) if isinstance(x, (list, tuple)) else tuple(getattr(x, "shape", ()))
        except ValueError:  # a ragged nested list: the shaped path's check names the argument
            return False
        shaped = len(s) in (2, 3) and s[:2] == ((self._nt, n) if self._layout == "time-major" else (n, self._nt))
        return not shaped and s in ((self._nt * n,), (self._nt * n, 1))

    def matvec(self, m) -> np.ndarray:
        """d = F m: (Nt, Nm[, R]) -> (Nt, Nd[, R]) time-major, (Nm, Nt[, R]) -> (Nd, Nt[, R]) space-major.
        A flat vector (Nt*Nm,) or (Nt*Nm, 1) in the layout's order gives a flat d (scipy's form)."""
        if self._gpu is not None:
            return self._gpu.matvec(m)
        if self._flat_vector(m, self._nm):
            return LinearOperator.matvec(self, m)
        x = self._vec(m, "m", self._nm, "Nm")
        return result(self._plan.matvec(x, self._layout), self._dtype)

    def rmatvec(self, d) -> np.ndarray:
        """m = F^T d (the adjoint): (Nt, Nd[, R]) -> (Nt, Nm[, R]), or space-major likewise.
        A flat vector (Nt*Nd,) or (Nt*Nd, 1) gives a flat m."""
        if self._gpu is not None:
            return self._gpu.rmatvec(d)
        if self._flat_vector(d, self._nd):
            return LinearOperator.rmatvec(self, d)
        x = self._vec(d, "d", self._nd, "Nd")
        return result(self._plan.rmatvec(x, self._layout), self._dtype)

    def __matmul__(self, m):
        s = tuple(getattr(m, "shape", ()))
        if self._gpu is None and (self._flat_vector(m, self._nm) or (len(s) == 2 and s[0] == self.shape[1])):
            return LinearOperator.__matmul__(self, m)  # flat vectors and (N, k) columns
        return self.matvec(m)

    # scipy's side: flat vectors / columns in the layout's order. Other real dtypes (scipy's
    # float64 work vectors) are computed in the compute dtype; complex ones apply to both parts.
    # The result keeps the vectors' real floating dtype (DESIGN.md: "the result dtype stays the
    # dtype of the vectors"), as the shaped form does; other inputs (integers) give the compute dtype.
    # float128 / complex256 / object vectors are a TypeError naming the vector (never a silent cast).
    def _flat(self, fn, x, shp_in, n_out, name):
        x = np.asarray(x)
        kind, size = x.dtype.kind, x.dtype.itemsize
        if not (kind in "iub" or (kind == "f" and size <= 8) or (kind == "c" and size <= 16) or is_half(x.dtype)):
            raise TypeError(f"argument '{name}': expected a real floating (float16, bfloat16, float32, float64), "
                            f"complex64/complex128 or integer vector, got {x.dtype}")
        if np.iscomplexobj(x):
            return self._flat(fn, x.real, shp_in, n_out, name) + 1j * self._flat(fn, x.imag, shp_in, n_out, name)
        out = native_dtype(x.dtype) if (x.dtype.kind == "f" and x.dtype.itemsize <= 8) or is_half(x.dtype) \
            else self._cdt
        k = x.shape[1] if x.ndim == 2 else None
        a = np.ascontiguousarray(x.reshape(shp_in + ((k,) if k is not None else ())), dtype=self._cdt)
        y = result(fn(a, self._layout), out)
        return y.reshape((n_out, k) if k is not None else (n_out,))

    def _shape_of(self, n):
        return (self._nt, n) if self._layout == "time-major" else (n, self._nt)

    def _matvec(self, x):
        self._require_cpu("matvec of a flat vector")
        return self._flat(self._plan.matvec, x, self._shape_of(self._nm), self._nt * self._nd, "m")

    def _rmatvec(self, x):
        self._require_cpu("rmatvec of a flat vector")
        return self._flat(self._plan.rmatvec, x, self._shape_of(self._nd), self._nt * self._nm, "d")

    _matmat = _matvec
    _rmatmat = _rmatvec

    def vjp(self, m, dd):
        """Vector-Jacobian product of d = F m (= self.matvec(m)).

        Arguments, in order: ``m`` the input of the forward product and ``dd`` the cotangent
        of its output d (shaped like d, same layout and R). Returns the tuple ``(dm, dblocks)``:
        ``dm = F^T dd`` (shaped like m) and ``dblocks[k] = sum_i dd[i] m[i-k]^T`` (summed over
        the R right-hand sides), shape (Nt, Nd, Nm). Both computed natively with FFTs (CUDA
        blocks: m and dd on their device, dm by the GPU operator, dblocks by a direct kernel).
        """
        if self._gpu is not None:
            return self._gpu.vjp(m, dd)
        x = self._vec(m, "m", self._nm, "Nm")
        g = self._vec(dd, "dd", self._nd, "Nd")
        if g.ndim != x.ndim or (x.ndim == 3 and g.shape[2] != x.shape[2]):
            raise ValueError(f"argument 'dd': expected the right-hand sides of 'm' (shape {x.shape}), got shape {g.shape}")
        dm = self._plan.rmatvec(g, self._layout)
        dblocks = self._plan.grad_blocks(x, g, self._layout)
        return result(dm, self._dtype), result(dblocks, self._dtype)

    # ---- dense and scipy views ---------------------------------------------------------------
    def to_dense(self, layout=None) -> np.ndarray:
        """The full (Nt*Nd, Nt*Nm) matrix (use only for small sizes), in the operator's own
        layout unless `layout` says otherwise, so ``to_dense() @ x == matvec(x)`` on flat vectors.

        layout="time-major": entry [i*Nd + a, j*Nm + b] = blocks[i-j, a, b] (i >= j),
        so ``to_dense() @ m.reshape(-1) == matvec(m).reshape(-1)`` for time-major m (Nt, Nm).
        layout="space-major": entry [a*Nt + i, b*Nt + j] = blocks[i-j, a, b], matching
        flattened space-major vectors (Nm, Nt) -> (Nd, Nt).
        """
        self._require_cpu("to_dense")
        layout = self._layout if layout is None else choice(layout, "layout", _LAYOUTS)
        nt, nd, nm = self._blocks.shape
        lag = np.subtract.outer(np.arange(nt), np.arange(nt))  # i - j
        full = self._blocks[np.clip(lag, 0, None)] * (lag >= 0)[:, :, None, None]  # (i, j, a, b)
        if layout == "time-major":
            dense = full.transpose(0, 2, 1, 3).reshape(nt * nd, nt * nm)
        else:
            dense = full.transpose(2, 0, 3, 1).reshape(nd * nt, nm * nt)
        return result(np.ascontiguousarray(dense), self._dtype)

    def as_linear_operator(self):
        """A plain scipy.sparse.linalg.LinearOperator of shape (Nt*Nd, Nt*Nm) (the operator is a
        LinearOperator itself; this view only differs in its dtype, the compute dtype) on flattened
        vectors in this object's layout (time-major: t*N + s; space-major: s*Nt + t), with matvec,
        rmatvec and matmat; inputs of another real dtype (scipy's float64
        work vectors) are cast to it, complex inputs are applied to real and imaginary parts."""
        self._require_cpu("as_linear_operator")
        mv, rmv = self._matvec, self._rmatvec
        return LinearOperator(self.shape, matvec=mv, rmatvec=rmv, matmat=mv, rmatmat=rmv, dtype=self._cdt)


def read_vector(path):
    """Reads an FFTMatvec vector file.

    Returns ``(x, space)``: x float64 of shape (n, Nt) in space-major order (as stored), and
    space = "param" (attributes n_param, param_steps) or "obs" (n_obs, obs_steps).
    For a time-major vector use ``x.T``.
    """
    path = _path(path, "path")
    if not os.path.exists(path):
        raise FileNotFoundError(f"argument 'path': '{path}' does not exist")
    with _names_file_errors("path"):
        x, space = _ext.toeplitz_read_vector(path)
    return x, space


def write_vector(path, x, *, space: str = "param") -> None:
    """Writes x of shape (n, Nt), space-major, as an FFTMatvec vector file (float64 dataset
    "vec" with n_param/param_steps for space="param", n_obs/obs_steps for space="obs", and
    reindex = 1). Folders are created."""
    path = _path(path, "path")
    choice(space, "space", _SPACES)
    a = real_array(x, "x", ndim=2)
    with _names_file_errors("path"):
        _ext.toeplitz_write_vector(path, np.ascontiguousarray(a, dtype=np.float64), space)
