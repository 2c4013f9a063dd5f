"""The block Toeplitz operator on a grid of MPI ranks (DESIGN.md "toeplitz, distributed").

A communicator of P = r·c ranks (an ``mpi4py`` communicator) forms an r × c grid; rank p sits
at (i, j) = (p // c, p % c). The Nd observation rows split into r contiguous blocks and the Nm
parameter columns into c; rank (i, j) holds F̂ of rows block i and columns block j only::

    from mpi4py import MPI
    import strux.dist
    F = strux.dist.BlockToeplitz(blocks, comm=MPI.COMM_WORLD)       # blocks (Nt, Nd, Nm) everywhere
    d_i = F.matvec(m[:, F.cols])       # every rank of grid column j passes m[:, cols_j] ...
    # ... and every rank of grid row i receives d[:, rows_i]
    m_j = F.rmatvec(d[:, F.rows])

``vectors="replicated"`` (default, the contract above) or ``"distributed"`` (FFTMatvec's: the
part m_j lives on rank (0, j) only and d_i on rank (i, 0) only; other ranks pass None and get
None back). Layouts and trailing right-hand sides as in ``strux.toeplitz.BlockToeplitz``
(space-major: ``m[F.cols]``, ``d[F.rows]``); ``F.part_m(m)`` / ``F.part_d(d)`` cut a rank's part
out of a whole vector in either layout, ``F.gather_m`` / ``F.gather_d`` put the whole vector
together on every rank, and ``F.dot_m`` / ``F.dot_d`` are the inner products of whole vectors
given by parts (for CG and other iterative solvers).

Arrays: numpy on the CPU (communication through MPI), or torch / CuPy arrays on each rank's CUDA
device (communication through NCCL, on the current stream). ``grid=None`` chooses (r, c) by a
cost model of computation and communication (bench/NOTES-dist.md); ``options`` passes
``{"solver": ...}`` to every rank's local operator and ``{"chunks": k}`` splits the local rows
into k pieces whose communication overlaps the next piece's computation (CUDA).

Every constructor and call is collective: all ranks call it, with the same shapes. A bad
argument on any rank raises the same error on every rank (nothing waits forever).

Any grid with r·c = P works, also r > Nd or c > Nm: then some ranks have an empty block of rows
or columns (``F.rows`` or ``F.cols`` an empty slice). They hold no F̂, still take part in every
call, and pass and receive parts with no entries (e.g. ``d[:, F.rows]`` of shape (Nt, 0)).
``grid=None`` picks such a grid only where no grid gives every rank a row and a column.
"""
from __future__ import annotations

import os

import numpy as np

from ._arrays import choice, integer, on_gpu

__all__ = ["BlockToeplitz", "BlockToeplitzGroup", "available", "choose_grid", "block_range"]

_LAYOUTS = ("time-major", "space-major")
_VECTORS = ("replicated", "distributed")
_OPTIONS = {"solver": str, "chunks": int, "comm": str, "check_ranks": bool, "timing": bool, "device": str,
            "broadcast_dtype": str, "reduce_dtype": str}


def _single(o: dict) -> int:
    """The binding's code of the communication precision: bit 0 broadcasts, bit 1 sums in float32."""
    code = 0
    for bit, key in enumerate(("broadcast_dtype", "reduce_dtype")):
        v = o.get(key)
        if v not in (None, "float32", "float64"):
            raise ValueError(f"argument 'options[{key!r}]': expected 'float32' or 'float64', got {v!r}")
        code |= (v == "float32") << bit
    return code


def _module():
    try:
        from . import _dist
    except ImportError as e:
        raise RuntimeError("strux was built without its distributed operators (no MPI found at build time: "
                           f"CMake STRUX_MPI); {e}") from None
    return _dist


def available() -> bool:
    """True when strux was built with MPI and mpi4py is installed (found, not imported: importing
    mpi4py.MPI initializes MPI)."""
    import importlib.util
    try:
        _module()
    except RuntimeError:
        return False
    return importlib.util.find_spec("mpi4py") is not None


def block_range(n: int, parts: int, q: int) -> slice:
    """Block q of n items over `parts` parts: slice(q·n // parts, (q+1)·n // parts)."""
    return slice(*_module().block_range(int(n), int(parts), int(q)))


