"""float64 references for the ks family, straight from the DESIGN.md formula (explicit loops)."""
from __future__ import annotations

import numpy as np


def dense(w, pattern) -> np.ndarray:
    """K (a*b*d, a*c*d): K[i*b*d + k*d + j, i*c*d + l*d + j] = w[i, k, l, j], zeros elsewhere."""
    a, b, c, d = pattern
    w = np.asarray(w, dtype=np.float64)
    K = np.zeros((a * b * d, a * c * d))
    for i in range(a):
        for k in range(b):
            for l in range(c):
                for j in range(d):
                    K[i * b * d + k * d + j, i * c * d + l * d + j] = w[i, k, l, j]
    return K


def support(pattern) -> np.ndarray:
    """0/1 matrix of K's support I_a ⊗ 1_{b×c} ⊗ I_d."""
    return dense(np.ones(pattern), pattern)


def chain_dense(ws, patterns) -> np.ndarray:
    K = dense(ws[0], patterns[0])
    for w, p in zip(ws[1:], patterns[1:]):
        K = K @ dense(w, p)
    return K


def apply(K, x, layout="bsf") -> np.ndarray:
    """y = x Kᵀ (bsf, x (batch, N)) or K x (bsl, x (N, batch)), in float64."""
    x = np.asarray(x, dtype=np.float64)
    return x @ K.T if layout == "bsf" else K @ x


def matmul(x, w, pattern, layout="bsf") -> np.ndarray:
    return apply(dense(w, pattern), x, layout)


def chain(x, ws, patterns, layout="bsf") -> np.ndarray:
    return apply(chain_dense(ws, patterns), x, layout)
