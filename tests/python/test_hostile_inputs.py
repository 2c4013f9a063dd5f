"""Inputs that used to be misread (issue 11): byte-swapped arrays computed in float32, lazy
conjugate / negative views read as their raw memory, unaligned data."""
import numpy as np
import pytest

import strux
from strux._arrays import resolve_lazy, to_numpy


class LazyView:
    """Stands in for a torch tensor with the conjugate or negative bit set: its memory (what
    __array__ / DLPack expose) is `raw`; its value is conj(raw) or -raw."""

    def __init__(self, raw, conj=False, neg=False):
        self.raw, self.conj, self.neg = raw, conj, neg

    def is_conj(self):
        return self.conj

    def is_neg(self):
        return self.neg

    def resolve_conj(self):
        return LazyView(np.conj(self.raw) if self.conj else self.raw, False, self.neg)

    def resolve_neg(self):
        return LazyView(-self.raw if self.neg else self.raw, self.conj, False)

    def __array__(self, dtype=None, copy=None):
        return self.raw


def test_lazy_views_resolved_before_reading():
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((1, 4, 3)) + 1j * rng.standard_normal((1, 4, 3))) * 0.5
    b = rng.standard_normal((1, 4, 3)) + 0j
    got = strux.diag_scan(LazyView(a, conj=True), b)
    assert np.allclose(got, strux.diag_scan(np.conj(a), b))
    u = rng.standard_normal((1, 1, 8))
    k = rng.standard_normal((1, 3))
    assert np.allclose(strux.fftconv(LazyView(u, neg=True), k), strux.fftconv(-u, k))
    assert np.array_equal(to_numpy(LazyView(u, conj=True, neg=True), "x"), -u)
    assert resolve_lazy(u) is u  # anything else passes unchanged


@pytest.mark.parametrize("dt", [">f8", ">f4", "<f8", ">f2"])
def test_byte_swapped_inputs_compute_in_their_precision(dt):
    rng = np.random.default_rng(1)
    u = rng.standard_normal((2, 3, 16)).astype(dt)
    k = rng.standard_normal((3, 5)).astype(dt)
    y = strux.fftconv(u, k)
    want = np.dtype(dt).newbyteorder("=")
    assert y.dtype == want and y.dtype.isnative  # native order: a documented copy
    ref = strux.fftconv(u.astype(want), k.astype(want))
    assert np.array_equal(y, ref)
    if np.dtype(dt).itemsize == 8:
        blocks = rng.standard_normal((4, 2, 3)).astype(dt)
        m = rng.standard_normal((4, 3)).astype(dt)
        d = strux.BlockToeplitz(blocks).matvec(m)
        assert d.dtype == np.float64
        assert np.allclose(d, strux.BlockToeplitz(blocks.astype("<f8")).matvec(m.astype("<f8")), rtol=1e-14)


def test_unaligned_inputs_accepted():
    rng = np.random.default_rng(2)
    u = rng.standard_normal((2, 3, 16))
    buf = np.zeros(u.nbytes + 1, np.uint8)[1:]
    v = buf.view(np.float64).reshape(u.shape)
    v[...] = u
    assert not v.flags.aligned
    k = rng.standard_normal((3, 5))
    assert np.array_equal(strux.fftconv(v, k), strux.fftconv(u, k))
    a = rng.standard_normal((2, 3, 16)) * 0.01
    assert np.array_equal(strux.circulant_scan(a, v), strux.circulant_scan(a, u))