def _comm_handle(comm) -> int:
    if comm is None or not hasattr(comm, "py2f") or not hasattr(comm, "Get_size"):
        raise TypeError(f"argument 'comm': expected an mpi4py communicator (e.g. MPI.COMM_WORLD), "
                        f"got {type(comm).__name__}")
    return int(comm.py2f())


def _agree(comm, fn):
    """Runs fn on every rank; when it raised anywhere, raises the lowest failing rank's error on
    every rank (before any rank starts a collective call that the failing one would never join)."""
    try:
        value, err = fn(), None
    except (ValueError, TypeError, MemoryError, RuntimeError, OSError) as e:
        value, err = None, e
    errs = comm.allgather(None if err is None else (type(err).__name__, str(err)))
    for rank, e in enumerate(errs):
        if e is not None:
            if err is not None and rank == comm.Get_rank():
                raise err
            kind = {"ValueError": ValueError, "TypeError": TypeError, "MemoryError": MemoryError,
                    "FileNotFoundError": FileNotFoundError}.get(e[0], RuntimeError)
            raise kind(f"rank {rank} of {len(errs)}: {e[1]}")
    return value


def _options(options) -> dict:
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise TypeError(f"argument 'options': expected a dict, got {type(options).__name__}")
    for k, v in options.items():
        if k not in _OPTIONS:
            raise ValueError(f"argument 'options': unknown key {k!r} (expected {', '.join(_OPTIONS)})")
        if not isinstance(v, _OPTIONS[k]):
            raise TypeError(f"argument 'options[{k!r}]': expected {_OPTIONS[k].__name__}, got {type(v).__name__}")
    return dict(options)


def _grid(grid):
    if grid is None:
        return (0, 0)
    if not isinstance(grid, (tuple, list)) or len(grid) != 2:
        raise ValueError(f"argument 'grid': expected None or (r, c), got {grid!r}")
    return (integer(grid[0], "grid[0]", 1, 2**31 - 1), integer(grid[1], "grid[1]", 1, 2**31 - 1))


def choose_grid(P: int, Nt: int, Nd: int, Nm: int, *, R: int = 1, dtype="float64", device: str = "cpu",
                vectors: str = "replicated") -> tuple:
    """The (r, c) of P ranks that the cost model of ``grid=None`` picks (bench/NOTES-dist.md)."""
    dt = np.dtype(dtype).name
    return tuple(_module().choose_grid(int(P), int(Nt), int(Nd), int(Nm), int(R), dt,
                                       0 if device == "cuda" else -1, choice(vectors, "vectors", _VECTORS), "auto"))


