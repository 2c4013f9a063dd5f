"""2-D advection–diffusion on the unit square as a linear time-invariant system.

    du/dt = kappa Δu − v·∇u + s(x, t),   u = 0 outside the square (homogeneous Dirichlet)

Finite volumes on an n × n grid (cell centres), first-order upwind advection and the 5-point
Laplacian, explicit Euler with a stable step dt. The source s is the parameter: piecewise
constant on a coarse nc × nc grid and in time over each observation interval tau = k·dt. Sensors
read u at Nd cell centres at the end of every interval. At the observation cadence this is

    x_t = A x_{t-1} + B m_t,   y_t = C x_t,    A = S^k,  B = tau P
    (k steps of the PDE, then the interval's source, integrated over tau, added)

with S = I + dt L the sparse one-step matrix, P the coarse-to-fine injection and C the sensor
selection, so the parameter-to-observable map F is block lower-triangular Toeplitz with blocks
C A^t B. Arrays are numpy/scipy or, with device="cuda", torch (dense and sparse CSR) on the GPU.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp


class Grid:
    def __init__(self, n: int, nc: int, sensors: int, kappa: float = 1e-3, velocity=(0.8, 0.4), tau: float = 0.01):
        if n % nc:
            raise ValueError(f"argument 'nc': expected a divisor of n = {n}, got {nc}")
        self.n, self.nc, self.kappa, self.velocity, self.tau = n, nc, kappa, velocity, tau
        h = 1.0 / n
        vx, vy = velocity
        # explicit upwind + diffusion: dt (|vx| + |vy|) / h + 4 kappa dt / h^2 <= 1, with a margin
        dt_max = 1.0 / ((abs(vx) + abs(vy)) / h + 4 * kappa / h**2)
        self.k = max(1, math.ceil(tau / (0.9 * dt_max)))
        self.dt = tau / self.k
        self.S = self._step_matrix()
        self.P = self._injection()
        self.sensor_xy, self.C = self._sensors(sensors)

    @property
    def ns(self) -> int:
        return self.n * self.n

    @property
    def nm(self) -> int:
        return self.nc * self.nc

    def _step_matrix(self) -> sp.csr_matrix:
        n, h, dt, kappa = self.n, 1.0 / self.n, self.dt, self.kappa
        vx, vy = self.velocity
        e = np.ones(n)
        D2 = sp.diags([e[:-1], -2 * e, e[:-1]], [-1, 0, 1]) / h**2  # Dirichlet: missing neighbours are 0
        # upwind first differences for v > 0 (backward), v < 0 (forward)
        Db = sp.diags([-e[:-1], e], [-1, 0]) / h
        Df = sp.diags([-e, e[:-1]], [0, 1]) / h
        I = sp.identity(n)
        Dx = Db if vx > 0 else Df
        Dy = Db if vy > 0 else Df
        # state index = iy * n + ix
        L = kappa * (sp.kron(I, D2) + sp.kron(D2, I)) - vx * sp.kron(I, Dx) - vy * sp.kron(Dy, I)
        return (sp.identity(n * n) + dt * L).tocsr()

    def _injection(self) -> sp.csr_matrix:
        n, nc = self.n, self.nc
        r = n // nc
        iy, ix = np.divmod(np.arange(n * n), n)
        cols = (iy // r) * nc + (ix // r)
        return sp.csr_matrix((np.ones(n * n), (np.arange(n * n), cols)), shape=(n * n, nc * nc))

    def _sensors(self, nsens: int):
        q = int(round(math.sqrt(nsens)))
        pts = (np.arange(q) + 0.5) / q
        xy = np.array([(x, y) for y in pts for x in pts])
        idx = (np.floor(xy[:, 1] * self.n).astype(int) * self.n + np.floor(xy[:, 0] * self.n).astype(int))
        C = sp.csr_matrix((np.ones(len(idx)), (np.arange(len(idx)), idx)), shape=(len(idx), self.ns))
        return xy, C

    def true_source(self, nt: int) -> np.ndarray:
        """m_true (nt, nc*nc): two smooth blobs with smooth pulses in time."""
        c = (np.arange(self.nc) + 0.5) / self.nc
        X, Y = np.meshgrid(c, c)  # Y rows: index iy * nc + ix
        t = (np.arange(nt) + 0.5) / nt
        g1 = np.exp(-((X - 0.3) ** 2 + (Y - 0.35) ** 2) / (2 * 0.08**2)).ravel()
        g2 = np.exp(-((X - 0.55) ** 2 + (Y - 0.65) ** 2) / (2 * 0.06**2)).ravel()
        s1 = np.exp(-((t - 0.25) ** 2) / (2 * 0.08**2))
        s2 = 0.7 * np.exp(-((t - 0.5) ** 2) / (2 * 0.1**2))
        return np.outer(s1, g1) + np.outer(s2, g2)

    def regulariser(self, gamma: float, beta: float) -> "Regulariser":
        return Regulariser(self.nc, gamma, beta)


class Regulariser:
    """R m = Ls Ls m_t per step (Ls = I − gamma Δ_c, Neumann) + beta (2 m_t − m_{t−1} − m_{t+1})."""

    def __init__(self, nc: int, gamma: float, beta: float):
        e = np.ones(nc)
        D2 = sp.diags([e[:-1], -2 * e, e[:-1]], [-1, 0, 1]).tolil()
        D2[0, 0] = D2[-1, -1] = -1  # Neumann
        I = sp.identity(nc)
        lap = sp.kron(I, D2) + sp.kron(D2, I)
        Ls = (sp.identity(nc * nc) - gamma * lap).tocsr()
        self.R = (Ls @ Ls).tocsr()
        self.beta = beta


# ---- the same system on numpy/scipy or torch ------------------------------------------------------

class Backend:
    """Sparse matrices and vectors on the CPU (scipy) or a CUDA device (torch)."""

    def __init__(self, grid: Grid, device: str, use_torch: bool | None = None):
        self.device = device
        self.grid = grid
        self.use_torch = device != "cpu" if use_torch is None else use_torch
        if not self.use_torch:
            self.S, self.St = grid.S, grid.S.T.tocsr()
            self.P, self.Pt = grid.P, grid.P.T.tocsr()
            self.C, self.Ct = grid.C, grid.C.T.tocsr()
            self.R = grid.regulariser(1.0, 1.0).R  # replaced by set_regulariser
        else:
            import torch
            self.torch = torch
            self.S, self.St = self._t(grid.S), self._t(grid.S.T.tocsr())
            self.P, self.Pt = self._t(grid.P), self._t(grid.P.T.tocsr())
            self.C, self.Ct = self._t(grid.C), self._t(grid.C.T.tocsr())

    def _t(self, M):
        torch = self.torch
        M = M.tocsr()
        return torch.sparse_csr_tensor(torch.from_numpy(M.indptr.astype(np.int64)),
                                       torch.from_numpy(M.indices.astype(np.int64)),
                                       torch.from_numpy(M.data.astype(np.float64)), size=M.shape,
                                       device=self.device)

    def array(self, x):
        if not self.use_torch:
            return np.asarray(x, dtype=np.float64)
        return self.torch.as_tensor(np.asarray(x), dtype=self.torch.float64, device=self.device)

    def numpy(self, x):
        return x.detach().cpu().numpy() if self.use_torch else x

    def zeros(self, shape):
        if not self.use_torch:
            return np.zeros(shape)
        return self.torch.zeros(shape, dtype=self.torch.float64, device=self.device)

    def sync(self):
        if self.use_torch and self.device.startswith("cuda"):
            self.torch.cuda.synchronize()

    def set_regulariser(self, reg: Regulariser):
        self.reg = reg
        self.Rs = self._t(reg.R) if self.use_torch else reg.R

    def apply_R(self, m):
        """R m for m (nt, nm)."""
        b = self.reg.beta
        rm = (self.Rs @ (m.T.contiguous() if self.use_torch else m.T)).T
        dm = 2 * m
        dm[1:] -= m[:-1]
        dm[:-1] -= m[1:]
        return rm + b * dm

    # ---- time stepping: the PDE forward and adjoint solves ----------------------------------------
    def steps(self, x, transpose=False):
        M = self.St if transpose else self.S
        for _ in range(self.grid.k):
            x = M @ x
        return x

    def forward(self, m):
        """y_t = C x_t, x_t = S^k x_{t−1} + tau P m_t: m (nt, nm) -> y (nt, nd)."""
        nt = m.shape[0]
        x = self.zeros(self.grid.ns)
        ys = []
        for t in range(nt):
            x = self.steps(x) + self.grid.tau * (self.P @ m[t])
            ys.append(self.C @ x)
        return self._stack(ys)

    def adjoint(self, r):
        """The transpose of forward: r (nt, nd) -> g (nt, nm)."""
        nt = r.shape[0]
        lam = self.zeros(self.grid.ns)
        gs = [None] * nt
        for t in range(nt - 1, -1, -1):
            lam = self.steps(lam, transpose=True) + self.Ct @ r[t]
            gs[t] = self.grid.tau * (self.Pt @ lam)
        return self._stack(gs)

    def _stack(self, xs):
        return self.torch.stack(xs) if self.use_torch else np.stack(xs)

    # ---- the LTI system for strux.BlockToeplitz.from_lti ---------------------------------------
    def lti(self):
        """(A, B, C): A = S^k as an operator (.T, @, .shape, .dtype), B = tau P, C (sparse)."""
        if not self.use_torch:
            from scipy.sparse.linalg import LinearOperator
            ns = self.grid.ns
            A = LinearOperator((ns, ns), matvec=lambda v: self.steps(v), rmatvec=lambda v: self.steps(v, True),
                               matmat=lambda V: self.steps(V), rmatmat=lambda V: self.steps(V, True),
                               dtype=np.float64)
            return A, (self.grid.tau * self.P).tocsr(), self.C
        return StepPower(self, transpose=False), self.P * self.grid.tau, self.C


class StepPower:
    """S^k on torch tensors, with .T, @, .shape, .dtype and .device (what the GPU from_lti needs)."""

    def __init__(self, be: Backend, transpose: bool):
        self.be, self.transpose = be, transpose
        self.shape = (be.grid.ns, be.grid.ns)
        self.dtype = be.torch.float64
        self.device = be.device

    @property
    def T(self):
        return StepPower(self.be, not self.transpose)

    def __matmul__(self, X):
        return self.be.steps(X, self.transpose)
