"""strux.dist.BlockToeplitzGroup: every rank of the grid in this process (CPU ranks are threads;
CUDA ranks one GPU each, through NCCL), against the serial operator. No MPI launcher needed."""
import numpy as np
import pytest

import strux
from strux.toeplitz import BlockToeplitz as Serial

try:
    from strux import _dist  # noqa: F401
    HAVE = True
except ImportError:
    HAVE = False

pytestmark = pytest.mark.skipif(not HAVE, reason="strux built without its distributed operators (MPI)")


def _case(P, layout, vectors, R, dtype, grid=None, devices=None, to=lambda a, q: a, back=lambda a: a,
          shape=(6, 7, 5)):
    import strux.dist
    rng = np.random.default_rng(P)
    Nt, Nd, Nm = shape
    blocks = rng.standard_normal((Nt, Nd, Nm))
    tail = () if R is None else (R,)
    tm = layout == "time-major"
    m = rng.standard_normal(((Nt, Nm) if tm else (Nm, Nt)) + tail)
    d = rng.standard_normal(((Nt, Nd) if tm else (Nd, Nt)) + tail)
    S = Serial(blocks, layout=layout)
    G = strux.dist.BlockToeplitzGroup(to(blocks.astype(dtype), 0), devices=devices or ["cpu"] * P, grid=grid,
                                      layout=layout, vectors=vectors, rhs=R)
    dist = vectors == "distributed"
    cut = (lambda x, s: x[:, s]) if tm else (lambda x, s: x[s])
    # Rank q's parts on its own device (devices[q]).
    ms = [to(cut(m, r.cols).astype(dtype), q) if not dist or r.grid_pos[0] == 0 else None
          for q, r in enumerate(G.ranks)]
    ds = [to(cut(d, r.rows).astype(dtype), q) if not dist or r.grid_pos[1] == 0 else None
          for q, r in enumerate(G.ranks)]
    tol = 1e-5 if dtype == np.float32 else 1e-11
    d_ref, m_ref = S.matvec(m), S.rmatvec(d)
    for r, got in zip(G.ranks, G.matvec(ms)):
        assert (got is None) == (dist and r.grid_pos[1] != 0)
        if got is not None:
            want = cut(d_ref, r.rows)
            assert np.linalg.norm(back(got) - want) <= tol * np.linalg.norm(want)
    for r, got in zip(G.ranks, G.rmatvec(ds)):
        assert (got is None) == (dist and r.grid_pos[0] != 0)
        if got is not None:
            want = cut(m_ref, r.cols)
            assert np.linalg.norm(back(got) - want) <= tol * np.linalg.norm(want)
    return G


@pytest.mark.parametrize("P", [1, 2, 3, 4])
@pytest.mark.parametrize("layout", ["time-major", "space-major"])
@pytest.mark.parametrize("vectors", ["replicated", "distributed"])
def test_group_threads(P, layout, vectors):
    G = _case(P, layout, vectors, None, np.float64)
    assert G.grid[0] * G.grid[1] == P
    _case(P, layout, vectors, 3, np.float32, grid=(1, P))
    _case(P, layout, vectors, 2, np.float64, grid=(P, 1))


def _ref(blocks, m, adjoint):
    """The contract's sums in float64 numpy, time-major: d[i] = sum_{j<=i} blocks[i-j] @ m[j]
    (matvec) or m[j] = sum_{i>=j} blocks[i-j].T @ d[i] (adjoint)."""
    Nt = blocks.shape[0]
    out = np.zeros((Nt, blocks.shape[2 if adjoint else 1]) + m.shape[2:])
    for a in range(Nt):
        for b in range(a + 1):
            if adjoint:
                out[b] += blocks[a - b].T @ m[a]
            else:
                out[a] += blocks[a - b] @ m[b]
    return out


@pytest.mark.parametrize("P, Nd, Nm, grid", [(2, 1, 4, (2, 1)), (4, 1, 4, (4, 1)), (2, 5, 1, (1, 2)),
                                             (4, 5, 1, (1, 4)), (4, 1, 1, (2, 2)), (4, 3, 5, (4, 1)),
                                             (4, 1, 1, None), (2, 1, 1, None)])