class _Arrays:
    """One rank's arrays: numpy on the CPU, or torch / CuPy on CUDA device `_device`; checks and
    allocations of its vectors (attributes _gpu, _device, _dtype, _ref, _layout, _vectors, shape3)."""

    def _local_array(self, b, name):
        """b as the operator's array: C-contiguous float32/float64 numpy, or a CUDA array."""
        if on_gpu(b):
            from . import _cuda as _a
            _a.array(b, name, 3, ("float32", "float64"), allow_empty=True)  # (an empty block: r > Nd, c > Nm)
            self._gpu = True
            self._device = _a.device_id(b)
            self._dtype = _a.dtname(b)
            self._ref = _a.empty(b, (1,))  # kind, device and stream of the outputs
            return _a.contig(b)
        a = np.asarray(b)
        if a.dtype not in (np.float32, np.float64):
            raise TypeError(f"argument '{name}': expected float32 or float64, got {a.dtype}")
        self._gpu, self._device, self._dtype, self._ref = False, -1, a.dtype.name, None
        return np.ascontiguousarray(a)

    def part_m(self, m):
        """This rank's part of a whole parameter vector m: m[:, cols] (time-major) or m[cols]."""
        return m[:, self.cols] if self._layout == "time-major" else m[self.cols]

    def part_d(self, d):
        """This rank's part of a whole observation vector d: d[:, rows] (time-major) or d[rows]."""
        return d[:, self.rows] if self._layout == "time-major" else d[self.rows]

    def _ptr(self, x):
        if x is None:
            return 0
        if self._gpu:
            from . import _cuda as _a
            return _a.ptr(x)
        return x.__array_interface__["data"][0]

    def _stream(self, x):
        if not self._gpu or x is None:
            return 0
        from . import _cuda as _a
        return _a.stream(x)

    def _vector(self, x, name, n, required):
        """x checked (kind, dtype, device, shape) and C-contiguous; R from its shape."""
        if x is None:
            if required:
                raise ValueError(f"argument '{name}': this rank holds a part of it ({self._vectors} vectors), "
                                 "got None")
            return None, None
        Nt = self.shape3[0]
        if self._gpu:
            from . import _cuda as _a
            _a.array(x, name, None, (self._dtype,), allow_empty=True)
            if _a.device_id(x) != self._device:
                raise ValueError(f"argument '{name}': expected an array on CUDA device {self._device}"
                                 f"{self._device_hint()}, got device {_a.device_id(x)}")
            x = _a.contig(x)
        else:
            if on_gpu(x):
                raise TypeError(f"argument '{name}': the operator is on the CPU (numpy), got a CUDA array")
            x = np.asarray(x)
            if x.dtype != self._dtype:
                raise TypeError(f"argument '{name}': expected dtype {self._dtype} (the operator's), got {x.dtype}")
            x = np.ascontiguousarray(x)
        want = (Nt, n) if self._layout == "time-major" else (n, Nt)
        if x.ndim not in (2, 3) or tuple(int(s) for s in x.shape[:2]) != want:
            raise ValueError(f"argument '{name}': expected this rank's part of shape {want} or {want + ('R',)} "
                             f"({self._layout}), got {tuple(x.shape)}")
        return x, (int(x.shape[2]) if x.ndim == 3 else None)

    def _device_hint(self):
        return ""

    def _empty(self, like, n, R):
        Nt = self.shape3[0]
        shape = ((Nt, n) if self._layout == "time-major" else (n, Nt)) + (() if R is None else (R,))
        if self._gpu:
            from . import _cuda as _a
            return _a.empty(like, shape)
        return np.empty(shape, dtype=self._dtype)


