"""strux.torch.CirculantSSM and DiagonalSSM: shapes, argument checks, the recurrence against a
plain float64 time loop in the spatial domain (the proposal's ‖h_spatial − IFFT(ĥ_scan)‖∞ <
1e-4 in float32), torch.autograd.gradcheck in float64, CUDA against CPU where there is a GPU.
Skipped without PyTorch (CI has none)."""
import pytest

torch = pytest.importorskip("torch")

from torch.func import functional_call  # noqa: E402

import strux.torch as st  # noqa: E402

F64 = torch.float64
LAYERS = [("circ", dict(p=1)), ("block2", dict(p=2)), ("block4", dict(p=4)),
          ("real01", dict(kind="real01")), ("real11", dict(kind="real11")), ("complex", dict(kind="complex"))]


def make(kw, d, n, **extra):
    return st.CirculantSSM(d, n, **kw, **extra) if "p" in kw else st.DiagonalSSM(d, n, **kw, **extra)


@pytest.mark.parametrize("name,kw", LAYERS)
def test_shapes_and_gradients_flow(name, kw):
    torch.manual_seed(0)
    B, T, d, n = 3, 17, 12, 16
    layer = make(kw, d, n)
    x = torch.randn(B, T, d, requires_grad=True)
    y, h = layer(x, return_state=True)
    assert y.shape == (B, T, d) and y.dtype == torch.float32
    assert h.shape == ((B, T, n // 2) if name == "complex" else (B, T, n))
    y.square().mean().backward()
    assert x.grad.shape == x.shape and torch.isfinite(x.grad).all()
    for pname, prm in layer.named_parameters():
        assert prm.grad is not None and torch.isfinite(prm.grad).all(), pname


@pytest.mark.parametrize("name,kw", LAYERS)
def test_recurrence_matches_float64_spatial_loop(name, kw):
    """The seed's numerical criterion: ‖h_spatial − IFFT(ĥ_scan)‖∞ < 1e-4 in float32 (n = 64)."""
    torch.manual_seed(1)
    B, T, d, n = 2, 64, 32, 64
    layer = make(kw, d, n)
    with torch.no_grad():
        x = torch.randn(B, T, d)
        h0 = torch.randn(B, n // 2, dtype=torch.complex64) if name == "complex" else torch.randn(B, n)
        h = layer(x, h0=h0, return_state=True)[1]
        want = st.ssm.reference_states(layer, x, h0)
    err = float((h.to(want.dtype) - want).abs().max())
    assert err < 1e-4, (err, float(want.abs().max()))


def test_transitions_are_stable_and_block_mixing_rows_sum_to_r():
    torch.manual_seed(2)
    layer = st.CirculantSSM(8, 32, p=4)
    x = 2 * torch.randn(2, 9, 8)
    with torch.no_grad():
        a_hat = layer.transition(x)                                   # (B, T, p, p, F)
        rows = a_hat.abs().sum(dim=3)                                 # (B, T, p, F)
        r = torch.sigmoid(layer.r_proj(x)).view(2, 9, 4, -1)
    assert torch.allclose(rows, r, atol=1e-6) and float(rows.max()) < 1
    # the spectral radius of every step is below 1 (the infinity norm of each frequency's block)
    A = st.ssm._dense_transitions(layer, x)
    assert float(torch.linalg.eigvals(A).abs().max()) < 1


@pytest.mark.parametrize("name,kw", [("circ", dict(p=1)), ("block2", dict(p=2)), ("real01", dict(kind="real01")),
                                     ("real11", dict(kind="real11")), ("complex", dict(kind="complex"))])
def test_gradcheck_float64(name, kw):
    torch.manual_seed(3)
    B, T, d, n = 2, 5, 3, 8
    layer = make(kw, d, n, dtype=F64)
    names = [k for k, _ in layer.named_parameters()]
    params = tuple(prm.detach().clone().requires_grad_() for prm in layer.parameters())
    x = torch.randn(B, T, d, dtype=F64, requires_grad=True)

    def f(x, *ps):
        return functional_call(layer, dict(zip(names, ps)), (x,))

    assert torch.autograd.gradcheck(f, (x,) + params, eps=1e-6, atol=1e-6, rtol=1e-5)


def test_h0_and_argument_errors():
    torch.manual_seed(4)
    layer = st.CirculantSSM(4, 8)
    x = torch.randn(1, 3, 4)
    h0 = torch.randn(1, 8)
    with torch.no_grad():
        h_full = layer(x, return_state=True)[1]
        h_tail = layer(x[:, 1:], h0=h_full[:, 0], return_state=True)[1]
    assert torch.allclose(h_tail, h_full[:, 1:], atol=1e-6)
    assert layer(x, h0=h0).shape == (1, 3, 4)
    with pytest.raises(ValueError, match="'p'"):
        st.CirculantSSM(4, 8, p=3)
    with pytest.raises(ValueError, match="'n'"):
        st.CirculantSSM(4, 1)
    with pytest.raises(ValueError, match="'kind'"):
        st.DiagonalSSM(4, 8, kind="dense")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("name,kw", LAYERS)
def test_cuda_matches_cpu(name, kw):
    torch.manual_seed(5)
    B, T, d, n = 4, 300, 32, 64
    layer = make(kw, d, n)
    x = torch.randn(B, T, d, requires_grad=True)
    y = layer(x)
    y.square().mean().backward()
    gx, gp = x.grad.clone(), [p.grad.clone() for p in layer.parameters()]
    layer_c = layer.cuda()
    layer_c.zero_grad()
    xc = x.detach().cuda().requires_grad_()
    yc = layer_c(xc)
    yc.square().mean().backward()
    rel = lambda a, b: float((a.cpu() - b).norm() / b.norm())  # noqa: E731
    assert rel(yc, y) < 1e-4 and rel(xc.grad, gx) < 1e-3
    for p, g in zip(layer_c.parameters(), gp):
        assert rel(p.grad, g) < 1e-3
