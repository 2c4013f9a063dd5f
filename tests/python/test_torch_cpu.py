"""strux.torch ops on CPU tensors: strux's CPU backend underneath (zero-copy), gradcheck in float64,
torch.library.opcheck for every op, half types, torch.compile. Skipped without PyTorch (CI has none)."""
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import strux  # noqa: E402
import strux.torch as st  # noqa: E402
from strux.torch import _host  # noqa: E402

ops = torch.ops.strux
F64 = torch.float64


def rnd(*shape, dtype=F64, scale=1.0, grad=False):
    t = scale * torch.randn(*shape, dtype=dtype)
    return t.requires_grad_() if grad else t


def rel(a, b):
    a, b = torch.as_tensor(a).detach().double(), torch.as_tensor(b).detach().double()
    return float((a - b).norm() / max(float(b.norm()), 1e-300))


def gradcheck(f, args):
    assert torch.autograd.gradcheck(f, args, eps=1e-6, atol=1e-6, rtol=1e-5)


# ---- the CPU path is strux's backend, on the tensors' memory ----------------------------------

def test_host_views_share_memory():
    t = torch.randn(4, 5, dtype=torch.float32)
    a = _host.np_in(t)
    assert a.ctypes.data == t.data_ptr()
    out = np.arange(6.0).reshape(2, 3)
    o = _host.t_out(out, F64)
    assert o.data_ptr() == out.ctypes.data
    c = torch.randn(3, dtype=torch.complex128).conj()       # lazy conjugate: resolved
    assert np.allclose(_host.np_in(c), c.resolve_conj().numpy())
    assert _host.np_in(torch.ones(2, dtype=torch.bfloat16)).dtype == np.float32
    assert _host.np_in(torch.randn(4, 6).t()).flags.c_contiguous


def test_cpu_ops_call_strux(monkeypatch):
    calls = []
    for mod, names in ((st._ks._C, ["ks_matmul", "ks_matmul_vjp", "ks_chain", "ks_chain_vjp"]),
                       (st._scan._C, ["diag_scan", "diag_scan_vjp", "circulant_scan", "circulant_scan_vjp",
                                      "block_circulant_scan", "block_circulant_scan_vjp"]),
                       (st._fftconv._C, ["fftconv", "fftconv_vjp"])):
        for n in names:
            f = getattr(mod, n)
            monkeypatch.setattr(mod, n, lambda *a, _f=f, _n=n, **k: (calls.append(_n), _f(*a, **k))[1])
    p = (2, 3, 5, 2)
    st.ks_matmul(rnd(4, 20, grad=True), rnd(*p, grad=True), p).sum().backward()
    st.ks_chain(rnd(3, 40, grad=True), [rnd(2, 3, 4, 3, grad=True), rnd(4, 3, 5, 2, grad=True)],
                [(2, 3, 4, 3), (4, 3, 5, 2)]).sum().backward()
    st.diag_scan(rnd(2, 5, 3, grad=True), rnd(2, 5, 3, grad=True)).sum().backward()
    st.circulant_scan(rnd(2, 5, 4, grad=True), rnd(2, 5, 4, grad=True)).sum().backward()
    st.block_circulant_scan(rnd(1, 3, 2, 2, 3, grad=True), rnd(1, 3, 6, grad=True)).sum().backward()
    ops.fftconv(rnd(2, 3, 8, grad=True), rnd(3, 4, grad=True), "causal", None, None, None).sum().backward()
    assert sorted(set(calls)) == sorted({"ks_matmul", "ks_matmul_vjp", "ks_chain", "ks_chain_vjp", "diag_scan",
                                         "diag_scan_vjp", "circulant_scan", "circulant_scan_vjp",
                                         "block_circulant_scan", "block_circulant_scan_vjp", "fftconv",
                                         "fftconv_vjp"})


