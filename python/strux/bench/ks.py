"""ks benchmark cases: one KS factor, float32, batch-size-first, batch 4096.

Patterns from ksmm's benchmark set (see ANCHORS.md), sized for a small CPU: d = 4, d = 1 and
d = 16. Baseline: the paper's "bmm with permutations" in numpy (permute x so each group's
columns are contiguous, one batched matmul over the a·d groups, permute back; the weights are
pre-permuted once, outside the timed call). The dense product x @ K.T is timed too and
recorded in Case.extra as dense_ms.
"""
from __future__ import annotations

import time

import numpy as np

from ..ks import ks_dense, ks_matmul
from .case import Case

BATCH = 4096
PATTERNS = [(4, 64, 64, 4), (6, 64, 64, 1), (1, 48, 48, 16)]


def bmm_recipe(x, wt, pattern):
    """y = x Kᵀ via permute → batched matmul → permute; wt = w.transpose(0, 3, 2, 1) as (a·d, c, b)."""
    a, b, c, d = pattern
    batch = x.shape[0]
    xt = x.reshape(batch, a, c, d).transpose(1, 3, 0, 2).reshape(a * d, batch, c)
    yt = np.matmul(xt, wt)  # (a·d, batch, b)
    return yt.reshape(a, d, batch, b).transpose(2, 0, 3, 1).reshape(batch, a * b * d)


def _median_time(fn, reps: int = 5) -> float:
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def cases() -> list[Case]:
    out = []
    rng = np.random.default_rng(0)
    for p in PATTERNS:
        a, b, c, d = p
        M, N, nnz = a * b * d, a * c * d, a * b * c * d
        x = rng.standard_normal((BATCH, N), dtype=np.float32)
        w = (rng.standard_normal(p) / np.sqrt(c)).astype(np.float32)
        wt = np.ascontiguousarray(w.transpose(0, 3, 2, 1)).reshape(a * d, c, b)
        K = ks_dense(w, p)
        x64, wt64 = x.astype(np.float64), wt.astype(np.float64)
        dense = lambda x=x, K=K: x @ K.T  # noqa: E731
        out.append(Case(
            family="ks",
            name=f"bsf {p} B={BATCH} float32",
            strux=lambda x=x, w=w, p=p: ks_matmul(x, w, p),
            baseline=lambda x=x, wt=wt, p=p: bmm_recipe(x, wt, p),
            baseline_name="numpy bmm with permutations",
            bytes=4 * (BATCH * (M + N) + nnz),
            flops=2.0 * BATCH * nnz,
            tol=1e-5,
            reference=lambda x64=x64, wt64=wt64, p=p: bmm_recipe(x64, wt64, p),
            extra={"dense_ms": _median_time(dense) * 1e3, "dense_name": "numpy x @ K.T (dense K)"},
        ))
    return out
