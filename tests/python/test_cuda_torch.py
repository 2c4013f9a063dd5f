"""strux.torch custom ops on the GPU: gradcheck, torch.compile, CUDA graph capture."""
import pytest

from cuda_common import needs_gpu, rand, ref_fftconv, rel, torch

from strux import _cuda_toeplitz as _cuda  # noqa: E402

pytestmark = needs_gpu

import strux.torch  # noqa: E402,F401  (registers torch.ops.strux.*)

ops = torch.ops.strux


@pytest.mark.parametrize("mode", ["causal", "circular"])
def test_fftconv_gradcheck_float64(mode):
    B, H, L, Lk = 2, 3, 9, 4
    args = [rand(s, "float64").requires_grad_(True) for s in [(B, H, L), (H, Lk), (B, H, L), (B, H, L), (H,)]]
    assert torch.autograd.gradcheck(lambda *a: ops.fftconv(a[0], a[1], mode, *a[2:]), args)


def test_fftconv_grad_subset_of_inputs():
    u = rand((2, 3, 10), "float64").requires_grad_(True)
    k = rand((3, 12), "float64").requires_grad_(True)
    assert torch.autograd.gradcheck(lambda a, b: ops.fftconv(a, b, "causal", None, None, None), (u, k))


def test_fftconv_matches_reference_float16():
    u = rand((2, 4, 64), "float16")
    k = rand((4, 64), "float16") / 8
    y = ops.fftconv(u, k, "causal", None, None, None)
    assert rel(y, ref_fftconv(u.double().cpu(), k.double().cpu())) < 1e-2


def test_fftconv_opcheck():
    u = rand((2, 3, 9), "float32").requires_grad_(True)
    k = rand((3, 4), "float32").requires_grad_(True)
    skip = rand((3,), "float32").requires_grad_(True)
    torch.library.opcheck(ops.fftconv.default, (u, k, "causal", None, None, skip))


def test_fftconv_torch_compile():
    u = rand((2, 4, 50), "float32")
    k = rand((4, 20), "float32")
    post = rand((2, 4, 50), "float32")

    def f(u, k, post):
        return torch.tanh(ops.fftconv(u * 2, k, "causal", None, post, None)) + 1

    got = torch.compile(f, fullgraph=True)(u, k, post)
    assert rel(got, f(u, k, post)) < 1e-6


def test_fftconv_cuda_graph():
    u = rand((2, 4, 100), "float32")
    k = rand((4, 30), "float32")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            ops.fftconv(u, k, "causal", None, None, None)   # plans exist before capture
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = ops.fftconv(u, k, "causal", None, None, None)
    u.copy_(rand((2, 4, 100), "float32"))
    g.replay()
    torch.cuda.synchronize()
    assert rel(y, ref_fftconv(u.double().cpu(), k.double().cpu())) < 2e-5


@pytest.mark.parametrize("layout", ["time-major", "space-major"])
def test_toeplitz_ops_gradcheck(layout):
    Nt, Nd, Nm = 6, 2, 3
    op = _cuda.BlockToeplitzCUDA(torch.randn(Nt, Nd, Nm, dtype=torch.float64, device="cuda"))
    shape = (Nt, Nm) if layout == "time-major" else (Nm, Nt)
    m = torch.randn(*shape, dtype=torch.float64, device="cuda", requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: ops.toeplitz_matvec(op.fhat, x, Nt, layout), (m,))
    dshape = (Nt, Nd) if layout == "time-major" else (Nd, Nt)
    d = torch.randn(*dshape, dtype=torch.float64, device="cuda", requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: ops.toeplitz_rmatvec(op.fhat, x, Nt, layout), (d,))


def test_toeplitz_ops_cpu_path_matches_gpu():
    Nt, Nd, Nm = 7, 3, 4
    blocks = torch.randn(Nt, Nd, Nm, dtype=torch.float64, device="cuda")
    op = _cuda.BlockToeplitzCUDA(blocks)
    m = torch.randn(Nt, Nm, 2, dtype=torch.float64, device="cuda")
    gpu = ops.toeplitz_matvec(op.fhat, m, Nt, "time-major")
    cpu = ops.block_toeplitz_matvec(blocks.cpu(), m.cpu(), "time-major")   # the spectrum ops are CUDA only
    assert rel(gpu, cpu) < 1e-12


def test_toeplitz_compile_and_graph():
    Nt, Nd, Nm = 10, 3, 5
    op = _cuda.BlockToeplitzCUDA(torch.randn(Nt, Nd, Nm, device="cuda"))
    m = torch.randn(Nt, Nm, device="cuda")
    f = torch.compile(lambda x: ops.toeplitz_rmatvec(op.fhat, ops.toeplitz_matvec(op.fhat, x, Nt, "time-major"),
                                                     Nt, "time-major"), fullgraph=True)
    want = op.rmatvec(op.matvec(m))
    assert rel(f(m), want) < 1e-6
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        ops.toeplitz_matvec(op.fhat, m, Nt, "time-major")
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        d = ops.toeplitz_matvec(op.fhat, m, Nt, "time-major")
    g.replay()
    torch.cuda.synchronize()
    assert rel(d, op.matvec(m)) < 1e-6
