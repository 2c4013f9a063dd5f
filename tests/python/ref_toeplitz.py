"""float64 loop references of the toeplitz contract (DESIGN.md), time-major shapes.

No FFTs here: plain sums over the block lower triangle, so they test the algorithm, not repeat it.
"""
import numpy as np


def _rhs(x):
    x = np.asarray(x, dtype=np.float64)
    return (x[..., None], True) if x.ndim == 2 else (x, False)


def ref_matvec(blocks, m):
    """d[i] = sum_{j<=i} blocks[i-j] @ m[j]; m (Nt, Nm[, R]) -> (Nt, Nd[, R])."""
    b = np.asarray(blocks, dtype=np.float64)
    x, squeeze = _rhs(m)
    nt, nd, _ = b.shape
    d = np.zeros((nt, nd, x.shape[2]))
    for i in range(nt):
        for j in range(i + 1):
            d[i] += b[i - j] @ x[j]
    return d[..., 0] if squeeze else d


def ref_rmatvec(blocks, d):
    """m[j] = sum_{i>=j} blocks[i-j].T @ d[i]; d (Nt, Nd[, R]) -> (Nt, Nm[, R])."""
    b = np.asarray(blocks, dtype=np.float64)
    y, squeeze = _rhs(d)
    nt, _, nm = b.shape
    m = np.zeros((nt, nm, y.shape[2]))
    for j in range(nt):
        for i in range(j, nt):
            m[j] += b[i - j].T @ y[i]
    return m[..., 0] if squeeze else m


def ref_dense(blocks):
    """The (Nt*Nd, Nt*Nm) matrix, time-major flattening, built entry by block."""
    b = np.asarray(blocks, dtype=np.float64)
    nt, nd, nm = b.shape
    F = np.zeros((nt * nd, nt * nm))
    for i in range(nt):
        for j in range(i + 1):
            F[i * nd:(i + 1) * nd, j * nm:(j + 1) * nm] = b[i - j]
    return F


def ref_grad_blocks(m, dd):
    """dblocks[k] = sum_r sum_{i>=k} dd[i, :, r] m[i-k, :, r]^T, time-major inputs."""
    x, _ = _rhs(m)
    g, _ = _rhs(dd)
    nt = x.shape[0]
    out = np.zeros((nt, g.shape[1], x.shape[1]))
    for k in range(nt):
        for i in range(k, nt):
            out[k] += g[i] @ x[i - k].T
    return out


def ref_lti_blocks(A, B, C, nt, D=None):
    """blocks[t] = C A^t B (+ D at t = 0) with explicit matrix powers."""
    A, B, C = (np.asarray(v, dtype=np.float64) for v in (A, B, C))
    out = np.stack([C @ np.linalg.matrix_power(A, t) @ B for t in range(nt)])
    if D is not None:
        out[0] += np.asarray(D, dtype=np.float64)
    return out


def to_space_major(x):
    """(Nt, N[, R]) -> (N, Nt[, R])."""
    return np.swapaxes(x, 0, 1)
