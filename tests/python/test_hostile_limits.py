"""Memory pressure, thread counts and huge sizes (issue 11): out-of-memory is a MemoryError with
the byte count and the argument (never an abort from inside an OpenMP region), a huge FFT length
fails at once, thread counts are bounded."""
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import strux

_OOM = r"""
import resource, sys, numpy as np, strux
strux.set_num_threads(2)
L = 2**16
op = strux.FFTConv(np.ones((1, 4)), L)
op(np.ones((2, 1, L)))          # the OpenMP team exists before memory gets tight
u = np.ones((64, 1, L))
with open('/proc/self/status') as f:
    vm = int([l for l in f if l.startswith('VmSize')][0].split()[1]) * 1024
# room for the result (32 MiB) but not for the per-thread scratch
lim = vm + int(sys.argv[1]) * 2**20
resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
try:
    op(u)
    print("RESULT")
except MemoryError as e:
    print("MEMORYERROR", e)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs RLIMIT_AS and /proc")
@pytest.mark.parametrize("room_mb", [31, 33])
def test_out_of_memory_in_fftconv_is_a_memory_error(room_mb):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    p = subprocess.run([sys.executable, "-c", _OOM, str(room_mb)], capture_output=True, text=True,
                       timeout=120, env=env)
    assert p.returncode == 0, p.stderr[-2000:]  # before: std::terminate from inside the OpenMP region
    out = p.stdout.strip()
    assert out.startswith("MEMORYERROR") and "argument 'u'" in out and "bytes" in out, out


def test_huge_fft_length_returns_at_once():
    k = np.ones((1, 3))
    for L in (2**40 - 5, 2**40 + 1, 2**31 + 7):
        t0 = time.perf_counter()
        with pytest.raises(ValueError, match="'L'"):
            strux.FFTConv(k, L)
        with pytest.raises(ValueError, match="'L'"):
            strux._ext.FFTConvPlanFloat64(k, L, "causal")  # the plan edge checks too
        assert time.perf_counter() - t0 < 1.0


@pytest.mark.parametrize("n", [100000, -1, 4097])
def test_thread_counts_bounded(n):
    with pytest.raises(ValueError, match="'n'"):
        strux.set_num_threads(n)
    with pytest.raises(ValueError, match="threads"):
        strux._ext.set_num_threads(n)


@pytest.mark.parametrize("n", ["2", 2.5, True, None])
def test_thread_counts_are_integers(n):
    with pytest.raises(TypeError, match="'n'"):
        strux.set_num_threads(n)


def test_many_threads_still_compute():
    try:
        strux.set_num_threads(64)
        y = strux.fftconv(np.ones((4, 4, 16)), np.ones((4, 2)))
        assert np.allclose(y[..., 1:], 2.0) and np.allclose(y[..., 0], 1.0)
    finally:
        strux.set_num_threads(0)


def test_nanobind_signatures_never_shown():
    u, k = np.ones((1, 1, 8)), np.ones((1, 3))
    for call in (lambda: strux.fftconv_vjp(None, u, k), lambda: strux.FFTConv(k, 2**70),
                 lambda: strux.BlockToeplitz.from_lti(np.eye(1), np.ones((1, 1)), np.ones((1, 1)), 2**70),
                 lambda: strux.ks_matmul(np.ones((1, 2)), np.ones((1, 1, 2, 1)), (1, 1, 2**70, 1))):
        with pytest.raises((TypeError, ValueError)) as e:
            call()
        assert "incompatible function arguments" not in str(e.value) and "argument '" in str(e.value)
