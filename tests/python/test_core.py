"""The package edge shared by all families: info, CLI, array conversion and errors."""
import subprocess
import sys

import numpy as np
import pytest

import strux
from strux import _arrays


def test_info_reports_version_backends_threads():
    i = strux.info()
    assert i["version"] == strux.__version__
    assert "cpu" in i["backends"]
    assert i["cpu_threads"] >= 1


def test_cli_info_and_verify_run():
    out = subprocess.run([sys.executable, "-m", "strux.cli", "info"], capture_output=True, text=True)
    assert out.returncode == 0 and "strux" in out.stdout
    out = subprocess.run([sys.executable, "-m", "strux.cli", "verify"], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "FAIL" not in out.stdout


def test_cli_bench_rejects_unknown_family():
    out = subprocess.run([sys.executable, "-m", "strux.cli", "bench", "--family", "nope"],
                         capture_output=True, text=True)
    assert out.returncode != 0 and "nope" in out.stderr


@pytest.mark.parametrize("bad, kind", [(np.zeros((2, 2), np.int32), TypeError),
                                       (np.zeros((2, 2), np.complex64), TypeError),
                                       (None, TypeError), ("abc", TypeError)])
def test_real_array_rejects_non_float(bad, kind):
    with pytest.raises(kind, match="'x'"):
        _arrays.real_array(bad, "x")


def test_rank_and_empty_errors_name_argument():
    with pytest.raises(ValueError, match=r"'u'.*3 dimensions.*got 2"):
        _arrays.real_array(np.zeros((2, 2)), "u", ndim=3)
    with pytest.raises(ValueError, match=r"'u'.*size >= 1"):
        _arrays.real_array(np.zeros((2, 0, 3)), "u", ndim=3)


def test_mixed_dtypes_are_type_errors():
    with pytest.raises(TypeError, match=r"'k'.*float32.*'u'.*float64"):
        _arrays.same_dtype(u=np.zeros(1, np.float32), k=np.zeros(1, np.float64))


def test_dlpack_producer_is_accepted_without_copy():
    class Producer:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    a = np.arange(6.0).reshape(2, 3)
    b = _arrays.to_numpy(Producer(a), "x")
    assert np.shares_memory(a, b)


def test_half_types_compute_in_float32():
    assert _arrays.compute_dtype(np.float16) == np.float32
    assert _arrays.compute_dtype(np.float64) == np.float64
