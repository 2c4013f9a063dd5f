"""CPU settings: thread count, FFT planning and wisdom, the smooth FFT size search, and results
that stay the same whichever team size runs them."""
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import strux
from strux import _ext, _runtime

PY = sys.executable


def _env(**extra):
    """The environment for a child Python that imports the same strux as this process."""
    env = dict(os.environ)
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(strux.__file__)))
    env["PYTHONPATH"] = pkg_parent + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


@pytest.mark.parametrize("bad", ["2", 2.5, None, True, np.float64(2)])
def test_set_num_threads_rejects_non_integers(bad):
    with pytest.raises(TypeError, match="'n'"):
        strux.set_num_threads(bad)


@pytest.mark.parametrize("bad", [-1, 100000, _ext.max_threads + 1])
def test_set_num_threads_rejects_out_of_range(bad):
    with pytest.raises(ValueError, match="'n'"):
        strux.set_num_threads(bad)
    with pytest.raises(ValueError, match="'threads'"):
        _ext.set_num_threads(bad)  # the C++ check too, for callers that skip Python


def test_set_num_threads_round_trip_and_default():
    try:
        strux.set_num_threads(np.int64(3))
        assert strux.get_num_threads() == 3
        strux.set_num_threads(1)
        assert strux.get_num_threads() == 1
    finally:
        strux.set_num_threads(0)
    assert 1 <= strux.get_num_threads() <= max(_runtime.available_cpus(), int(os.environ.get("OMP_NUM_THREADS", 0)))
    assert strux.info()["cpu_threads"] == strux.get_num_threads()