@pytest.mark.parametrize("layout", ["time-major", "space-major"])
@pytest.mark.parametrize("vectors", ["replicated", "distributed"])
def test_group_threads_empty_blocks(P, Nd, Nm, grid, layout, vectors):
    """Grids that leave some thread ranks an empty block (r > Nd or c > Nm; grid=None where no
    grid gives every rank work): every rank's part against the numpy sums, on fresh inputs."""
    import strux.dist
    seed = int(np.random.SeedSequence().entropy % 2**63)  # fresh inputs each run; the seed in any failure
    rng = np.random.default_rng(seed)
    for R, dtype, tol in ((None, np.float64, 1e-12), (3, np.float64, 1e-12), (2, np.float32, 1e-5)):
        Nt = int(rng.integers(3, 9))
        blocks = rng.standard_normal((Nt, Nd, Nm))
        tail = () if R is None else (R,)
        m, d = rng.standard_normal((Nt, Nm) + tail), rng.standard_normal((Nt, Nd) + tail)
        d_ref, m_ref = _ref(blocks, m, False), _ref(blocks, d, True)
        tm = layout == "time-major"
        lay = (lambda x: x) if tm else (lambda x: np.ascontiguousarray(np.swapaxes(x, 0, 1)))
        G = strux.dist.BlockToeplitzGroup(blocks.astype(dtype), devices=["cpu"] * P, grid=grid, layout=layout,
                                          vectors=vectors, rhs=R, options={"chunks": 2})
        r, c = G.grid
        assert r * c == P and (grid is None or (r, c) == grid)
        assert any(k.rows.stop == k.rows.start or k.cols.stop == k.cols.start for k in G.ranks)
        dist = vectors == "distributed"
        ms = [k.part_m(lay(m)).astype(dtype) if not dist or k.grid_pos[0] == 0 else None for k in G.ranks]
        ds = [k.part_d(lay(d)).astype(dtype) if not dist or k.grid_pos[1] == 0 else None for k in G.ranks]
        for k, got in zip(G.ranks, G.matvec(ms)):
            assert (got is None) == (dist and k.grid_pos[1] != 0)
            if got is not None:
                want = k.part_d(lay(d_ref))
                assert got.shape == want.shape and got.dtype == dtype, seed
                assert np.linalg.norm(got - want) <= tol * np.linalg.norm(want), seed
        for k, got in zip(G.ranks, G.rmatvec(ds)):
            assert (got is None) == (dist and k.grid_pos[0] != 0)
            if got is not None:
                want = k.part_m(lay(m_ref))
                assert got.shape == want.shape and got.dtype == dtype, seed
                assert np.linalg.norm(got - want) <= tol * np.linalg.norm(want), seed


def test_group_errors():
    import strux.dist
    b = np.zeros((4, 5, 6))
    with pytest.raises(ValueError, match="grid"):
        strux.dist.BlockToeplitzGroup(b, devices=["cpu"] * 2, grid=(3, 1))
    with pytest.raises(ValueError, match="devices"):
        strux.dist.BlockToeplitzGroup(b, devices=[])
    G = strux.dist.BlockToeplitzGroup(b, devices=["cpu"] * 2, grid=(1, 2))
    with pytest.raises(ValueError, match="argument 'm'"):
        G.matvec([np.zeros((4, 3)), np.zeros((4, 4))])
    with pytest.raises(TypeError, match="dtype"):
        G.matvec([np.zeros((4, 3), np.float32), np.zeros((4, 3), np.float32)])
    with pytest.raises(ValueError, match="list of 2"):
        G.matvec(np.zeros((4, 3)))


def _gpus():
    try:
        import torch
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except ImportError:
        return 0


@pytest.mark.skipif(_gpus() < 2 or not HAVE or not _dist.have_nccl(), reason="needs 2 GPUs, torch and NCCL")
@pytest.mark.parametrize("vectors", ["replicated", "distributed"])
def test_group_two_gpus(vectors):
    import torch
    to = lambda a, q: torch.from_numpy(np.ascontiguousarray(a)).cuda(q)  # noqa: E731
    back = lambda a: a.cpu().numpy()  # noqa: E731
    for layout in ("time-major", "space-major"):
        _case(2, layout, vectors, None, np.float32, devices=[0, 1], to=to, back=back)
        _case(2, layout, vectors, 3, np.float64, grid=(2, 1), devices=[0, 1], to=to, back=back)
        _case(2, layout, vectors, 2, np.float64, grid=(1, 2), devices=[0, 1], to=to, back=back)