def test_forward_matches_strux_numpy():
    u, k = rnd(2, 3, 16), rnd(3, 5)
    assert rel(ops.fftconv(u, k, "circular", None, None, None), strux.fftconv(u.numpy(), k.numpy(), mode="circular")) < 1e-14
    x, w, p = rnd(4, 20), rnd(2, 3, 5, 2), (2, 3, 5, 2)
    assert rel(st.ks_matmul(x, w, p), strux.ks_matmul(x.numpy(), w.numpy(), p)) < 1e-14
    a, b = rnd(2, 6, 3, dtype=torch.complex128, scale=0.5), rnd(2, 6, 3, dtype=torch.complex128)
    assert rel(st.diag_scan(a, b).abs(), np.abs(strux.diag_scan(a.numpy(), b.numpy()))) < 1e-14
    blocks, m = rnd(5, 3, 4), rnd(5, 4, 2)
    assert rel(st.toeplitz_matvec(blocks, m), strux.BlockToeplitz(blocks.numpy()).matvec(m.numpy())) < 1e-14


# ---- gradcheck in float64, every op --------------------------------------------------------------

@pytest.mark.parametrize("mode", ["causal", "circular"])
@pytest.mark.parametrize("gates", [False, True])
def test_gradcheck_fftconv(mode, gates):
    u, k = rnd(2, 3, 8, grad=True), rnd(3, 5, grad=True)
    extra = [rnd(2, 3, 8, grad=True), rnd(2, 3, 8, grad=True), rnd(3, grad=True)] if gates else [None] * 3
    live = [t for t in [u, k] + extra if t is not None]
    gradcheck(lambda *a: ops.fftconv(a[0], a[1], mode, *(a[2:] if gates else [None] * 3)), live)


@pytest.mark.parametrize("layout", ["bsf", "bsl"])
def test_gradcheck_ks(layout):
    p = (2, 3, 5, 2)
    x = rnd(4, 20, grad=True) if layout == "bsf" else rnd(20, 4, grad=True)
    gradcheck(lambda x, w: st.ks_matmul(x, w, p, layout=layout), (x, rnd(*p, grad=True)))
    ps = [(2, 3, 4, 3), (4, 3, 5, 2)]
    x2 = rnd(3, 40, grad=True) if layout == "bsf" else rnd(40, 3, grad=True)
    ws = [rnd(*q, grad=True) for q in ps]
    gradcheck(lambda x, w1, w2: st.ks_chain(x, [w1, w2], ps, layout=layout), (x2, *ws))


@pytest.mark.parametrize("dtype", [F64, torch.complex128])
@pytest.mark.parametrize("with_h0", [False, True])
def test_gradcheck_diag_scan(dtype, with_h0):
    a, b = rnd(2, 6, 3, dtype=dtype, scale=0.5, grad=True), rnd(2, 6, 3, dtype=dtype, grad=True)
    h0 = rnd(2, 3, dtype=dtype, grad=True) if with_h0 else None
    if with_h0:
        gradcheck(lambda a, b, h0: st.diag_scan(a, b, h0, return_final=True), (a, b, h0))
    else:
        gradcheck(lambda a, b: st.diag_scan(a, b), (a, b))


@pytest.mark.parametrize("with_h0", [False, True])
def test_gradcheck_circulant_scan(with_h0):
    a, u = rnd(2, 5, 6, scale=0.3, grad=True), rnd(2, 5, 6, grad=True)
    args = (a, u) + ((rnd(2, 6, grad=True),) if with_h0 else ())
    gradcheck(lambda a, u, *h: st.circulant_scan(a, u, *h, return_final=True)[1] + st.circulant_scan(a, u, *h)[:, 2],
              args)


def test_gradcheck_circulant_scan_fourier():
    n = 6
    ahat = torch.fft.rfft(0.3 * torch.randn(2, 4, n, dtype=F64), dim=-1).requires_grad_()
    u = rnd(2, 4, n, grad=True)
    # the Fourier form ignores Im at frequency 0 and n/2: gradcheck on the parts it reads
    gradcheck(lambda re, im, u: st.circulant_scan(torch.complex(re, im * _mask(n)), u, fourier=True),
              (ahat.real.detach().clone().requires_grad_(), ahat.imag.detach().clone().requires_grad_(), u))


