"""strux.torch nn.Modules on CPU tensors: FFTConv (filter per call, float32 filter with half
inputs), KSLinear (weights=, pattern order, batch dimensions, bias, Monarch / butterfly builders),
BlockToeplitz (blocks gradient). Skipped without PyTorch (CI has none)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import ref_fftconv  # noqa: E402
import ref_ks  # noqa: E402
import ref_toeplitz  # noqa: E402
import strux.torch as st  # noqa: E402

F64 = torch.float64


def rel(a, b):
    a, b = torch.as_tensor(np.asarray(a, dtype=np.float64)), torch.as_tensor(np.asarray(b, dtype=np.float64))
    return float((a - b).norm() / max(float(b.norm()), 1e-300))


def det(t):
    return t.detach().double().numpy()


# ---- FFTConv ----------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["causal", "circular"])
def test_fftconv_module_matches_reference_and_grads(mode):
    B, H, L = 2, 3, 32
    conv = st.FFTConv(L, dtype=F64, mode=mode)
    u, k = torch.randn(B, H, L, dtype=F64, requires_grad=True), torch.randn(H, L, dtype=F64, requires_grad=True)
    pre, post, skip = torch.randn(B, H, L, dtype=F64), torch.randn(B, H, L, dtype=F64), torch.randn(H, dtype=F64)
    y = conv(u, k, pregate=pre, postgate=post, skip=skip)
    want = ref_fftconv.ref_fftconv(det(u), det(k), mode, det(pre), det(post), det(skip))
    assert y.dtype == F64 and rel(det(y), want) < 1e-12
    dy = torch.randn_like(y)
    y.backward(dy)
    g = ref_fftconv.ref_fftconv_vjp(det(dy), det(u), det(k), mode, det(pre), det(post), det(skip))
    assert rel(det(u.grad), g[0]) < 1e-12 and rel(det(k.grad), g[1]) < 1e-12
    # the same module serves another filter (and a shorter one) on the next call
    k2 = torch.randn(H, 5, dtype=F64)
    assert rel(det(conv(u, k2)), ref_fftconv.ref_fftconv(det(u), det(k2), mode)) < 1e-12


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_fftconv_module_float32_filter_with_half_input(dtype):
    B, H, L = 2, 4, 64
    conv = st.FFTConv(L, dtype=dtype)
    u = torch.randn(B, H, L).to(dtype).requires_grad_()
    k = (torch.randn(H, L) / L).requires_grad_()                       # float32 filter
    post = torch.randn(B, H, L).to(dtype)
    y = conv(u, k, postgate=post)
    assert y.dtype == dtype and y.shape == (B, H, L)
    want = ref_fftconv.ref_fftconv(det(u), det(k), "causal", None, det(post))
    tol = 1e-2 if dtype == torch.float16 else 2e-2
    assert rel(det(y), want) < tol
    y.float().sum().backward()
    assert u.grad.dtype == dtype and k.grad.dtype == torch.float32 and torch.isfinite(k.grad).all()
    # same dtype for u and k works too
    assert conv(u.detach(), k.detach().to(dtype)).dtype == dtype


def test_fftconv_module_errors():
    conv = st.FFTConv(16, dtype=torch.float32)
    with pytest.raises(ValueError, match="'u'"):
        conv(torch.randn(1, 2, 8), torch.randn(2, 3))
    with pytest.raises(TypeError, match="'u'"):
        conv(torch.randn(1, 2, 16, dtype=F64), torch.randn(2, 3))
    with pytest.raises(TypeError, match="'k'"):
        conv(torch.randn(1, 2, 16), torch.randn(2, 3, dtype=F64))
    with pytest.raises(ValueError, match="'seqlen'"):
        st.FFTConv(0)
    with pytest.raises(ValueError, match="'mode'"):
        st.FFTConv(8, mode="full")
    with pytest.raises(TypeError, match="'dtype'"):
        st.FFTConv(8, dtype=torch.int32)


def test_fftconv_module_compiles():
    conv = st.FFTConv(16, dtype=torch.float32)
    u, k = torch.randn(2, 3, 16), torch.randn(3, 16)
    f = torch.compile(lambda u, k: torch.tanh(conv(u, k)), backend="aot_eager", fullgraph=True)
    assert rel(det(f(u, k)), det(torch.tanh(conv(u, k)))) < 1e-6


# ---- KSLinear ---------------------------------------------------------------------------------

PS = [(2, 3, 4, 3), (4, 3, 5, 2)]          # 40 -> 18


def test_kslinear_weights_order_and_batch_dims():
    ws = [torch.randn(*p, dtype=F64) for p in PS]
    m = st.KSLinear(PS, bias=True, weights=ws)
    assert (m.in_features, m.out_features) == (40, 18)
    assert m.weights[0].dtype == F64 and m.bias.dtype == F64
    for w, w0 in zip(m.weights, ws):
        assert torch.equal(w.detach(), w0) and w.data_ptr() != w0.data_ptr()   # copied
    with torch.no_grad():
        m.bias.normal_()
    K = ref_ks.chain_dense([det(w) for w in ws], PS)                  # K = K_1 K_2, K_2 applied first
    x = torch.randn(2, 5, 40, dtype=F64)
    y = m(x)
    assert y.shape == (2, 5, 18)
    assert rel(det(y), det(x) @ K.T + det(m.bias)) < 1e-12
    # ksmm's order: the first listed is applied first -- the same layer from the reversed lists
    mk = st.KSLinear(PS[::-1], bias=False, weights=ws[::-1], order="ksmm")
    assert mk.patterns == PS and rel(det(mk(x)), det(x) @ K.T) < 1e-12
    # batch-size-last
    ml = st.KSLinear(PS, bias=True, layout="bsl", weights=ws)
    xl = torch.randn(40, 7, dtype=F64)
    assert rel(det(ml(xl)), K @ det(xl)) < 1e-12


def test_kslinear_gradcheck():
    m = st.KSLinear(PS, bias=True, dtype=F64)
    with torch.no_grad():
        m.bias.normal_()
    x = torch.randn(3, 2, 40, dtype=F64, requires_grad=True)
    params = [x, *m.weights, m.bias]

    def f(x, w1, w2, b):
        return torch.func.functional_call(m, {"weights.0": w1, "weights.1": w2, "bias": b}, (x,))
    assert torch.autograd.gradcheck(f, params, eps=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_kslinear_dtypes(dtype):
    m = st.KSLinear(PS, dtype=dtype)
    x = torch.randn(4, 40).to(dtype)
    y = m(x)
    assert y.dtype == dtype
    K = ref_ks.chain_dense([det(w) for w in m.weights], PS)
    tol = 1e-6 if dtype == torch.float32 else 2e-2
    assert rel(det(y), det(x) @ K.T) < tol
    y.float().sum().backward()
    assert all(w.grad.dtype == dtype for w in m.weights)


@pytest.mark.parametrize("patterns", [st.monarch(16, 4), st.monarch(12, 3), st.butterfly(16, 2), st.butterfly(27, 3)])
def test_kslinear_builders(patterns):
    m = st.KSLinear(patterns, bias=False, dtype=F64)
    n = m.in_features
    assert m.out_features == n
    K = ref_ks.chain_dense([det(w) for w in m.weights], patterns)
    x = torch.randn(5, n, dtype=F64)
    assert rel(det(m(x)), det(x) @ K.T) < 1e-12


def test_kslinear_errors():
    with pytest.raises(ValueError, match="'weights'"):
        st.KSLinear(PS, weights=[torch.randn(*PS[0])])
    with pytest.raises(ValueError, match="'weights'"):
        st.KSLinear(PS, weights=[torch.randn(*PS[1]), torch.randn(*PS[0])])
    with pytest.raises(TypeError, match="'weights'"):
        st.KSLinear(PS, weights=[torch.randn(*PS[0]), torch.randn(*PS[1], dtype=F64)])
    with pytest.raises(ValueError, match="'order'"):
        st.KSLinear(PS, order="backwards")
    with pytest.raises(ValueError, match="'patterns'"):
        st.KSLinear(PS, order="ksmm")          # listed in the product order, read as ksmm's: incompatible


def test_kslinear_compiles():
    m = st.KSLinear(PS, bias=True)
    x = torch.randn(3, 40)
    f = torch.compile(m, backend="aot_eager", fullgraph=True)
    assert rel(det(f(x)), det(m(x))) < 1e-6


# ---- BlockToeplitz ----------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["time-major", "space-major"])
def test_block_toeplitz_module_blocks_gradient(layout):
    Nt, Nd, Nm, R = 6, 3, 4, 2
    blocks = torch.randn(Nt, Nd, Nm, dtype=F64)
    op = st.BlockToeplitz(blocks, layout=layout)
    assert op.blocks.requires_grad and op.blocks.data_ptr() != blocks.data_ptr()
    m_tm = torch.randn(Nt, Nm, R, dtype=F64)
    m = m_tm if layout == "time-major" else m_tm.permute(1, 0, 2).contiguous()
    m.requires_grad_()
    d = op(m)
    d_tm = d if layout == "time-major" else d.permute(1, 0, 2)
    assert rel(det(d_tm), ref_toeplitz.ref_matvec(det(blocks), det(m_tm))) < 1e-12
    dd = torch.randn_like(d)
    d.backward(dd)
    dd_tm = dd if layout == "time-major" else dd.permute(1, 0, 2)
    assert rel(det(op.blocks.grad), ref_toeplitz.ref_grad_blocks(det(m_tm), det(dd_tm))) < 1e-12
    m_grad_tm = m.grad if layout == "time-major" else m.grad.permute(1, 0, 2)
    assert rel(det(m_grad_tm), ref_toeplitz.ref_rmatvec(det(blocks), det(dd_tm))) < 1e-12


def test_block_toeplitz_module_trains():
    torch.manual_seed(0)
    target = torch.randn(4, 2, 3, dtype=F64)
    op = st.BlockToeplitz(torch.zeros(4, 2, 3, dtype=F64))
    opt = torch.optim.Adam(op.parameters(), lr=0.1)
    m = torch.randn(4, 3, 16, dtype=F64)
    want = st.toeplitz_matvec(target, m)
    losses = []
    for _ in range(100):
        opt.zero_grad()
        loss = ((op(m) - want) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 1e-2 * losses[0]


def test_block_toeplitz_errors():
    with pytest.raises(ValueError, match="'blocks'"):
        st.BlockToeplitz(torch.randn(3, 4))
    with pytest.raises(ValueError, match="'layout'"):
        st.BlockToeplitz(torch.randn(3, 2, 2), layout="rows")
    op = st.BlockToeplitz(torch.randn(3, 2, 2))
    with pytest.raises(ValueError, match="'m'"):
        op(torch.randn(6))
    with pytest.raises(ValueError, match="'m'"):
        op(torch.randn(3, 5))
    with pytest.raises(TypeError, match="'m'"):
        op(torch.randn(3, 2, dtype=F64))
