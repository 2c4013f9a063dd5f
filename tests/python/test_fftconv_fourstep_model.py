"""CPU check of the four-step fftconv solver's index mapping (bench/fftconv_fourstep_model.py, the
float64 model of src/cuda/fftconv/fourstep.cuh) against np.fft, at the smallest split (M1 128,
M2 256) and one with M2 = 512; the model's own main() covers the larger splits."""

import numpy as np
import pytest

from bench_module import bench_module

model = bench_module("fftconv_fourstep_model")


@pytest.mark.parametrize("M", [1 << 15, 1 << 16])
def test_rfft(M):
    M1, M2 = model.split_m(M)
    assert M1 * M2 == M and M1 == 128 and M2 in (256, 512)
    x = np.random.default_rng(1).standard_normal(2 * M)
    spec = model.pass_b(model.pass_a(x, 2 * M, M1, M2), M1, M2)[1]
    ref = np.fft.rfft(x)
    assert np.abs(spec - ref).max() < 1e-12 * np.abs(ref).max()


@pytest.mark.parametrize("L, Lk, circular", [(20000, 9000, False), (65536, 65536, True), (30001, 5, False)])
def test_conv(L, Lk, circular):
    rng = np.random.default_rng(2)
    u, k = rng.standard_normal(L), rng.standard_normal(Lk)
    n = model.nfft_of(L, Lk, circular)
    assert n == 65536
    y = model.fourstep_conv(u, k, n, circular)
    ref = model.reference(u, k, circular)
    assert np.linalg.norm(y - ref) < 1e-12 * np.linalg.norm(ref)
