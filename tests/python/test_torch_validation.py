"""Torch-free checks of the conversions strux.torch's validation relies on (issue 11): the GPU
options converter's range checks (pure Python: runs without a GPU) and the plain API's reading
of a torch bfloat16 CPU tensor, with a stand-in object that behaves as torch's does (numpy has
no bfloat16, DLPack export of one fails). test_torch_cpu.py has the same with real tensors."""
import numpy as np
import pytest

import strux
from strux import _cuda_options as O


@pytest.mark.parametrize("chunk", [2**70, 2**62 + 1, -1, 2.0, "3", True, [3]])
def test_block_scan_chunk_out_of_range_names_options(chunk):
    """A chunk that the bindings' int64 cannot hold (or not an int): a ValueError naming
    'options', not nanobind's signature dump."""
    with pytest.raises(ValueError, match="argument 'options': 'chunk'"):
        O.block_scan_code({"chunk": chunk})


def test_block_scan_chunk_in_range():
    assert O.block_scan_code({"chunk": 0}) == (-1, 0)
    assert O.block_scan_code({"chunk": 7}) == (1, 7)
    assert O.block_scan_code({"chunk": np.int64(5)}) == (1, 5)
    assert O.block_scan_code({"chunk": 2**62}) == (1, 2**62)


@pytest.mark.parametrize("options,key", [({"path": [1]}, "'path'"), ({"stream_tn": {}}, "'stream_tn'"),
                                         ({"tc_variant": 2**70}, "'tc_variant'"), ({1: 2, "x": 3}, "unknown")])
def test_unhashable_or_odd_option_values_name_options(options, key):
    with pytest.raises(ValueError, match=f"argument 'options': .*{key}"):
        O.ks_code(options) if "path" not in options else O.block_scan_code(options)


def test_diag_scan_options_name_options():
    with pytest.raises(ValueError, match="argument 'options'"):
        O.diag_scan_code({"path": ["seq1"]})
    with pytest.raises(TypeError, match="argument 'options'"):
        O.diag_scan_code([("path", "seq1")])


class _Bfloat16Tensor:
    """What the plain API sees of a torch bfloat16 CPU tensor: a DLPack producer on the CPU whose
    export fails, a dtype printing as torch.bfloat16, and detach().float().numpy()."""

    def __init__(self, values):
        self.values = np.asarray(values, dtype=np.float32)
        self.dtype = type("dtype", (), {"__str__": lambda s: "torch.bfloat16"})()
        self.shape = self.values.shape

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, *a, **k):
        raise RuntimeError("Unsupported dtype in DLTensor.")

    def __array__(self, *a, **k):
        raise TypeError("Got unsupported ScalarType BFloat16")

    def detach(self):
        return self

    def float(self):
        return self

    def numpy(self):
        return self.values


def test_plain_api_reads_bfloat16_tensors_as_float32():
    rng = np.random.default_rng(0)
    u, k = rng.standard_normal((2, 3, 16)).astype(np.float32), rng.standard_normal((3, 5)).astype(np.float32)
    y = strux.fftconv(_Bfloat16Tensor(u), _Bfloat16Tensor(k))
    assert y.dtype == np.float32
    assert np.array_equal(y, strux.fftconv(u, k))
    with pytest.raises(TypeError, match="argument 'k'"):  # other dtypes still compared
        strux.fftconv(_Bfloat16Tensor(u), k.astype(np.float16))
