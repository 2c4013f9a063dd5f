"""ks benchmark cases: one KS factor, float32, batch-size-first, batch 4096.

Patterns from ksmm's benchmark set (see ANCHORS.md), sized for a small CPU: d = 4, d = 1 and
d = 16. Baseline: the paper's "bmm with permutations" in numpy (permute x so each group's
columns are contiguous, one batched matmul over the a·d groups, permute back; the weights are
pre-permuted once, outside the timed call). The dense product x @ K.T (numpy's BLAS, every
core) is a second baseline.
"""
from __future__ import annotations

import numpy as np

from ..ks import ks_dense, ks_matmul
from .case import Case

BATCH = 4096
PATTERNS = [(4, 64, 64, 4), (6, 64, 64, 1), (1, 48, 48, 16)]
QUICK_PATTERNS = [(2, 16, 16, 2), (3, 16, 16, 1), (1, 8, 8, 4)]


def bmm_recipe(x, wt, pattern):
    """y = x Kᵀ via permute → batched matmul → permute; wt = w.transpose(0, 3, 2, 1) as (a·d, c, b)."""
    a, b, c, d = pattern
    batch = x.shape[0]
    xt = x.reshape(batch, a, c, d).transpose(1, 3, 0, 2).reshape(a * d, batch, c)
    yt = np.matmul(xt, wt)  # (a·d, batch, b)
    return yt.reshape(a, d, batch, b).transpose(2, 0, 3, 1).reshape(batch, a * b * d)


def cases(quick: bool = False) -> list[Case]:
    out = []
    rng = np.random.default_rng(0)
    batch = 256 if quick else BATCH
    for p in (QUICK_PATTERNS if quick else PATTERNS):
        a, b, c, d = p
        M, N, nnz = a * b * d, a * c * d, a * b * c * d
        x = rng.standard_normal((batch, N), dtype=np.float32)
        w = (rng.standard_normal(p) / np.sqrt(c)).astype(np.float32)
        wt = np.ascontiguousarray(w.transpose(0, 3, 2, 1)).reshape(a * d, c, b)
        K = ks_dense(w, p)
        x64, wt64 = x.astype(np.float64), wt.astype(np.float64)
        dense = lambda x=x, K=K: x @ K.T  # noqa: E731
        out.append(Case(
            family="ks",
            name=f"bsf {p} B={batch} float32",
            strux=lambda x=x, w=w, p=p: ks_matmul(x, w, p),
            baseline=lambda x=x, wt=wt, p=p: bmm_recipe(x, wt, p),
            baseline_name="numpy bmm with permutations",
            bytes=4 * (batch * (M + N) + nnz),
            flops=2.0 * batch * nnz,
            tol=1e-5,
            reference=lambda x64=x64, wt64=wt64, p=p: bmm_recipe(x64, wt64, p),
            more_baselines=[("numpy x @ K.T, dense K (threaded BLAS)", dense)],
        ))
    return out
