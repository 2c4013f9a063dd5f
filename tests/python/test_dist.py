"""strux.dist under MPI: tests/mpi/dist_cases.py run by mpirun with 1, 2 and 4 ranks (oversubscribed
on small machines; --allow-run-as-root for CI, which runs as root), against the serial operator.
Skipped without mpirun, mpi4py or a strux built with MPI. The CUDA case (torch tensors, NCCL,
one GPU per rank) runs where torch sees at least two GPUs and strux has NCCL."""
import os
import shutil
import subprocess
import sys

import pytest

import strux
import strux.dist

CASES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mpi", "dist_cases.py")
MPIRUN = shutil.which("mpirun")

pytestmark = pytest.mark.skipif(MPIRUN is None or not strux.dist.available(),
                                reason="needs mpirun, mpi4py and strux built with MPI")


def run(np_, *extra, timeout=300, script=None, expect=None):
    env = dict(os.environ)
    # The ranks import the strux this test imported, and use one thread each.
    root = os.path.dirname(os.path.dirname(os.path.abspath(strux.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["OMP_NUM_THREADS"] = "1"
    cmd = [MPIRUN, "-np", str(np_), "--oversubscribe", "--allow-run-as-root",
           "--mca", "btl_vader_single_copy_mechanism", "none", "-x", "PYTHONPATH", "-x",
           "OMP_NUM_THREADS", sys.executable, *(script or [CASES]), *extra]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-4000:]
    if expect is None:
        assert out.count(" passed, 0 failed") == np_, out[-4000:]
    else:
        assert expect in out, out[-4000:]
    return out


@pytest.mark.parametrize("np_", [1, 2, 4])
def test_dist_against_serial(np_):
    run(np_, *(["--quick"] if np_ == 1 else []))


def test_cli_bench(tmp_path):
    path = tmp_path / "dist.json"
    run(2, "bench", "--family", "toeplitz-dist", "--device", "cpu", "--quick", "--json", str(path),
        script=["-m", "strux.cli"], expect="adjoint identity")
    import json
    res = json.loads(path.read_text())
    assert res["ranks"] == 2 and res["grid"][0] * res["grid"][1] == 2
    for phase in ("wall", "broadcast", "fft", "product", "ifft", "reduce", "total"):
        assert res["matvec"][phase + "_s"] >= 0 and res["rmatvec"][phase + "_s"] >= 0


def test_grid_model():
    # More ranks than rows: the model leaves no rank without rows or columns while a grid allows it.
    assert strux.dist.choose_grid(4, 16, 2, 1000) in ((1, 4), (2, 2))
    assert strux.dist.choose_grid(4, 16, 1, 1000) == (1, 4)
    assert strux.dist.choose_grid(4, 16, 1000, 1) == (4, 1)
    r, c = strux.dist.choose_grid(8, 64, 4096, 4096)
    assert r * c == 8
    assert strux.dist.block_range(10, 3, 2) == slice(6, 10)
    assert strux.dist.block_range(1, 4, 0) == slice(0, 0) and strux.dist.block_range(1, 4, 3) == slice(0, 1)
    # No grid gives every rank work (Nd = Nm = 1, or Nd = 3 and Nm = 1 on 4 ranks): some grid, not an error.
    for P, Nd, Nm in ((4, 1, 1), (2, 1, 1), (4, 3, 1), (6, 2, 2)):
        r, c = strux.dist.choose_grid(P, 8, Nd, Nm)
        assert r >= 1 and c >= 1 and r * c == P


@pytest.mark.parametrize("np_", [2, 4])
def test_dist_empty_blocks(np_):
    """Grids with r > Nd or c > Nm (some ranks hold an empty block), and grid=None where no grid
    gives every rank work: every rank against a numpy evaluation of the contract's sums."""
    run(np_, script=[os.path.join(os.path.dirname(CASES), "dist_empty_blocks.py")])


def _gpus():
    try:
        import torch
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except ImportError:
        return 0


@pytest.mark.skipif(_gpus() < 2 or not strux.dist._module().have_nccl(), reason="needs 2 GPUs, torch and NCCL")
def test_dist_cuda_two_gpus():
    run(2, "--device", "cuda", "--quick")
