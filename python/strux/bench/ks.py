"""ks benchmark cases, float32, batch-size-first, batch 4096.

One factor: patterns from ksmm's benchmark set (see ANCHORS.md), sized for a small CPU: d = 4,
d = 1 and d = 16, and two small-block ones (radix-4 and radix-2 butterfly factors, the tile
kernel's domain); strux's per-group GEMM path (solver "gemm") is timed beside them. Baseline: the paper's "bmm with permutations" in numpy (permute x so each
group's columns are contiguous, one batched matmul over the a·d groups, permute back; the
weights are pre-permuted once, outside the timed call). The dense product x @ K.T (numpy's
BLAS, every core) is a second baseline.

Chains (issue 15's CPU goal): a radix-2 butterfly of N = 1024 (10 factors), forward in both
layouts and backward, and a radix-4 one. Baselines: numpy einsum per factor (y <- einsum over each
factor's (a, b, c, d) blocks, K_P first), the dense product x @ K.T with K = K_1 ⋯ K_P
precomputed (threaded BLAS), and strux's factor-by-factor GEMM path (solver "gemm", the path
before the fused tiles) in the same run.
"""
from __future__ import annotations

import numpy as np

from .. import _ext
from ..ks import ks_chain, ks_chain_vjp, ks_dense, ks_matmul
from ..patterns import butterfly
from .case import Case

BATCH = 4096
PATTERNS = [(4, 64, 64, 4), (6, 64, 64, 1), (1, 48, 48, 16), (64, 4, 4, 4), (256, 2, 2, 2)]
QUICK_PATTERNS = [(2, 16, 16, 2), (3, 16, 16, 1), (1, 8, 8, 4)]


def bmm_recipe(x, wt, pattern):
    """y = x Kᵀ via permute → batched matmul → permute; wt = w.transpose(0, 3, 2, 1) as (a·d, c, b)."""
    a, b, c, d = pattern
    batch = x.shape[0]
    xt = x.reshape(batch, a, c, d).transpose(1, 3, 0, 2).reshape(a * d, batch, c)
    yt = np.matmul(xt, wt)  # (a·d, batch, b)
    return yt.reshape(a, d, batch, b).transpose(2, 0, 3, 1).reshape(batch, a * b * d)


def cases(quick: bool = False) -> list[Case]:
    out = chain_list(quick)
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
            more_baselines=[("numpy x @ K.T, dense K (threaded BLAS)", dense),
                            ("strux per-group GEMMs (solver 'gemm')",
                             lambda x=x, w=w, p=p: _ext.ks_matmul_f32(x, w, list(p), "bsf", "gemm"))],
        ))
    return out


def einsum_chain(x, ws, patterns, layout="bsf"):
    """y = x Kᵀ ("bsf") / K x ("bsl") for K = K_1 ⋯ K_P by one numpy einsum per factor (K_P first)."""
    y = x
    for w, (a, b, c, d) in zip(ws[::-1], patterns[::-1]):
        if layout == "bsf":
            batch = y.shape[0]
            y = np.einsum("iklj,rilj->rikj", w, y.reshape(batch, a, c, d)).reshape(batch, a * b * d)
        else:
            batch = y.shape[1]
            y = np.einsum("iklj,iljr->ikjr", w, y.reshape(a, c, d, batch)).reshape(a * b * d, batch)
    return y


def einsum_chain_vjp(dy, x, ws, patterns):
    """dx and every dw of einsum_chain: the forward activations, then one einsum pair per factor."""
    batch, acts, y = x.shape[0], [], x
    for w, (a, b, c, d) in zip(ws[::-1], patterns[::-1]):
        acts.append(y.reshape(batch, a, c, d))
        y = np.einsum("iklj,rilj->rikj", w, acts[-1]).reshape(batch, a * b * d)
    g, dws = dy, []
    for w, (a, b, c, d), xin in zip(ws, patterns, acts[::-1]):
        gq = g.reshape(batch, a, b, d)
        dws.append(np.einsum("rikj,rilj->iklj", gq, xin))
        g = np.einsum("iklj,rikj->rilj", w, gq).reshape(batch, a * c * d)
    return g, dws


