"""Block Toeplitz on the GPU with a precision (every configuration: 16-bit F̂, phases in different
precisions, compute dtypes other than the vectors')
against float64 loops, with tolerances from the error model (strux.toeplitz.error_estimate), and
from_lti with torch sparse matrices on the GPU."""
import numpy as np
import pytest

from cuda_common import needs_gpu, ref_toeplitz, rel, torch

from strux import BlockToeplitz
from strux import _cuda_toeplitz as _cuda  # noqa: E402
from strux import toeplitz as T

pytestmark = needs_gpu

CANDIDATES = T.precision_candidates(cuda=True)
DOUBLE = {k: "double" for k in ("broadcast", "fft", "product", "ifft", "reduce")}
# (2, 7, 1028) to (3, 9, 1031) reach the 16-bit kernels' unrolled loops (4 pairs per load; Nm % 4 != 0
# with Nm % 4 == 2 and few rows: the adjoint's aligned packs, adjoint_shift, past its 4-row loop);
# (40, 6, 20), (6, 37, 300): the matvec with 8 and 16 lanes per row; the last two have so few
# (frequency, column) pairs that the adjoint splits the rows among threads.
SIZES = [(1, 1, 1), (7, 3, 5), (13, 4, 6), (40, 6, 20), (6, 37, 300), (4, 101, 131), (9, 5, 7), (2, 7, 1028),
         (3, 10, 1030), (3, 9, 1031), (3, 40, 1030), (3, 300, 9), (2, 520, 12)]


def name(c):
    return "-".join(c[k][0] for k in ("fft", "product", "ifft")) + "-" + c["fhat"]


def bound(c, dtype, nt, nd, nm):
    return T.error_estimate(c, dtype, nt, nd, nm) + T.error_estimate(DOUBLE, np.float64, nt, nd, nm)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["time-major", "space-major"])
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("R", [None, 3])
@pytest.mark.parametrize("c", CANDIDATES, ids=name)
def test_every_cuda_configuration_within_its_bound(c, dtype, layout, size, R):
    Nt, Nd, Nm = size
    rng = np.random.default_rng(1)
    blocks = rng.standard_normal((Nt, Nd, Nm))
    tb = torch.tensor(blocks, dtype=getattr(torch, dtype), device="cuda")
    op = _cuda.BlockToeplitzCUDA(tb, layout, precision=c)
    b64 = tb.double().cpu().numpy()
    r = 1 if R is None else R
    for n, adj in ((Nm, False), (Nd, True)):
        x = rng.standard_normal((Nt, n, r))
        xin = x if layout == "time-major" else np.ascontiguousarray(x.transpose(1, 0, 2))
        if R is None:
            xin = xin[..., 0]
        t = torch.tensor(xin, dtype=getattr(torch, dtype), device="cuda")
        y = op.rmatvec(t) if adj else op.matvec(t)
        assert y.dtype == t.dtype and y.shape[:2] == ((Nt, Nm if adj else Nd) if layout == "time-major"
                                                      else (Nm if adj else Nd, Nt))
        got = y.double().cpu().numpy()
        if R is None:
            got = got[..., None]
        if layout == "space-major":
            got = got.transpose(1, 0, 2)
        xr = t.double().cpu().numpy()
        xr = (xr if R is not None else xr[..., None])
        if layout == "space-major":
            xr = xr.transpose(1, 0, 2)
        want = ref_toeplitz(b64, xr, adjoint=adj)
        assert rel(got, want) <= bound(c, dtype, Nt, Nd, Nm)
        rms = T.error_estimate(c, dtype, Nt, Nd, Nm, rms=True)
        if c["fhat"] != "auto" and Nt * Nd * Nm >= 1000:  # the 16-bit F̂ is really used
            assert rel(got, want) >= rms / 8


def test_half_spectrum_is_half_the_bytes_and_cuda_tol():
    blocks = torch.randn(16, 8, 12, device="cuda")
    c64 = _cuda.BlockToeplitzCUDA(blocks)
    h = _cuda.BlockToeplitzCUDA(blocks, precision={"fhat": "bfloat16"})
    assert h.fhat.numel() * h.fhat.element_size() * 2 == c64.fhat.numel() * c64.fhat.element_size()
    op = BlockToeplitz(blocks, tol=1e-3)
    assert op.precision["fhat"] != "auto" and op.error_bound <= 1e-3
    with pytest.raises(ValueError, match="'precision'"):
        _cuda.BlockToeplitzCUDA(blocks, algo=0, precision={"fft": "double", "product": "single"})
    assert _cuda.BlockToeplitzCUDA(blocks, precision={"fft": "double"}).mixed


def test_half_spectrum_small_values():
    blocks = 1e-9 * torch.randn(20, 3, 4, device="cuda")
    op = _cuda.BlockToeplitzCUDA(blocks, precision={"fhat": "float16"})
    m = torch.randn(20, 4, device="cuda")
    want = ref_toeplitz(blocks.double().cpu().numpy(), m.double().cpu().numpy()[..., None])[..., 0]
    assert rel(op.matvec(m), want) <= bound(op.precision, "float32", 20, 3, 4)


@pytest.mark.parametrize("nd,nm", [(2, 5), (5, 2)])
def test_from_lti_torch_sparse_cuda(nd, nm):
    g = torch.Generator().manual_seed(0)
    ns = 12
    A = (0.4 * torch.rand(ns, ns, generator=g, dtype=torch.float64) * (torch.rand(ns, ns, generator=g) < 0.2)
         + 0.3 * torch.eye(ns, dtype=torch.float64))
    B = torch.randn(ns, nm, generator=g, dtype=torch.float64)
    C = torch.randn(nd, ns, generator=g, dtype=torch.float64)
    op = BlockToeplitz.from_lti(A.to_sparse_csr().cuda(), B.cuda(), C.cuda(), 9)
    ref = np.stack([C.numpy() @ np.linalg.matrix_power(A.numpy(), t) @ B.numpy() for t in range(9)])
    m = torch.randn(9, nm, dtype=torch.float64, device="cuda")
    want = ref_toeplitz(ref, m.cpu().numpy()[..., None])[..., 0]
    assert rel(op.matvec(m), want) < 1e-12
