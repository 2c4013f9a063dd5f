"""Kronecker-sparse patterns of the common structured matrices (for ks_chain and KSLinear).

Each builder returns a list of (a, b, c, d) patterns in the order of the product (DESIGN.md
ks): ``[π_1, …, π_P]`` stands for K = K_1 K_2 ⋯ K_P, K_P applied first. Plain Python (no
numpy, no torch); strux.torch re-exports them.
"""
from __future__ import annotations

from ._arrays import integer


def monarch(n: int, nblocks: int) -> list:
    """The two patterns of a square Monarch matrix of size n with ``nblocks`` blocks.

    With s = n / nblocks (nblocks must divide n), the Monarch matrix is M = Pᵀ L P R:

    - R = blockdiag(R_0, …, R_{nblocks-1}), blocks of size s × s;
    - P the permutation that reads a vector as an (nblocks, s) array in row-major order and
      writes its transpose: (P x)[j·nblocks + i] = x[i·s + j];
    - L = blockdiag(L_0, …, L_{s-1}), blocks of size nblocks × nblocks.

    As KS factors, M = K_1 K_2 with K_2 = R, pattern (nblocks, s, s, 1), w_2[i, k, l, 0] = R_i[k, l],
    and K_1 = Pᵀ L P, pattern (1, nblocks, nblocks, s), w_1[0, k, l, j] = L_j[k, l]. Returns
    ``[(1, nblocks, nblocks, s), (nblocks, s, s, 1)]`` (R applied first). With n = m² and
    nblocks = m this is the Monarch matrix of Dao et al. (2022), M = P L P R (P = Pᵀ there).
    """
    n = integer(n, "n")
    nblocks = integer(nblocks, "nblocks")
    if n % nblocks:
        raise ValueError(f"argument 'nblocks': expected a divisor of n = {n}, got {nblocks}")
    s = n // nblocks
    return [(1, nblocks, nblocks, s), (nblocks, s, s, 1)]


def butterfly(n: int, radix: int = 2) -> list:
    """The log_radix(n) patterns of a butterfly matrix of size n (n a power of ``radix``).

    Factor q (q = 1 … L, L = log_radix(n)) is I_{radix^(q-1)} ⊗ 1_{radix×radix} ⊗ I_{n/radix^q}:
    pattern (radix^(q-1), radix, radix, n / radix^q). Entry (i, j) of factor q can be nonzero
    only where i and j agree in every base-radix digit but the q-th most significant. K_L
    (blocks of radix × radix next to each other) is applied first, K_1 (mixing the two halves,
    for radix 2) last: the butterfly B_n ⋯ B_4 B_2 of Dao et al. (2019) for radix 2.
    """
    n = integer(n, "n")
    radix = integer(radix, "radix", 2)
    levels, m = 0, n
    while m % radix == 0:
        m //= radix
        levels += 1
    if m != 1 or levels == 0:
        raise ValueError(f"argument 'n': expected a power of radix = {radix} (at least {radix}), got {n}")
    return [(radix ** (q - 1), radix, radix, n // radix ** q) for q in range(1, levels + 1)]