def chain_cases(n=1024, radix=2, batch=BATCH, backward=False, seed=1, layout="bsf") -> Case:
    rng = np.random.default_rng(seed)
    ps = butterfly(n, radix)
    flat = [int(v) for p in ps for v in p]
    x = rng.standard_normal((batch, n), dtype=np.float32)
    ws = [(rng.standard_normal(p) / np.sqrt(p[2])).astype(np.float32) for p in ps]
    ws64 = [w.astype(np.float64) for w in ws]
    x64 = x.astype(np.float64)
    K = np.eye(n)
    for w, p in zip(ws64, ps):
        K = K @ ks_dense(w, p)
    K32 = K.astype(np.float32)
    nnz = sum(int(np.prod(p)) for p in ps)
    name = f"chain butterfly({n}, {radix}) x{len(ps)} B={batch} float32"
    if layout == "bsl":  # x (N, batch) -> K x
        xT = np.ascontiguousarray(x.T)
        return Case(
            family="ks", name=name + " bsl",
            strux=lambda: ks_chain(xT, ws, ps, layout="bsl"),
            baseline=lambda: einsum_chain(xT, ws, ps, "bsl"),
            baseline_name="numpy einsum per factor",
            bytes=4 * (2 * batch * n + nnz), flops=2.0 * batch * nnz, tol=1e-5,
            reference=lambda: K @ x64.T,
            more_baselines=[("numpy K @ x, dense K (threaded BLAS)", lambda: K32 @ xT),
                            ("strux factor by factor, GEMMs (solver 'gemm')",
                             lambda: _ext.ks_chain_f32(xT, ws, flat, "bsl", "gemm"))],
        )
    if not backward:
        return Case(
            family="ks", name=name,
            strux=lambda: ks_chain(x, ws, ps),
            baseline=lambda: einsum_chain(x, ws, ps),
            baseline_name="numpy einsum per factor",
            bytes=4 * (2 * batch * n + nnz), flops=2.0 * batch * nnz, tol=1e-5,
            reference=lambda: x64 @ K.T,
            more_baselines=[("numpy x @ K.T, dense K (threaded BLAS)", lambda: x @ K32.T),
                            ("strux factor by factor, GEMMs (solver 'gemm')",
                             lambda: _ext.ks_chain_f32(x, ws, flat, "bsf", "gemm"))],
        )
    dy = rng.standard_normal((batch, n), dtype=np.float32)
    dy64 = dy.astype(np.float64)
    return Case(
        family="ks", name=name + " backward (dx)",
        strux=lambda: ks_chain_vjp(dy, x, ws, ps)[0],
        baseline=lambda: einsum_chain_vjp(dy, x, ws, ps)[0],
        baseline_name="numpy einsum per factor (activations, then dw and dx per factor)",
        bytes=4 * (4 * batch * n + 2 * nnz), flops=6.0 * batch * nnz, tol=1e-5,
        reference=lambda: dy64 @ K,
        more_baselines=[("numpy dy @ K, dense K (threaded BLAS)", lambda: dy @ K32),
                        ("strux factor by factor, GEMMs (solver 'gemm')",
                         lambda: _ext.ks_chain_vjp_f32(dy, x, ws, flat, "bsf", "gemm")[0])],
    )


def chain_list(quick: bool = False) -> list[Case]:
    if quick:
        return [chain_cases(64, 2, 256), chain_cases(64, 2, 256, layout="bsl"), chain_cases(64, 2, 256, backward=True)]
    return [chain_cases(), chain_cases(layout="bsl"), chain_cases(backward=True), chain_cases(1024, 4)]