class BlockToeplitz(_Arrays):
    """Block lower-triangular Toeplitz operator F of shape (Nt·Nd, Nt·Nm) on a grid of ranks.

    Parameters
    ----------
    blocks : array (Nt, Nd, Nm), float32 or float64, the same on every rank (numpy, or a CUDA
        torch tensor / CuPy array on this rank's device). Each rank keeps its part only.
    comm : mpi4py communicator of the grid's ranks.
    grid : None (cost model) or (r, c) with r·c = comm.size.
    layout, vectors : see the module docstring.
    rhs : None (default) builds an operator for each number R of right-hand sides seen (each
        holds its own F̂, and this rank's part of the blocks is kept to build them); an int builds
        the one for R = rhs now and keeps nothing else (then other R are a ValueError).
    options : {"solver": local solver name, "chunks": row pieces for overlap, "comm": "auto" |
        "mpi" | "nccl", "check_ranks": agree on valid arguments before each call (default True),
        "timing": record phase times (see timings()), "device": "cpu" | "cuda", the device the cost
        model assumes for grid=None (the constructor takes it from blocks; from_parts: "cpu"),
        "broadcast_dtype" / "reduce_dtype": "float32" sends a float64 operator's broadcasts / sums
        as float32 (half the bytes, float32 sums; ignored for float32)}.
    """

    def __init__(self, blocks, *, comm, grid=None, layout: str = "time-major", vectors: str = "replicated",
                 rhs=None, options=None):
        shape = getattr(blocks, "shape", None)
        if shape is None or len(shape) != 3:
            raise ValueError(f"argument 'blocks': expected an array (Nt, Nd, Nm), got "
                             f"{type(blocks).__name__} of shape {shape}")
        options = _options(options)
        options.setdefault("device", "cuda" if on_gpu(blocks) else "cpu")
        self._setup(tuple(int(s) for s in shape), lambda rows, cols: blocks[:, rows, cols], comm, grid, layout,
                    vectors, rhs, options)

    @classmethod
    def from_parts(cls, shape, part, *, comm, grid=None, layout: str = "time-major", vectors: str = "replicated",
                   rhs=None, options=None) -> "BlockToeplitz":
        """From each rank's part only: ``part(rows, cols)`` (two slices) returns this rank's
        blocks[:, rows, cols], shape (Nt, rows, cols), as blocks would be given to the constructor."""
        if not callable(part):
            raise TypeError(f"argument 'part': expected a callable (rows, cols) -> array, got {type(part).__name__}")
        if not isinstance(shape, (tuple, list)) or len(shape) != 3:
            raise ValueError(f"argument 'shape': expected (Nt, Nd, Nm), got {shape!r}")
        self = cls.__new__(cls)
        self._setup(tuple(integer(s, "shape", 1) for s in shape), part, comm, grid, layout, vectors, rhs, options)
        return self

    @classmethod
    def from_fftmatvec(cls, directory, *, comm, grid=None, layout: str = "space-major", dtype=np.float64,
                       vectors: str = "replicated", rhs=None, options=None) -> "BlockToeplitz":
        """Reads a matrix in the FFTMatvec format (see strux.toeplitz.BlockToeplitz.from_fftmatvec);
        each rank opens only the files of its block rows and reads only its columns of them."""
        if not isinstance(directory, (str, os.PathLike)):
            raise TypeError(f"argument 'directory': expected a path, got {type(directory).__name__}")
        directory = os.fspath(directory)
        try:
            dt = np.dtype(dtype)
        except TypeError:
            raise TypeError(f"argument 'dtype': expected float32 or float64, got {dtype!r}") from None
        if dt not in (np.float32, np.float64):
            raise TypeError(f"argument 'dtype': expected float32 or float64, got {dt}")
        m = _module()

        def sizes():
            if not os.path.exists(directory):
                raise FileNotFoundError(f"argument 'directory': '{directory}' does not exist")
            nd, nm, nt = m.fftmatvec_sizes(directory)
            return nt, nd, nm

        shape = _agree(comm, sizes)

        def part(rows, cols):
            if rows.stop == rows.start or cols.stop == cols.start:  # an empty block: nothing to read
                return np.zeros((shape[0], rows.stop - rows.start, cols.stop - cols.start), dt)
            b = m.read_fftmatvec_part(directory, rows.start, rows.stop, cols.start, cols.stop)
            return b.astype(dt, copy=False)

        return cls.from_parts(shape, part, comm=comm, grid=grid, layout=layout, vectors=vectors, rhs=rhs,
                              options=options)

    # ---- construction -----------------------------------------------------------------------
    def _setup(self, shape, part, comm, grid, layout, vectors, rhs, options):
        m = _module()
        self._handle = _comm_handle(comm)
        self.comm = comm
        self._layout = choice(layout, "layout", _LAYOUTS)
        self._vectors = choice(vectors, "vectors", _VECTORS)
        self._opts = _options(options)
        if not self._opts.get("check_ranks", True) and self._vectors == "distributed" and rhs is None:
            # Ranks without input learn R from the agreement step; without it R must be fixed.
            raise ValueError("argument 'rhs': options check_ranks=False with distributed vectors needs rhs "
                             "(the number of right-hand sides every call uses)")
        self.shape3 = shape
        Nt, Nd, Nm = shape
        P, rank = comm.Get_size(), comm.Get_rank()

        def local():
            g = _grid(grid)
            if g == (0, 0):
                # Chosen here by the C++ model (the part to read depends on it), for this R and
                # device kind of the model's defaults: float64 numbers, the device given by options.
                g = tuple(m.choose_grid(P, Nt, Nd, Nm, 1, "float64", 0 if self._opts.get("device") == "cuda" else -1,
                                        self._vectors, self._opts.get("comm", "auto")))
            if g[0] * g[1] != P:
                raise ValueError(f"argument 'grid': expected r·c = {P} (the number of ranks of 'comm'), got {g}")
            # (r > Nd or c > Nm leaves some ranks an empty block: they hold no F̂, pass and get
            # parts with no entries, and still take part in every call.)
            i, j = divmod(rank, g[1])
            rows, cols = block_range(Nd, g[0], i), block_range(Nm, g[1], j)
            b = part(rows, cols)
            want = (Nt, rows.stop - rows.start, cols.stop - cols.start)
            if tuple(int(s) for s in b.shape) != want:
                raise ValueError(f"argument 'blocks': this rank's part must have shape {want}, got {tuple(b.shape)}")
            return g, rows, cols, self._local_array(b, "blocks")

        self._grid_rc, self.rows, self.cols, self._blocks = _agree(comm, local)
        self.grid_pos = divmod(rank, self._grid_rc[1])
        self._ops, self._fixed = {}, None
        R = 1 if rhs is None else integer(rhs, "rhs", 1)
        self._op(R)  # collective, and checks that the ranks agree on the problem
        if rhs is not None:
            self._blocks, self._fixed = None, R

    def _op(self, R):
        op = self._ops.get(R)
        if op is not None:
            return op
        if self._fixed is not None:
            raise ValueError(f"argument 'R': this operator was built for rhs = {self._fixed} right-hand sides, "
                             f"got {R}")
        o = self._opts
        Nt, Nd, Nm = self.shape3
        op = _module().Toeplitz(self._handle, Nt, Nd, Nm, R, self._layout, self._dtype, self._device,
                                self._grid_rc, self._vectors, o.get("comm", "auto"), o.get("chunks", 0),
                                o.get("solver", ""), o.get("check_ranks", True), o.get("timing", False), _single(o))
        b = self._blocks
        op.set_blocks(self._ptr(b), self._stream(b))
        self._ops[R] = op
        return op

    # ---- attributes -------------------------------------------------------------------------
    @property
    def grid(self) -> tuple:
        return tuple(self._grid_rc)

    @property
    def layout(self) -> str:
        return self._layout

    @property
    def dtype(self) -> str:
        return self._dtype

    def describe(self, R: int = 1) -> str:
        """What the operator for R right-hand sides chose, in words (this rank's view)."""
        return self._op(integer(R, "R", 1)).describe()

    def timings(self, R: int = 1) -> dict:
        """Seconds of the last call's broadcast, local, reduce and total (options timing=True)."""
        return self._op(integer(R, "R", 1)).timings()

    # ---- products ---------------------------------------------------------------------------
    def _apply(self, x, adjoint):
        nm = self.cols.stop - self.cols.start
        nd = self.rows.stop - self.rows.start
        nin, nout = (nd, nm) if adjoint else (nm, nd)
        dist = self._vectors == "distributed"
        i, j = self.grid_pos
        has_in = not dist or (j == 0 if adjoint else i == 0)
        has_out = not dist or (i == 0 if adjoint else j == 0)
        name = "d" if adjoint else "m"

        check = self._opts.get("check_ranks", True)
        if check:
            v, R = _agree(self.comm, lambda: self._vector(x, name, nin, has_in))
            # Every rank learns the number of right-hand sides (ranks without input included).
            Rs = {r for r in self.comm.allgather(R if v is not None else "-") if r != "-"}
            if len(Rs) != 1:
                raise ValueError(f"argument '{name}': the ranks passed different numbers of right-hand sides "
                                 f"({', '.join(sorted(str(r) for r in Rs))})")
            R = Rs.pop()
        else:  # the caller promises matching arguments (benchmarks): no agreement step
            v, R = self._vector(x, name, nin, has_in)
            if v is None:
                R = self._fixed
        op = self._op(1 if R is None else R)
        out = self._empty(self._ref, nout, R) if has_out else None
        # Ranks without input or output still take part (their buffers are the operator's own).
        s = self._stream(self._ref)
        if adjoint:
            op.rmatvec(self._ptr(v), self._ptr(out), s)
        else:
            op.matvec(self._ptr(v), self._ptr(out), s)
        return out

    # ---- whole-vector helpers for iterative solvers (collective) ----------------------------
    def _holds(self, space):
        i, j = self.grid_pos
        return i == 0 if space == "m" else j == 0  # grid row 0 holds every m part once, column 0 every d part

    def _dot(self, a, b, space):
        x = 0.0
        if self._holds(space):
            if a is None or b is None:
                raise ValueError(f"argument 'a': this rank holds a part of the {space} vector, got None")
            if self._gpu:
                x = float((a.double() * b.double()).sum()) if hasattr(a, "double") else float((a * b).sum())
            else:
                x = float(np.vdot(np.asarray(a, np.float64), np.asarray(b, np.float64)))
        return self.comm.allreduce(x)

    def dot_m(self, a, b) -> float:
        """<a, b> of two whole parameter vectors given by their parts (as matvec takes m_j), in
        float64, on every rank (each part counted once). Collective."""
        return self._dot(a, b, "m")

    def dot_d(self, a, b) -> float:
        """<a, b> of two whole observation vectors given by their parts (as matvec returns d_i)."""
        return self._dot(a, b, "d")

    def _gather(self, x, space):
        host = None
        if self._holds(space):
            host = x.cpu().numpy() if hasattr(x, "cpu") else (x.get() if hasattr(x, "get") else np.asarray(x))
        key = self.cols if space == "m" else self.rows
        parts = [p for p in self.comm.allgather((key.start, host) if host is not None else None) if p is not None]
        parts.sort(key=lambda p: p[0])
        axis = 1 if self._layout == "time-major" else 0
        return np.concatenate([p[1] for p in parts], axis=axis)

    def gather_m(self, m_part):
        """The whole parameter vector (numpy, on every rank) from the parts. Collective."""
        return self._gather(m_part, "m")

    def gather_d(self, d_part):
        """The whole observation vector (numpy, on every rank) from the parts. Collective."""
        return self._gather(d_part, "d")

    def matvec(self, m):
        """d_i = (F m)[:, rows_i] from m_j = m[:, cols_j] (see the module docstring for who passes
        and who receives what)."""
        return self._apply(m, False)

    def rmatvec(self, d):
        """m_j = (Fᵀ d)[:, cols_j] from d_i = d[:, rows_i]."""
        return self._apply(d, True)

    def __matmul__(self, m):
        return self.matvec(m)