def test_default_threads_follow_omp_num_threads():
    out = subprocess.run([PY, "-c", "import strux; print(strux.get_num_threads())"], capture_output=True,
                         text=True, env=_env(OMP_NUM_THREADS="3"), timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "3"


def test_cgroup_quota_parsing(monkeypatch, tmp_path):
    import builtins
    real_open = builtins.open

    def fake(content):
        def opener(path, *a, **k):
            if str(path) == "/sys/fs/cgroup/cpu.max":
                p = tmp_path / "cpu.max"
                p.write_text(content)
                return real_open(p, *a, **k)
            return real_open(path, *a, **k)
        return opener

    monkeypatch.setattr(builtins, "open", fake("150000 100000\n"))
    assert _runtime._cgroup_cpus() == 2
    monkeypatch.setattr(builtins, "open", fake("max 100000\n"))
    assert _runtime._cgroup_cpus() is None


def test_good_fft_size_matches_brute_force_and_is_fast():
    def brute(n):
        m = n
        while True:
            r = m
            for p in (2, 3, 5, 7):
                while r % p == 0:
                    r //= p
            if r == 1:
                return m
            m += 1

    rng = np.random.default_rng(0)
    for n in list(range(1, 400)) + [int(v) for v in rng.integers(400, 10**6, 100)]:
        assert _ext.good_fft_size(n) == brute(n), n
    t = time.perf_counter()
    for n in (2**40 + 1, 2**40 - 3, 3**25 + 1, 2**61 + 7, 2**62):
        m = _ext.good_fft_size(n)
        assert m >= n and brute(m) == m
    assert time.perf_counter() - t < 0.5
    with pytest.raises(ValueError, match="fft size"):
        _ext.good_fft_size(2**62 + 1)
    with pytest.raises(ValueError, match="fft size"):
        _ext.good_fft_size(0)


def test_huge_length_fails_fast_instead_of_searching():
    t = time.perf_counter()
    with pytest.raises((ValueError, MemoryError)):
        strux.FFTConv(np.ones((1, 1), np.float32), 2**40 + 1)
    assert time.perf_counter() - t < 2.0


def test_planning_setting():
    assert strux.get_planning() == "estimate"  # the default: no planning stalls
    with pytest.raises(ValueError, match="'planning'"):
        strux.set_planning("exhaustive")
    with pytest.raises(ValueError, match="'planning'"):
        strux.set_planning(None)


def test_measured_plans_write_wisdom_that_a_new_process_loads(tmp_path):
    cache = tmp_path / "cache"
    code = ("import numpy as np, strux; strux.set_planning('measure'); "
            "strux.fftconv(np.ones((1, 1, 300), np.float32), np.ones((1, 30), np.float32)); "
            "print(strux.wisdom_dir())")
    out = subprocess.run([PY, "-c", code], capture_output=True, text=True, env=_env(XDG_CACHE_HOME=str(cache)),
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(cache / "strux")
    wisdom = cache / "strux" / "fftw3f.wisdom"
    assert wisdom.exists() and wisdom.read_text().startswith("(fftw")
    code2 = "import strux; print(strux.set_wisdom_dir(strux.wisdom_dir()))"
    out = subprocess.run([PY, "-c", code2], capture_output=True, text=True, env=_env(XDG_CACHE_HOME=str(cache)),
                         timeout=120)
    assert out.returncode == 0 and int(out.stdout) >= 1


def test_save_wisdom_and_wisdom_dir(tmp_path):
    old = strux.wisdom_dir()
    try:
        assert strux.set_wisdom_dir(tmp_path / "w") == 0  # nothing there yet: loads none
        strux.save_wisdom()
        assert (tmp_path / "w" / "fftw3.wisdom").exists() and (tmp_path / "w" / "fftw3f.wisdom").exists()
        strux.set_wisdom_dir(None)
        assert strux.wisdom_dir() is None
        with pytest.raises(ValueError, match="'path'"):
            strux.save_wisdom()
        with pytest.raises(TypeError, match="'path'"):
            strux.set_wisdom_dir(3)
        bad = tmp_path / "bad"
        bad.mkdir()
        (bad / "fftw3.wisdom").write_text("not wisdom at all")
        (bad / "fftw3f.wisdom").write_bytes(b"\x00\xff" * 100)
        assert strux.set_wisdom_dir(bad) == 0  # skipped, not an error
        u = np.ones((1, 1, 50), np.float32)
        assert np.isfinite(strux.fftconv(u, u[0])).all()
    finally:
        strux.set_wisdom_dir(old)


def test_results_do_not_depend_on_the_team_that_ran_them():
    rng = np.random.default_rng(1)
    p = (4, 16, 16, 4)
    x = rng.standard_normal((300, 4 * 16 * 4)).astype(np.float32)
    w = rng.standard_normal(p).astype(np.float32)
    dy = rng.standard_normal((300, 4 * 16 * 4)).astype(np.float32)
    first = strux.ks_matmul_vjp(dy, x, w, p)
    for _ in range(20):  # the default team may adapt between calls; results may not
        again = strux.ks_matmul_vjp(dy, x, w, p)
        assert all(np.array_equal(a, b) for a, b in zip(first, again))
    u = rng.standard_normal((3, 2, 64)).astype(np.float32)
    k = rng.standard_normal((2, 64)).astype(np.float32)
    g1 = strux.fftconv_vjp(u, u, k)
    for _ in range(10):
        assert np.array_equal(strux.fftconv_vjp(u, u, k)[1], g1[1])


def test_ks_with_one_thread_matches_and_runs_serial_blas():
    rng = np.random.default_rng(2)
    p = (4, 32, 32, 4)
    x = rng.standard_normal((512, 4 * 32 * 4)).astype(np.float32)
    w = rng.standard_normal(p).astype(np.float32)
    want = strux.ks_matmul(x, w, p)
    try:
        strux.set_num_threads(1)
        got = strux.ks_matmul(x, w, p)
    finally:
        strux.set_num_threads(0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_per_operator_planner(tmp_path):
    old = strux.wisdom_dir()
    strux.set_wisdom_dir(tmp_path)  # measured plans write wisdom: not into the user's cache
    try:
        rng = np.random.default_rng(4)
        k = rng.standard_normal((2, 9)).astype(np.float32)
        u = rng.standard_normal((1, 2, 77)).astype(np.float32)
        op = strux.FFTConv(k, 77, planner="measure", solver="fft")
        np.testing.assert_allclose(op(u), strux.fftconv(u, k), rtol=1e-5, atol=1e-5)
        assert strux.get_planning() == "estimate"  # restored after building
        assert (tmp_path / "fftw3f.wisdom").exists()
        import pickle
        assert pickle.loads(pickle.dumps(op))._planner == "measure"
        F = strux.BlockToeplitz(rng.standard_normal((7, 2, 2)), planner="patient")
        assert F.matvec(np.ones((7, 2))).shape == (7, 2)
        with strux.planning("measure"):
            assert strux.get_planning() == "measure"
        assert strux.get_planning() == "estimate"
        with pytest.raises(ValueError, match="'planner'"):
            strux.FFTConv(k, 77, planner="fast")
        with pytest.raises(ValueError, match="'planner'"):
            strux.BlockToeplitz(np.ones((3, 1, 1)), planner=1)
    finally:
        strux.set_wisdom_dir(old)