def _mask(n):
    m = torch.ones(n // 2 + 1, dtype=F64)
    m[0] = 0
    if n % 2 == 0:
        m[-1] = 0
    return m


@pytest.mark.parametrize("with_h0", [False, True])
def test_gradcheck_block_circulant_scan(with_h0):
    a, u = rnd(1, 4, 2, 2, 3, scale=0.2, grad=True), rnd(1, 4, 6, grad=True)
    args = (a, u) + ((rnd(1, 6, grad=True),) if with_h0 else ())
    gradcheck(lambda a, u, *h: st.block_circulant_scan(a, u, *h), args)


@pytest.mark.parametrize("layout", ["time-major", "space-major"])
@pytest.mark.parametrize("R", [None, 3])
def test_gradcheck_toeplitz_blocks(layout, R):
    Nt, Nd, Nm = 5, 3, 2
    shape = ((Nt, Nm) if layout == "time-major" else (Nm, Nt)) + ((R,) if R else ())
    blocks, m = rnd(Nt, Nd, Nm, grad=True), rnd(*shape, grad=True)
    gradcheck(lambda b, m: st.toeplitz_matvec(b, m, layout=layout), (blocks, m))
    gradcheck(lambda m: st.toeplitz_matvec(blocks.detach(), m, layout=layout), (m,))   # vector only


def test_toeplitz_spectrum_ops_are_cuda_only():
    with pytest.raises(NotImplementedError, match="CUDA"):
        ops.toeplitz_matvec(torch.zeros(5, 2, 3, dtype=torch.complex128), rnd(3, 3), 3, "time-major")
    with pytest.raises(NotImplementedError, match="CUDA"):
        ops.toeplitz_rmatvec(torch.zeros(5, 2, 3, dtype=torch.complex128), rnd(3, 2), 3, "time-major")
    with pytest.raises(ValueError, match="'Nt'"):
        st.toeplitz_matvec(torch.zeros(5, 2, 3, dtype=torch.complex128), rnd(3, 3))


# ---- torch.library.opcheck, every op (forward and backward ops) --------------------------------

def _opcheck_cases():
    p, ps = [2, 3, 5, 2], [2, 3, 4, 3, 4, 3, 5, 2]
    ws = [rnd(2, 3, 4, 3, grad=True), rnd(4, 3, 5, 2, grad=True)]
    u, k = rnd(2, 3, 8, grad=True), rnd(3, 5, grad=True)
    pre, post, skip = rnd(2, 3, 8, grad=True), rnd(2, 3, 8, grad=True), rnd(3, grad=True)
    kh = rnd(3, 4, dtype=torch.complex128, grad=True)
    a, b = rnd(2, 5, 3, scale=0.5, grad=True), rnd(2, 5, 3, grad=True)
    ac, bc = rnd(2, 5, 3, dtype=torch.complex128, scale=0.5, grad=True), rnd(2, 5, 3, dtype=torch.complex128, grad=True)
    h0 = rnd(2, 3, grad=True)
    ca, cu, ch0 = rnd(2, 4, 6, scale=0.3, grad=True), rnd(2, 4, 6, grad=True), rnd(2, 6, grad=True)
    cahat = torch.fft.rfft(0.3 * torch.randn(2, 4, 6, dtype=F64), dim=-1).requires_grad_()
    ba, bu, bh0 = rnd(1, 3, 2, 2, 3, scale=0.2, grad=True), rnd(1, 3, 6, grad=True), rnd(1, 6, grad=True)
    blocks, m, mr = rnd(5, 3, 2, grad=True), rnd(5, 2, grad=True), rnd(2, 5, 3, grad=True)
    hh = st.diag_scan(a.detach(), b.detach())
    return {
        "fftconv": (ops.fftconv, (u, k, "causal", pre, post, skip)),
        "fftconv plain circular": (ops.fftconv, (u, k, "circular", None, None, None)),
        "fftconv_backward": (ops.fftconv_backward, (rnd(2, 3, 8), u.detach(), k.detach(), "causal", pre.detach(),
                                                     None, skip.detach())),
        "fftconv_spectral": (ops.fftconv_spectral, (u, kh, "causal", pre, post, skip)),
        "fftconv_spectral_backward": (ops.fftconv_spectral_backward, (rnd(2, 3, 8), u.detach(), kh.detach(),
                                                                       "circular", None, post.detach(), None)),
        "ks_matmul": (ops.ks_matmul, (rnd(4, 20, grad=True), rnd(*p, grad=True), p, False)),
        "ks_matmul bsl": (ops.ks_matmul, (rnd(20, 3, grad=True), rnd(*p, grad=True), p, True)),
        "ks_matmul_backward": (ops.ks_matmul_backward, (rnd(4, 12), rnd(4, 20), rnd(*p), p, False)),
        "ks_chain": (ops.ks_chain, (rnd(3, 40, grad=True), ws, ps, False)),
        "ks_chain_backward": (ops.ks_chain_backward, (rnd(3, 18), rnd(3, 40), [w.detach() for w in ws], ps, False)),
        "diag_scan": (ops.diag_scan, (a, b, h0)),
        "diag_scan complex": (ops.diag_scan, (ac, bc, None)),
        "diag_scan_backward": (ops.diag_scan_backward, (rnd(2, 5, 3), a.detach(), b.detach(), hh, None)),
        "circulant_scan": (ops.circulant_scan, (ca, cu, ch0, False)),
        "circulant_scan fourier": (ops.circulant_scan, (cahat, cu, None, True)),
        "circulant_scan_backward": (ops.circulant_scan_backward, (rnd(2, 4, 6), ca.detach(), cu.detach(), None, False)),
        "block_circulant_scan": (ops.block_circulant_scan, (ba, bu, bh0)),
        "block_circulant_scan_backward": (ops.block_circulant_scan_backward,
                                          (rnd(1, 3, 6), ba.detach(), bu.detach(), bh0.detach())),
        "block_toeplitz_matvec": (ops.block_toeplitz_matvec, (blocks, m, "time-major")),
        "block_toeplitz_matvec space-major R": (ops.block_toeplitz_matvec, (blocks, mr, "space-major")),
        "block_toeplitz_matvec_backward": (ops.block_toeplitz_matvec_backward,
                                           (rnd(5, 3), blocks.detach(), m.detach(), "time-major", True)),
        "block_toeplitz_matvec_backward vector only": (ops.block_toeplitz_matvec_backward,
                                                       (rnd(5, 3), blocks.detach(), m.detach(), "time-major", False)),
    }


CASES = list(_opcheck_cases())


@pytest.mark.parametrize("name", CASES)
def test_opcheck(name):
    op, args = _opcheck_cases()[name]
    torch.library.opcheck(op.default, args)


def test_every_op_has_an_opcheck_case():
    names = {n for n in dir(ops) if isinstance(getattr(ops, n), torch._ops.OpOverloadPacket)}
    assert len(names) >= 14
    names -= {"toeplitz_matvec", "toeplitz_rmatvec"}  # the spectrum ops: CUDA only (test_cuda_torch.py)
    covered = {n.split()[0] for n in CASES}
    assert names <= covered, names - covered


# ---- half types: computed in float32 (as strux does), returned in the input dtype --------------

@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_types(dtype):
    def check(f, *args, tol=2e-2):
        lo = [a.to(dtype) if a is not None and a.is_floating_point() else a for a in args]
        y = f(*lo)
        want = f(*[a.float() if a is not None and a.is_floating_point() else a for a in lo])
        assert y.dtype == dtype and rel(y, want) < tol
        lg = [a.detach().requires_grad_() if a is not None and a.is_floating_point() else a for a in lo]
        f(*lg).float().sum().backward()
        for a in lg:
            if a is not None and a.is_floating_point():
                assert a.grad.dtype == dtype and torch.isfinite(a.grad.float()).all()
    p = (2, 3, 5, 2)
    check(lambda x, w: st.ks_matmul(x, w, p), rnd(4, 20), rnd(*p))
    check(lambda x, w1, w2: st.ks_chain(x, [w1, w2], [(2, 3, 4, 3), (4, 3, 5, 2)]), rnd(3, 40), rnd(2, 3, 4, 3),
          rnd(4, 3, 5, 2))
    check(lambda u, k, s: ops.fftconv(u, k, "causal", None, None, s), rnd(2, 3, 16), rnd(3, 4), rnd(3))
    check(lambda a, b: st.diag_scan(a, b), rnd(2, 5, 3, scale=0.5), rnd(2, 5, 3))
    check(lambda a, u: st.circulant_scan(a, u), rnd(2, 5, 4, scale=0.3), rnd(2, 5, 4))
    check(lambda a, u: st.block_circulant_scan(a, u), rnd(1, 3, 2, 2, 3, scale=0.2), rnd(1, 3, 6))
    check(lambda b, m: st.toeplitz_matvec(b, m), rnd(4, 2, 3), rnd(4, 3))


def test_mixed_dtypes_are_errors():
    with pytest.raises(TypeError, match="'w'"):
        st.ks_matmul(rnd(4, 20), rnd(2, 3, 5, 2).half(), (2, 3, 5, 2))
    with pytest.raises(TypeError, match="'k'"):
        ops.fftconv(rnd(1, 2, 8).float(), rnd(2, 3).half(), "causal", None, None, None)
    with pytest.raises(TypeError, match="'a'"):
        st.block_circulant_scan(rnd(1, 3, 2, 2, 3).float(), rnd(1, 3, 6))
    with pytest.raises(TypeError, match="'m'"):
        st.toeplitz_matvec(rnd(4, 2, 3), rnd(4, 3).float())


# ---- torch.compile ---------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_every_family(backend):
    p, ps = (4, 5, 3, 2), [(2, 3, 4, 3), (4, 3, 5, 2)]

    def f(x, w, w1, w2, u, k, a, b, ca, blocks, m):
        y1 = torch.tanh(st.ks_chain(st.ks_matmul(x, w, p) * 2, [w1, w2], ps))
        y2 = ops.fftconv(u * 2, k, "causal", None, None, None)
        y3 = st.diag_scan(a, b) + st.circulant_scan(ca, b) + st.block_circulant_scan(ca[:, :, None, None, :], b)
        y4 = st.toeplitz_matvec(blocks, m)
        return y1.sum() + y2.sum() + y3.sum() + y4.sum()

    args = [rnd(6, 24), rnd(*p), rnd(*ps[0]), rnd(*ps[1]), rnd(2, 3, 8), rnd(3, 4), rnd(2, 5, 3, scale=0.5),
            rnd(2, 5, 3), rnd(2, 5, 3, scale=0.3), rnd(4, 2, 3), rnd(4, 3)]
    a1 = [v.clone().requires_grad_() for v in args]
    a2 = [v.clone().requires_grad_() for v in args]
    y1 = torch.compile(f, backend=backend, fullgraph=True)(*a1)
    y2 = f(*a2)
    assert rel(y1.detach(), y2.detach()) < 1e-12
    y1.backward()
    y2.backward()
    for u, v in zip(a1, a2):
        assert rel(u.grad, v.grad) < 1e-12


def test_diag_scan_real_decay_complex_input():
    """A real a with a complex b (strux's promotion rule): complex h, a real gradient for a."""
    a = rnd(2, 5, 3, scale=0.5, grad=True)
    b = rnd(2, 5, 3, dtype=torch.complex128, grad=True)
    h = st.diag_scan(a, b)
    assert h.dtype == torch.complex128
    assert rel(h.abs(), np.abs(strux.diag_scan(a.detach().numpy(), b.detach().numpy()))) < 1e-14
    gradcheck(lambda a, b: st.diag_scan(a, b), (a, b))


# ---- hostile arguments: a TypeError / ValueError naming the argument (strux.torch._check) ---------

P = (2, 3, 3, 2)  # M = N = 12


def _hostile_calls():
    """name -> (valid arguments, the call, optional arguments): every strux.torch entry."""
    f = lambda *s, scale=1.0: rnd(*s, dtype=torch.float32, scale=scale)  # noqa: E731
    fft = lambda: {"u": f(2, 3, 16), "k": f(3, 5), "pregate": f(2, 3, 16), "postgate": f(2, 3, 16),  # noqa: E731
                   "skip": f(3)}
    scan = lambda first, second, shape_a, n: {first: f(*shape_a, scale=0.2), second: f(2, 5, n),  # noqa: E731
                                              "h0": f(2, n)}
    gates = ("pregate", "postgate", "skip")
    return {
        "fftconv": (fft, lambda d: st.fftconv(d["u"], d["k"], "causal", d["pregate"], d["postgate"], d["skip"]),
                    gates),
        "FFTConv": (fft, lambda d: st.FFTConv(16)(d["u"], d["k"], d["pregate"], d["postgate"], d["skip"]), gates),
        "ks_matmul": (lambda: {"x": f(3, 12), "w": f(*P)}, lambda d: st.ks_matmul(d["x"], d["w"], P), ()),
        "ks_chain": (lambda: {"x": f(3, 12), "ws": [f(*P), f(*P)]}, lambda d: st.ks_chain(d["x"], d["ws"], [P, P]),
                     ()),
        "KSLinear": (lambda: {"x": f(3, 12)}, lambda d: st.KSLinear([P, P])(d["x"]), ()),
        "diag_scan": (lambda: scan("a", "b", (2, 5, 3), 3), lambda d: st.diag_scan(d["a"], d["b"], d["h0"]),
                      ("h0",)),
        "diag_scan axis": (lambda: scan("a", "b", (2, 5, 3), 3),
                           lambda d: st.diag_scan(d["a"], d["b"], d["h0"], reverse=True), ("h0",)),
        "circulant_scan": (lambda: scan("a", "u", (2, 5, 6), 6), lambda d: st.circulant_scan(d["a"], d["u"], d["h0"]),
                           ("h0",)),
        "block_circulant_scan": (lambda: scan("a", "u", (2, 5, 2, 2, 3), 6),
                                 lambda d: st.block_circulant_scan(d["a"], d["u"], d["h0"]), ("h0",)),
        "toeplitz_matvec": (lambda: {"blocks": f(4, 2, 3), "m": f(4, 3)},
                            lambda d: st.toeplitz_matvec(d["blocks"], d["m"]), ()),
        "BlockToeplitz": (lambda: {"m": f(4, 3)}, lambda d: st.BlockToeplitz(f(4, 2, 3))(d["m"]), ()),
    }


HOSTILE = _hostile_calls()
_KINDS = {"None": lambda x: None, "int": lambda x: x.to(torch.int32), "bool": lambda x: x > 0,
          "complex": lambda x: x.to(torch.complex64), "list": lambda x: x.tolist()}


@pytest.mark.parametrize("kind", list(_KINDS))
@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_tensor_arguments_name_the_argument(name, kind):
    """None, int / bool / complex tensors and non-tensors in place of each tensor argument: a
    TypeError naming it (not AttributeError, torch's schema RuntimeError or a cast result)."""
    make, call, optional = HOSTILE[name]
    base = make()
    call(base)  # the valid call runs
    for arg, x in base.items():
        for i, t in ([(None, x)] if not isinstance(x, list) else list(enumerate(x))):
            if (kind == "None" and arg in optional) or (kind == "complex" and name.startswith("diag_scan")) \
                    or (kind == "complex" and arg == "blocks"):
                continue  # a valid "absent" / a complex diag_scan / complex blocks: the spectrum fhat
            d = dict(base)
            if i is None:
                d[arg] = _KINDS[kind](t)
                want = arg
            else:
                d[arg] = list(x)
                d[arg][i] = _KINDS[kind](t)
                want = f"{arg}[{i}]"
            with pytest.raises(TypeError, match=re.escape(f"argument '{want}'")) as e:
                call(d)
            assert "expected" in str(e.value) and "got" in str(e.value)


def test_circulant_scan_fourier_takes_complex_a_only():
    u = rnd(2, 5, 6)
    with pytest.raises(TypeError, match="argument 'a': expected a complex dtype"):
        st.circulant_scan(rnd(2, 5, 4), u, fourier=True)
    with pytest.raises(TypeError, match="argument 'a': expected a real floating dtype"):
        st.circulant_scan(rnd(2, 5, 6, dtype=torch.complex128), u)


def test_ks_chain_weights_not_a_list():
    with pytest.raises(TypeError, match="argument 'ws'"):
        st.ks_chain(rnd(3, 12), rnd(*P), [P])
    with pytest.raises(ValueError, match="argument 'ws'"):
        st.ks_chain(rnd(3, 12), [], [P])


@pytest.mark.parametrize("n", [2**62, 2**70, -1, 0])
def test_huge_pattern_sizes_name_the_pattern(n):
    """Pattern entries beyond what strux indexes: a ValueError naming the pattern, not torch's
    'Storage size calculation overflowed' or its schema's int64 RuntimeError."""
    x, w = rnd(3, 12, dtype=torch.float32), rnd(*P, dtype=torch.float32)
    with pytest.raises(ValueError, match="argument 'pattern'"):
        st.ks_matmul(x, w, (2, 3, n, 2))
    with pytest.raises(ValueError, match="argument 'patterns"):
        st.ks_chain(x, [w], [(2, 3, n, 2)])
    with pytest.raises(ValueError, match="argument 'patterns"):
        st.KSLinear([(n, 1, 1, 1)])


def test_kslinear_weight_too_large_to_allocate_is_a_memory_error(monkeypatch):
    def refuse(*a, **k):
        raise RuntimeError("DefaultCPUAllocator: not enough memory: you tried to allocate 8 bytes")
    monkeypatch.setattr(torch, "empty", lambda *a, _e=torch.empty, **k: _e(*a, **k) if a == (0,) else refuse())
    with pytest.raises(MemoryError, match=r"argument 'patterns'.*\(2, 1, 1, 1\).*8 bytes"):
        st.KSLinear([(2, 1, 1, 1)])


def test_plain_api_reads_bfloat16_tensors_as_float32():
    """numpy has no bfloat16: a torch bfloat16 CPU tensor is read as float32 (what bfloat16 is
    computed in), the result float32 numpy, equal to the float32 call."""
    u, k = rnd(2, 3, 16).to(torch.bfloat16), rnd(3, 5).to(torch.bfloat16)
    y = strux.fftconv(u, k)
    assert isinstance(y, np.ndarray) and y.dtype == np.float32
    assert np.array_equal(y, strux.fftconv(u.float().numpy(), k.float().numpy()))
    with pytest.raises(TypeError, match="argument 'k'"):
        strux.fftconv(u, k.to(torch.int32))
    h = strux.diag_scan(rnd(2, 5, 3, scale=0.3).to(torch.bfloat16), rnd(2, 5, 3).to(torch.bfloat16))
    assert h.dtype == np.float32


def test_scan_flags_are_booleans():
    """fourier / return_final as strux's plain scans take them: True or False, else a TypeError naming it."""
    a, u = rnd(2, 5, 6, scale=0.2), rnd(2, 5, 6)
    with pytest.raises(TypeError, match="argument 'fourier'"):
        st.circulant_scan(a, u, fourier="yes")
    with pytest.raises(TypeError, match="argument 'return_final'"):
        st.circulant_scan(a, u, return_final=1)
    with pytest.raises(TypeError, match="argument 'return_final'"):
        st.diag_scan(a, u, return_final="no")
    with pytest.raises(TypeError, match="argument 'return_final'"):
        st.block_circulant_scan(rnd(2, 5, 2, 2, 3, scale=0.2), u, return_final=None)
    h, last = st.diag_scan(a, u, return_final=np.bool_(True))
    assert torch.equal(last, h[:, -1])
