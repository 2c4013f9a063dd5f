"""strux.monarch and strux.butterfly: the patterns against explicit dense constructions."""
import numpy as np
import pytest

import ref_ks
import strux
from strux.patterns import butterfly, monarch


def _monarch_dense(Rs, Ls):
    """M = Pᵀ L P R from its blocks: R = blockdiag(Rs) (nblocks blocks s × s), L = blockdiag(Ls)
    (s blocks nblocks × nblocks), (P x)[j*nblocks + i] = x[i*s + j]."""
    nb, s = len(Rs), len(Ls)
    n = nb * s
    R = np.zeros((n, n))
    for i, B in enumerate(Rs):
        R[i * s:(i + 1) * s, i * s:(i + 1) * s] = B
    L = np.zeros((n, n))
    for j, B in enumerate(Ls):
        L[j * nb:(j + 1) * nb, j * nb:(j + 1) * nb] = B
    P = np.zeros((n, n))
    for i in range(nb):
        for j in range(s):
            P[j * nb + i, i * s + j] = 1.0
    return P.T @ L @ P @ R


@pytest.mark.parametrize("n,nb", [(16, 4), (12, 3), (12, 4), (6, 1), (6, 6), (8, 2)])
def test_monarch_matches_blockdiag_permutation_form(n, nb):
    rng = np.random.default_rng(n * 10 + nb)
    ps = monarch(n, nb)
    s = n // nb
    assert ps == [(1, nb, nb, s), (nb, s, s, 1)]
    ws = [rng.standard_normal(p) for p in ps]
    Rs = [ws[1][i, :, :, 0] for i in range(nb)]
    Ls = [ws[0][0, :, :, j] for j in range(s)]
    M = _monarch_dense(Rs, Ls)
    assert np.allclose(strux.ks_dense(ws[0], ps[0]) @ strux.ks_dense(ws[1], ps[1]), M, atol=1e-12)
    # and as a chain product: x @ M.T
    x = rng.standard_normal((3, n))
    assert np.allclose(strux.ks_chain(x, ws, ps), x @ M.T, atol=1e-10)
    # every Monarch matrix of this form is reached: the chain's support is full for nb > 1, s > 1
    assert np.count_nonzero(np.abs(M) > 0) == n * n or nb == 1 or s == 1


def _digits(i, radix, levels):
    return [(i // radix ** (levels - 1 - q)) % radix for q in range(levels)]


@pytest.mark.parametrize("n,radix", [(2, 2), (8, 2), (16, 2), (9, 3), (27, 3), (16, 4), (64, 4)])
def test_butterfly_support(n, radix):
    ps = butterfly(n, radix)
    levels = len(ps)
    assert radix ** levels == n
    for q, p in enumerate(ps):  # factor q+1 couples indices differing only in digit q (most significant first)
        sup = ref_ks.support(p)
        want = np.array([[all(a == b for t, (a, b) in enumerate(zip(_digits(i, radix, levels), _digits(j, radix, levels)))
                              if t != q) for j in range(n)] for i in range(n)])
        assert sup.shape == (n, n) and np.array_equal(sup.astype(bool), want)
        assert np.array_equal(sup, np.kron(np.eye(radix ** q), np.kron(np.ones((radix, radix)), np.eye(n // radix ** (q + 1)))))
    # the chain of the factors (K_L applied first) is the butterfly: dense with positive weights
    rng = np.random.default_rng(n)
    ws = [rng.uniform(0.5, 1.0, p) for p in ps]
    K = ref_ks.chain_dense(ws, ps)
    assert np.all(K > 0)
    assert np.allclose(strux.ks_chain(np.eye(n), ws, ps), K.T, atol=1e-12)


def test_exported_and_bad_arguments():
    assert strux.monarch is monarch and strux.butterfly is butterfly
    with pytest.raises(ValueError, match="'nblocks'"):
        monarch(10, 3)
    with pytest.raises(ValueError, match="'n'"):
        monarch(0, 1)
    with pytest.raises(TypeError, match="'nblocks'"):
        monarch(8, 2.0)
    with pytest.raises(ValueError, match="'n'"):
        butterfly(12, 2)
    with pytest.raises(ValueError, match="'n'"):
        butterfly(1, 2)
    with pytest.raises(ValueError, match="'radix'"):
        butterfly(8, 1)


def test_import_strux_needs_no_torch():
    """strux (patterns included) imports without PyTorch: strux.torch is the only module that needs it."""
    import subprocess
    import sys
    code = ("import sys; sys.modules['torch'] = None\n"  # any 'import torch' now raises ImportError
            "import strux, strux.patterns, strux.ks, strux.scan, strux.fftconv, strux.toeplitz\n"
            "assert strux.monarch(4, 2) == [(1, 2, 2, 2), (2, 2, 2, 1)]\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
