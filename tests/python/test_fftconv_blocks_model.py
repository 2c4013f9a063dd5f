"""CPU check of the GPU blocks fftconv solver's index math (bench/fftconv_blocks_model.py, the
float64 model of src/cuda/fftconv/blocks.cu with the kernels' flat offsets) against the float64
direct sums of ref_fftconv.py: forward and every gradient, causal and circular, L = 1, Lk > L, one
and several blocks, and forced small blocks where a position is in three blocks; the float32 /
float64 path and the 16-bit one (its gates inside the inner plan, its backward on blocks laid out
ahead)."""

import pytest

from bench_module import bench_module

model = bench_module("fftconv_blocks_model")

GATES = [(), ("pre",), ("post",), ("skip",), ("pre", "post", "skip")]
# The GPU test's 16-bit sizes (odd and prime L, Lk = 1, 2, 63, 64, 65, several blocks per row) at
# forced small N, so the model runs them in a moment.
CASES16 = [(2, 2, 37, 1, False, 8), (1, 2, 41, 2, True, 8), (1, 2, 331, 63, False, 128), (2, 1, 331, 64, True, 128),
           (1, 1, 257, 65, False, 128), (1, 1, 97, 65, True, 128), (1, 1, 65, 65, True, 128)]


@pytest.mark.parametrize("path", [None, "16"], ids=["path32", "path16"])
@pytest.mark.parametrize("case", model.CASES + CASES16, ids=str)
def test_model(case, path):
    B, H, L, Lk, circular, N = case
    for gates in GATES:
        assert model.check(B, H, L, Lk, circular, gates, N, path=path) < 1e-10, gates


def test_geometry():
    assert [model.fft_size(m) for m in (1, 256, 257, 4096, 8193)] == [1024, 1024, 2048, 16384, 65536]
    m, N, S, nb = model.geometry(100003, 4096, False)
    assert (m, N, S, nb) == (4096, 16384, 12289, 9)
    assert model.geometry(500, 1000, False)[:2] == (500, 2048)
