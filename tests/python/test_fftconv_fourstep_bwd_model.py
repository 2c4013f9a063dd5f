"""CPU check of the four-step fftconv backward's index mapping (bench/fftconv_fourstep_bwd_model.py,
the float64 model of src/cuda/fftconv/fourstep_bwd.cuh and the column passes' gradient epilogues)
against the gradients' own np.fft formulas and the dot-product test, at the smallest split (nfft
65536: M1 128, M2 256) and one with M2 = 512: causal and circular, Lk < L and Lk > L, B > 1 (dK̂
summed over b), with and without gates and skip, dpost wanted or not (Z merged or not)."""

import numpy as np
import pytest

from bench_module import bench_module

model = bench_module("fftconv_fourstep_bwd_model")

ALL = ("pre", "post", "skip")


@pytest.mark.parametrize("B, H, L, Lk, circular, gates, need_dpost", [
    (2, 2, 20000, 9000, False, ALL, True),
    (3, 1, 30001, 40000, False, ALL, True),    # Lk > L: taps past L get 0; odd L
    (1, 2, 65536, 3000, True, ALL, True),
    (2, 1, 65536, 65536, True, (), True),      # no gates, no skip
    (2, 1, 20000, 20000, False, ALL, False),   # dpost not wanted: Z not merged
    (1, 1, 40001, 40001, False, ("skip",), True),  # nfft 131072: M2 = 512
])
def test_backward(B, H, L, Lk, circular, gates, need_dpost):
    err, dot = model.check(B, H, L, Lk, circular, gates, np.random.default_rng(3), need_dpost)
    assert err < 1e-11 and dot < 1e-9, (err, dot)