class _Rank(_Arrays):
    """Rank q of a BlockToeplitzGroup: its position, blocks and the checks of its vectors."""

    def __init__(self, group, q):
        self._layout, self._vectors, self.shape3 = group.layout, group.vectors, group.shape3
        self.grid_pos = group._g.grid_pos(q)
        self.rows, self.cols = slice(*group._g.rows(q)), slice(*group._g.cols(q))
        self._q = q

    def _device_hint(self):
        return f" (rank {self._q}'s parts live on devices[{self._q}]; part_m / part_d put them there)"

    def _here(self, x):
        """x on this rank's GPU (torch / CuPy arrays; numpy and CPU ranks unchanged)."""
        if not getattr(self, "_gpu", False) or not on_gpu(x):
            return x
        return x.to(f"cuda:{self._device}") if hasattr(x, "to") else _to_cupy_device(x, self._device)

    def part_m(self, m):
        """This rank's part of a whole parameter vector m, on this rank's device (a CUDA m)."""
        return self._here(super().part_m(m))

    def part_d(self, d):
        """This rank's part of a whole observation vector d, on this rank's device (a CUDA d)."""
        return self._here(super().part_d(d))


class BlockToeplitzGroup:
    """The operator of BlockToeplitz with every rank in this process, one device each: no MPI.

    ``devices``: a list of CUDA ordinals (blocks a torch tensor or CuPy array on any device;
    each rank's part is copied to its GPU; communication through NCCL) or a list of "cpu"
    entries (numpy; the ranks are threads sharing memory). Rank q of the r × c grid, at
    (q // c, q % c), runs on devices[q]. ``matvec`` and ``rmatvec`` take and return lists in rank
    order: rank q's part (None where a rank holds none, with distributed vectors), which lives on
    devices[q] (given there, returned there): ``[r.part_m(m) for r in G.ranks]`` cuts a whole
    CUDA vector on any device into parts, each moved to its rank's GPU. The number of
    right-hand sides is fixed at construction (``rhs``, default 1: vectors without the R axis).
    """

    def __init__(self, blocks, *, devices, grid=None, layout: str = "time-major", vectors: str = "replicated",
                 rhs=None, options=None):
        m = _module()
        if not isinstance(devices, (list, tuple)) or not devices:
            raise ValueError(f"argument 'devices': expected a non-empty list of CUDA ordinals or 'cpu', got {devices!r}")
        cpu = all(d == "cpu" for d in devices)
        if not cpu and not all(isinstance(d, int) and d >= 0 for d in devices):
            raise ValueError(f"argument 'devices': expected CUDA ordinals (all) or 'cpu' (all), got {devices!r}")
        shape = getattr(blocks, "shape", None)
        if shape is None or len(shape) != 3:
            raise ValueError(f"argument 'blocks': expected an array (Nt, Nd, Nm), got shape {shape}")
        self.layout = choice(layout, "layout", _LAYOUTS)
        self.vectors = choice(vectors, "vectors", _VECTORS)
        opts = _options(options)
        self.shape3 = Nt, Nd, Nm = tuple(int(s) for s in shape)
        self._R = None if rhs is None else integer(rhs, "rhs", 1)
        dtype = blocks.dtype.name if isinstance(blocks, np.ndarray) else str(blocks.dtype).replace("torch.", "")
        g = _grid(grid)
        self._g = m.ToeplitzGroup([-1] * len(devices) if cpu else list(devices), Nt, Nd, Nm, self._R or 1,
                                  self.layout, dtype, g, self.vectors, opts.get("chunks", 0), opts.get("solver", ""),
                                  opts.get("timing", False), _single(opts))
        self.grid = tuple(self._g.grid)
        self.ranks = [_Rank(self, q) for q in range(len(devices))]
        parts = []
        for q, rk in enumerate(self.ranks):
            b = blocks[:, rk.rows, rk.cols]
            if not cpu:
                b = b.to(f"cuda:{devices[q]}") if hasattr(b, "to") else _to_cupy_device(b, devices[q])
            parts.append(rk._local_array(b, "blocks"))
        self._g.set_blocks([rk._ptr(b) for rk, b in zip(self.ranks, parts)],
                           [rk._stream(b) for rk, b in zip(self.ranks, parts)])

    def describe(self, q: int = 0) -> str:
        return self._g.describe(integer(q, "q", 0, len(self.ranks) - 1))

    def timings(self, q: int = 0) -> dict:
        return self._g.timings(integer(q, "q", 0, len(self.ranks) - 1))

    def _apply(self, xs, adjoint):
        if not isinstance(xs, (list, tuple)) or len(xs) != len(self.ranks):
            raise ValueError(f"argument '{'d' if adjoint else 'm'}': expected a list of {len(self.ranks)} parts "
                             f"(one per rank), got {type(xs).__name__}")
        dist = self.vectors == "distributed"
        ins, outs = [], []
        for rk, x in zip(self.ranks, xs):
            i, j = rk.grid_pos
            nm, nd = rk.cols.stop - rk.cols.start, rk.rows.stop - rk.rows.start
            nin, nout = (nd, nm) if adjoint else (nm, nd)
            has_in = not dist or (j == 0 if adjoint else i == 0)
            has_out = not dist or (i == 0 if adjoint else j == 0)
            v, R = rk._vector(x, "d" if adjoint else "m", nin, has_in)
            if v is not None and (R or 1) != (self._R or 1):
                raise ValueError(f"argument '{'d' if adjoint else 'm'}': this group was built for rhs = "
                                 f"{self._R or 1} right-hand sides, got {R or 1}")
            ins.append(v)
            outs.append(rk._empty(rk._ref, nout, self._R) if has_out else None)
        streams = [rk._stream(rk._ref) for rk in self.ranks]
        f = self._g.rmatvec if adjoint else self._g.matvec
        f([rk._ptr(v) for rk, v in zip(self.ranks, ins)], [rk._ptr(o) for rk, o in zip(self.ranks, outs)], streams)
        return outs

    def matvec(self, parts):
        """[d_i of rank q] from [m_j of rank q] (lists in rank order)."""
        return self._apply(parts, False)

    def rmatvec(self, parts):
        """[m_j of rank q] from [d_i of rank q]."""
        return self._apply(parts, True)


def _to_cupy_device(x, device):
    import cupy
    with cupy.cuda.Device(device):
        return cupy.asarray(x)
