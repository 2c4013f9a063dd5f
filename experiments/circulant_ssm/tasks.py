"""The group-composition tasks: token x_t is a group element, the target at step t the prefix
product x_t ∘ … ∘ x_1 (for Z_8, the prefix sum mod 8 of tokens 0–7).

Z_8 is abelian (a circulant transition, a commutative algebra, can track it exactly). D_4 (the
symmetries of a square, order 8) and S_3 (order 6) are non-abelian, with faithful actions on 4
points (S_3 fixing one): block-circulant transitions with p = 4 blocks can represent both as
block permutations. D_4 is a 2-group (a chain of Z_2 extensions, which stacked real diagonal
layers with eigenvalues in [-1, 1] can cascade); S_3 has a Z_3 factor (a rotation, which they
cannot represent).
"""
import itertools

import numpy as np


def _perm_group(generators, order):
    """The closure of permutation generators of 0..3 (the identity first); returns (elements,
    table) with table[g, h] = index of g ∘ h (h applied first)."""
    elems = [(0, 1, 2, 3)]
    frontier = list(elems)
    while frontier:
        new = []
        for e, gen in itertools.product(frontier, generators):
            g = tuple(gen[i] for i in e)
            if g not in elems:
                elems.append(g)
                new.append(g)
        frontier = new
    assert len(elems) == order
    index = {e: i for i, e in enumerate(elems)}
    table = np.array([[index[tuple(g[i] for i in h)] for h in elems] for g in elems], dtype=np.int64)
    return elems, table


_, D4_TABLE = _perm_group([(1, 2, 3, 0), (0, 3, 2, 1)], 8)    # the square's rotation and a reflection
_, S3_TABLE = _perm_group([(1, 2, 0, 3), (1, 0, 2, 3)], 6)     # a 3-cycle and a transposition, 3 fixed
Z8_TABLE = (np.arange(8)[:, None] + np.arange(8)[None, :]) % 8
TABLES = {"z8": Z8_TABLE, "d4": D4_TABLE, "s3": S3_TABLE}
IDENTITY = 0  # element 0 is the identity in both tables


def is_abelian(task: str) -> bool:
    t = TABLES[task]
    return bool((t == t.T).all())


def prefix_products(task: str, tokens: np.ndarray) -> np.ndarray:
    """targets[:, t] = x_t ∘ … ∘ x_1 for tokens (N, T) (left action: the newest element last)."""
    table = TABLES[task]
    out = np.empty_like(tokens)
    state = np.full(tokens.shape[0], IDENTITY, dtype=tokens.dtype)
    for t in range(tokens.shape[1]):
        state = table[tokens[:, t], state]
        out[:, t] = state
    return out


def dataset(task: str, count: int, lo: int, hi: int, rng: np.random.Generator):
    """count sequences of lengths uniform in [lo, hi], padded to hi: (tokens, targets, lengths)."""
    tokens = rng.integers(0, len(TABLES[task]), size=(count, hi))
    lengths = rng.integers(lo, hi + 1, size=count)
    return tokens, prefix_products(task, tokens), lengths


def fixed_length(task: str, count: int, length: int, rng: np.random.Generator):
    tokens = rng.integers(0, len(TABLES[task]), size=(count, length))
    return tokens, prefix_products(task, tokens)
