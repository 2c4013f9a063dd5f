"""Block Toeplitz on the GPU (strux._cuda.BlockToeplitzCUDA) against float64 loops."""
import numpy as np
import pytest

from cuda_common import _cuda, needs_gpu, ref_toeplitz, rel, torch

pytestmark = needs_gpu

TOL = {"float32": 2e-5, "float64": 1e-12}
SIZES = [(1, 1, 1), (5, 3, 4), (7, 2, 3), (13, 4, 6), (32, 3, 5), (6, 37, 300)]


def to_layout(x, layout):
    """(Nt, n, R) → the layout's shape."""
    return x if layout == "time-major" else np.ascontiguousarray(x.transpose(1, 0, 2))


def from_layout(x, layout):
    return x if layout == "time-major" else x.transpose(1, 0, 2)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["time-major", "space-major"])
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("R", [None, 1, 3, 19])
@pytest.mark.parametrize("algo", [0, 1, 2])
def test_matvec_rmatvec(dtype, layout, size, R, algo):
    Nt, Nd, Nm = size
    rng = np.random.default_rng()
    blocks = rng.standard_normal((Nt, Nd, Nm))
    op = _cuda.BlockToeplitzCUDA(torch.tensor(blocks, dtype=getattr(torch, dtype), device="cuda"), layout, algo)
    assert op.shape == (Nt * Nd, Nt * Nm)
    r = 1 if R is None else R
    m = rng.standard_normal((Nt, Nm, r))
    d = rng.standard_normal((Nt, Nd, r))
    for x, adj in ((m, False), (d, True)):
        xin = to_layout(x, layout)
        if R is None:
            xin = xin[..., 0]
        t = torch.tensor(xin, dtype=getattr(torch, dtype), device="cuda")
        y = op.rmatvec(t) if adj else op.matvec(t)
        assert y.dtype == t.dtype and y.dim() == t.dim()
        got = y.double().cpu().numpy()
        if R is None:
            got = got[..., None]
        want = ref_toeplitz(blocks, x, adjoint=adj)
        assert rel(from_layout(got, layout), want) < TOL[dtype]


def test_adjoint_dot_product():
    Nt, Nd, Nm = 40, 6, 9
    blocks = torch.randn(Nt, Nd, Nm, dtype=torch.float64, device="cuda")
    op = _cuda.BlockToeplitzCUDA(blocks)
    m = torch.randn(Nt, Nm, dtype=torch.float64, device="cuda")
    d = torch.randn(Nt, Nd, dtype=torch.float64, device="cuda")
    a = float((op.matvec(m) * d).sum())
    b = float((m * op.rmatvec(d)).sum())
    assert abs(a - b) < 1e-10 * max(abs(a), 1.0)


def test_from_lti():
    ns, Nd, Nm, Nt = 4, 3, 2, 9
    rng = np.random.default_rng()
    A = rng.standard_normal((ns, ns)) * 0.4
    B = rng.standard_normal((ns, Nm))
    C = rng.standard_normal((Nd, ns))
    D = rng.standard_normal((Nd, Nm))
    blocks = np.stack([C @ np.linalg.matrix_power(A, t) @ B for t in range(Nt)])
    blocks[0] += D
    g = lambda x: torch.tensor(x, device="cuda")  # noqa: E731
    op = _cuda.BlockToeplitzCUDA.from_lti(g(A), g(B), g(C), g(D), Nt=Nt)
    m = rng.standard_normal((Nt, Nm, 1))
    got = op.matvec(g(m[..., 0])).cpu().numpy()[..., None]
    assert rel(got, ref_toeplitz(blocks, m)) < 1e-12


def test_from_fhat_shares_spectrum():
    blocks = torch.randn(6, 2, 3, device="cuda")
    op = _cuda.BlockToeplitzCUDA(blocks)
    op2 = _cuda.BlockToeplitzCUDA.from_fhat(op.fhat, 6, layout="space-major")
    m = torch.randn(6, 3, device="cuda")
    assert rel(op2.matvec(m.t().contiguous()).t(), op.matvec(m)) < 1e-6


def test_non_contiguous_vector():
    blocks = torch.randn(8, 3, 4, dtype=torch.float64, device="cuda")
    op = _cuda.BlockToeplitzCUDA(blocks)
    m = torch.randn(4, 8, dtype=torch.float64, device="cuda").t()
    want = ref_toeplitz(blocks.cpu().numpy(), m.cpu().numpy()[..., None])[..., 0]
    assert rel(op.matvec(m), want) < 1e-12


def test_nan_propagates():
    blocks = torch.randn(5, 2, 3, device="cuda")
    op = _cuda.BlockToeplitzCUDA(blocks)
    m = torch.randn(5, 3, device="cuda")
    m[2, 1] = float("nan")
    assert torch.isnan(op.matvec(m)).any()


@pytest.mark.parametrize("algo", [0, 1, 2])
def test_large_vs_torch_recipe(algo):
    Nt, Nd, Nm = 200, 20, 300
    blocks = torch.randn(Nt, Nd, Nm, dtype=torch.float64, device="cuda")
    op = _cuda.BlockToeplitzCUDA(blocks.float(), algo=algo)
    n = _cuda.toeplitz_nfft(Nt)
    F = torch.fft.rfft(blocks, n=n, dim=0)
    m = torch.randn(Nt, Nm, 16, dtype=torch.float64, device="cuda")
    want = torch.fft.irfft(F @ torch.fft.rfft(m, n=n, dim=0), n=n, dim=0)[:Nt]
    assert rel(op.matvec(m.float()), want) < 1e-5
    wantT = torch.fft.irfft(F.conj().transpose(1, 2) @ torch.fft.rfft(want, n=n, dim=0), n=n, dim=0)[:Nt]
    assert rel(op.rmatvec(want.float()), wantT) < 1e-5


@pytest.mark.parametrize("call, arg, exc", [
    (lambda op: op.matvec(torch.randn(8, 5, device="cuda")), "m", ValueError),
    (lambda op: op.matvec(torch.randn(8, device="cuda")), "m", ValueError),
    (lambda op: op.rmatvec(torch.randn(8, 4, device="cuda")), "d", ValueError),
    (lambda op: op.matvec(torch.randn(8, 4, device="cuda", dtype=torch.float64)), "m", TypeError),
    (lambda op: op.matvec(torch.randn(8, 4)), "m", ValueError),
    (lambda op: _cuda.BlockToeplitzCUDA(torch.randn(8, 3, device="cuda")), "blocks", ValueError),
    (lambda op: _cuda.BlockToeplitzCUDA(torch.randn(8, 3, 4, device="cuda").half()), "blocks", TypeError),
    (lambda op: _cuda.BlockToeplitzCUDA(torch.randn(8, 3, 4, device="cuda"), layout="row"), "layout", ValueError),
    (lambda op: _cuda.BlockToeplitzCUDA.from_fhat(op.fhat, 3), "fhat", ValueError),
    (lambda op: _cuda.BlockToeplitzCUDA(torch.randn(8, 3, 4, device="cuda"), algo=3), "algo", ValueError),
])
def test_bad_inputs(call, arg, exc):
    op = _cuda.BlockToeplitzCUDA(torch.randn(8, 3, 4, device="cuda"))
    with pytest.raises(exc, match=f"'{arg}'"):
        call(op)
