"""Command line, self-check, pickling, the scipy operator face of BlockToeplitz, package files."""
import json
import os
import pickle
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from scipy.sparse.linalg import LinearOperator, cg, gmres

import strux
from strux import cli, verify

from test_cpu_runtime import PY, _env

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _cli(*args, **kw):
    return subprocess.run([PY, "-m", "strux.cli", *args], capture_output=True, text=True, env=_env(), timeout=300, **kw)


def test_version_and_bare_help(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0 and strux.__version__ in capsys.readouterr().out
    assert cli.main([]) == 0
    out = capsys.readouterr().out
    assert "usage: strux" in out and "exit codes" in out and "130" in out


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["frobnicate"])
    assert e.value.code == 2
    assert cli.main(["bench", "--family", "nope", "--device", "cpu"]) == 2


def test_bench_checks_the_output_path_before_running(tmp_path, capsys):
    t = time.perf_counter()
    assert cli.main(["bench", "--device", "cpu", "--json", str(tmp_path / "missing" / "r.json")]) == 1
    assert cli.main(["bench", "--device", "cpu", "--json", str(tmp_path)]) == 1
    assert time.perf_counter() - t < 5  # no benchmark ran
    err = capsys.readouterr().err
    assert "'--json'" in err and "does not exist" in err and "folder" in err


def test_quick_bench_writes_json_report(tmp_path, capsys):
    path = tmp_path / "r.json"
    assert cli.main(["bench", "--device", "cpu", "--quick", "--quiet", "--family", "toeplitz",
                     "--json", str(path)]) == 0
    table = capsys.readouterr().out
    assert "scipy.fft" in table and "numpy" in table and "min/med/max" in table
    doc = json.loads(path.read_text())
    assert doc["schema_version"] == 2 and doc["quick"] is True and doc["threads"] >= 1
    assert "loadavg_before" in doc and "loadavg_after" in doc
    row = doc["results"][0]
    assert row["case"].startswith("matvec Nt=64 Nd=4 Nm=32 R=1 time-major float32")  # full name
    assert {"min_ms", "median_ms", "max_ms"} <= set(row["strux"])
    assert [b["name"].split()[0] for b in row["baselines"]] == ["numpy", "scipy.fft"]
    md = (tmp_path / "r.md").read_text()
    assert "| case |" in md and "scipy.fft" in md and "load average" in md


def test_ctrl_c_exits_130_without_traceback(tmp_path):
    p = subprocess.Popen([PY, "-m", "strux.cli", "bench", "--device", "cpu", "--family", "toeplitz"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=_env())
    first = p.stderr.readline()  # the run has started (imports done, timing under way)
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    err = first + err
    assert p.returncode == 130, err
    assert "Traceback" not in err and "interrupted" in err


def test_verify_never_flakes():
    # Errors are measured against the operands' scale: many fresh draws, no failure.
    for seed in range(2000):
        lines = []
        assert verify.run(progress=lines.append, seed=seed), "\n".join(lines)


def test_verify_cli():
    out = _cli("verify")
    assert out.returncode == 0 and "all checks passed" in out.stdout


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fftconv_operator_pickles(dtype):
    rng = np.random.default_rng(0)
    k = rng.standard_normal((3, 7)).astype(dtype)
    for mode in ("causal", "circular"):
        op = strux.FFTConv(k, 20, mode=mode)
        op2 = pickle.loads(pickle.dumps(op))
        u = rng.standard_normal((2, 3, 20)).astype(dtype)
        assert repr(op2) == repr(op)
        np.testing.assert_array_equal(op2(u), op(u))


@pytest.mark.parametrize("layout", ["time-major", "space-major"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_block_toeplitz_pickles(layout, dtype):
    rng = np.random.default_rng(1)
    op = strux.BlockToeplitz(rng.standard_normal((6, 2, 3)).astype(dtype), layout=layout)
    op2 = pickle.loads(pickle.dumps(op))
    assert op2.layout == layout and op2.dtype == dtype and op2.shape == op.shape
    m = rng.standard_normal((6, 3) if layout == "time-major" else (3, 6)).astype(dtype)
    np.testing.assert_array_equal(op2.matvec(m), op.matvec(m))


def test_block_toeplitz_is_a_scipy_linear_operator():
    rng = np.random.default_rng(2)
    nt, n = 8, 3
    blocks = 0.1 * rng.standard_normal((nt, n, n)) / np.sqrt(n * nt)
    blocks[0] += 2 * np.eye(n)
    for layout in ("time-major", "space-major"):
        F = strux.BlockToeplitz(blocks, layout=layout)
        assert isinstance(F, LinearOperator)
        D = F.to_dense()  # the operator's own layout
        d = rng.standard_normal(nt * n)
        np.testing.assert_allclose(F @ d, D @ d, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(F.T @ d, D.T @ d, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(F.H.matvec(d), D.T @ d, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose((2 * F) @ d, 2 * D @ d, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(F.matmat(np.eye(nt * n)), D, rtol=1e-12, atol=1e-12)
        x, info = gmres(F, d, rtol=1e-12, atol=0)
        assert info == 0 and np.linalg.norm(D @ x - d) < 1e-9 * np.linalg.norm(d)
        x, info = cg(F.T @ F, F.T @ d, rtol=1e-12, atol=0, maxiter=200)  # square and SPD
        assert info == 0 and np.linalg.norm(D @ x - d) < 1e-8 * np.linalg.norm(d)
        x, _ = cg(F, d, maxiter=3)  # accepted as it is (F is square)
        assert x.shape == (nt * n,)
        # the shaped form still works beside the flat one
        m = d.reshape((nt, n) if layout == "time-major" else (n, nt))
        np.testing.assert_allclose(F.matvec(m).ravel(), D @ d, rtol=1e-12, atol=1e-12)


def test_to_dense_uses_the_operator_layout():
    rng = np.random.default_rng(3)
    blocks = rng.standard_normal((5, 2, 3))
    sm = strux.BlockToeplitz(blocks, layout="space-major")
    tm = strux.BlockToeplitz(blocks)
    np.testing.assert_array_equal(sm.to_dense(), tm.to_dense(layout="space-major"))
    np.testing.assert_array_equal(sm.to_dense(layout="time-major"), tm.to_dense())
    m = rng.standard_normal((3, 5))
    np.testing.assert_allclose(sm.to_dense() @ m.ravel(), sm.matvec(m).ravel(), rtol=1e-12)


def test_package_files():
    for name in ("LICENSE", "CHANGELOG.md", "CITATION.cff"):
        assert os.path.getsize(os.path.join(ROOT, name)) > 100, name
    assert os.path.exists(os.path.join(os.path.dirname(strux.__file__), "py.typed"))


def test_plot_when_matplotlib_is_installed(tmp_path):
    pytest.importorskip("matplotlib")
    from strux.bench import report
    row = {"family": "fftconv", "case": "c", "strux": {"min_ms": 1.0, "median_ms": 1.1, "max_ms": 1.5},
           "baselines": [{"name": "numpy", "min_ms": 2.0, "median_ms": 2.2, "max_ms": 3.0, "speedup": 2.0}]}
    assert report.plot(str(tmp_path / "p.png"), [row, dict(row, family="ks")])
    assert (tmp_path / "p.png").stat().st_size > 1000