@pytest.mark.skipif(_gpus() < 2 or not HAVE or not _dist.have_nccl(), reason="needs 2 GPUs, torch and NCCL")
@pytest.mark.parametrize("vectors", ["replicated", "distributed"])
@pytest.mark.parametrize("shape, grid", [((6, 1, 4), (2, 1)), ((5, 4, 1), (1, 2)), ((4, 1, 1), None)])
def test_group_two_gpus_empty_blocks(shape, grid, vectors):
    """Grids that leave one GPU an empty block (r > Nd or c > Nm; grid=None where none gives both
    GPUs work): that rank holds no F̂, passes its empty parts and takes part in every reduction."""
    import torch
    to = lambda a, q: torch.from_numpy(np.ascontiguousarray(a)).cuda(q)  # noqa: E731
    back = lambda a: a.cpu().numpy()  # noqa: E731
    for layout in ("time-major", "space-major"):
        for R, dtype in ((None, np.float32), (2, np.float64)):
            G = _case(2, layout, vectors, R, dtype, grid=grid, devices=[0, 1], to=to, back=back, shape=shape)
            assert any(k.rows.stop == k.rows.start or k.cols.stop == k.cols.start for k in G.ranks)


@pytest.mark.skipif(_gpus() < 2 or not HAVE or not _dist.have_nccl(), reason="needs 2 GPUs, torch and NCCL")
def test_group_two_gpus_parts():
    """part_m / part_d of a group's rank put the part on that rank's GPU; a part on another GPU
    is a ValueError that names the rank's device."""
    import torch
    import strux.dist
    rng = np.random.default_rng(0)
    Nt, Nd, Nm = 6, 7, 5
    blocks = rng.standard_normal((Nt, Nd, Nm))
    m = rng.standard_normal((Nt, Nm))
    G = strux.dist.BlockToeplitzGroup(torch.from_numpy(blocks).cuda(0), devices=[0, 1], grid=(1, 2))
    m0 = torch.from_numpy(m).cuda(0)
    parts = [r.part_m(m0) for r in G.ranks]
    assert [p.device.index for p in parts] == [0, 1]
    want = Serial(blocks).matvec(m)
    for got in G.matvec(parts):
        assert np.linalg.norm(got.cpu().numpy() - want) <= 1e-11 * np.linalg.norm(want)
    with pytest.raises(ValueError, match=r"devices\[1\]"):
        G.matvec([parts[0], parts[0]])


def _example():
    import importlib.util
    import os
    import sys
    here = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "inverse_problem")
    sys.path.insert(0, here)
    spec = importlib.util.spec_from_file_location("inverse_problem_run", os.path.join(here, "run.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_inverse_problem_two_cpu_ranks(tmp_path):
    """examples/inverse_problem --gpus 2 on the CPU (two thread ranks) solves the same problem as
    one device: the same F to 1e-12, and the same CG solve up to the order of its sums (the two
    ranks add their partial products in another order, so CG may stop one iteration apart and
    the recovery error agrees to about 1e-6, not to the last bit)."""
    run = _example()
    small = ["--small", "--n", "32", "--nc", "8", "--sensors", "4", "--nt", "12", "--out", str(tmp_path)]
    one = run.main(small)
    two = run.main(small + ["--gpus", "2"])
    assert two["devices_for_F"] == 2 and two["forward_check_rel"] < 1e-12
    assert abs(two["cg_iterations"] - one["cg_iterations"]) <= 1
    assert abs(two["recovery_rel_error"] - one["recovery_rel_error"]) < 1e-5 * one["recovery_rel_error"]


@pytest.mark.skipif(_gpus() < 2 or not HAVE or not _dist.have_nccl(), reason="needs 2 GPUs, torch and NCCL")
def test_inverse_problem_group_operator_two_gpus():
    """The example's F on two GPUs (GroupOperator: whole vectors on GPU 0) against the serial one."""
    import torch
    run = _example()
    rng = np.random.default_rng(1)
    Nt, Nd, Nm = 9, 6, 11
    blocks = rng.standard_normal((Nt, Nd, Nm))
    m, d = rng.standard_normal((Nt, Nm)), rng.standard_normal((Nt, Nd))
    F = run.GroupOperator(torch.from_numpy(blocks).cuda(0), [0, 1])
    S = Serial(blocks)
    got_d = F.matvec(torch.from_numpy(m).cuda(0))
    got_m = F.rmatvec(torch.from_numpy(d).cuda(0))
    assert got_d.device.index == 0 and got_m.device.index == 0
    for got, want in ((got_d, S.matvec(m)), (got_m, S.rmatvec(d))):
        assert np.linalg.norm(got.cpu().numpy() - want) <= 1e-11 * np.linalg.norm(want)
