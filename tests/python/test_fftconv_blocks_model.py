"""CPU check of the GPU blocks fftconv solver's index math (bench/fftconv_blocks_model.py, the
float64 model of src/cuda/fftconv/blocks.cu with the kernels' flat offsets) against the float64
direct sums of ref_fftconv.py: forward and every gradient, causal and circular, L = 1, Lk > L, one
and several blocks, and forced small blocks where a position is in three blocks."""
import importlib.util
import pathlib

import pytest

_path = pathlib.Path(__file__).resolve().parents[2] / "bench" / "fftconv_blocks_model.py"
_spec = importlib.util.spec_from_file_location("fftconv_blocks_model", _path)
model = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(model)

GATES = [(), ("pre",), ("post",), ("skip",), ("pre", "post", "skip")]


@pytest.mark.parametrize("case", model.CASES, ids=str)
def test_model(case):
    B, H, L, Lk, circular, N = case
    for gates in GATES:
        assert model.check(B, H, L, Lk, circular, gates, N) < 1e-10, gates


def test_geometry():
    assert [model.fft_size(m) for m in (1, 256, 257, 4096, 8193)] == [1024, 1024, 2048, 16384, 65536]
    m, N, S, nb = model.geometry(100003, 4096, False)
    assert (m, N, S, nb) == (4096, 16384, 12289, 9)
    assert model.geometry(500, 1000, False)[:2] == (500, 2048)
