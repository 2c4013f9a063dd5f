"""diag_scan's layout keywords (axis, reverse, a broadcasting `a`) on CUDA arrays: strux.diag_scan /
diag_scan_vjp for torch tensors and CuPy arrays, and strux.torch.diag_scan with autograd, against
the float64 loop of test_scan_layouts.py and strux's CPU gradients. Skipped without PyTorch, a
GPU or the CUDA build."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import strux  # noqa: E402
from strux import _cuda_scan as K  # noqa: E402
from strux import scan as S  # noqa: E402
from ref_scan import relerr  # noqa: E402
from test_scan_layouts import B, N, T, caller, loop  # noqa: E402

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and K.available()),
                                reason="needs a CUDA GPU and strux built with CUDA")

A_SHAPES = [(B, T, N), (1, 1, N), (B, 1, N), (1, T, N), (B, T, 1)]
A_IDS = ["full", "1x1xn", "Bx1xn", "1xTxn", "BxTx1"]
LAYOUTS = [(1, False), (1, True), (2, False), (2, True), (-1, True)]
TOL = {"float32": 2e-5, "float64": 1e-12, "complex64": 2e-5, "complex128": 1e-12, "float16": 5e-3}


def host(x):
    """A CUDA tensor / CuPy array as a float64 / complex128 numpy array (None stays None)."""
    if x is None:
        return None
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu()
        return (x.to(torch.complex128) if x.is_complex() else x.double()).numpy()
    return np.asarray(x.get(), np.complex128 if x.dtype.kind == "c" else np.float64)


def inputs(dtype, a_shape, axis, seed, with_h0=True):
    """Random (a, b, h0, dh, dh_last) as float64 numpy arrays rounded to `dtype`, |a| < 1."""
    r = np.random.default_rng(seed)
    cplx = dtype.startswith("complex")

    def rnd(shape, scale=1.0):
        x = r.standard_normal(shape) * scale + (1j * r.standard_normal(shape) * scale if cplx else 0)
        return x.astype(dtype).astype(np.complex128 if cplx else np.float64)

    b = rnd(caller((B, T, N), axis))
    return rnd(caller(a_shape, axis), 0.6), b, (rnd((B, N)) if with_h0 else None), rnd(b.shape), rnd((B, N))


def dev(x, dtype):
    if x is None:
        return None
    return torch.tensor(x).to(getattr(torch, dtype)).cuda()


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128", "float16"])
@pytest.mark.parametrize("a_shape", A_SHAPES, ids=A_IDS)
@pytest.mark.parametrize("axis,reverse", LAYOUTS)
@pytest.mark.parametrize("with_h0", [False, True])
def test_torch_arrays_match_loop(dtype, a_shape, axis, reverse, with_h0):
    a, b, h0, dh, dl = inputs(dtype, a_shape, axis, hash((a_shape, axis, reverse, with_h0)) % 2**32, with_h0)
    h, last = strux.diag_scan(dev(a, dtype), dev(b, dtype), dev(h0, dtype), axis=axis, reverse=reverse,
                              return_final=True)
    want, want_last = loop(a, b, h0, axis, reverse)
    assert h.is_cuda and str(h.dtype) == f"torch.{dtype}" and tuple(h.shape) == b.shape and h.is_contiguous()
    assert tuple(last.shape) == (B, N)
    assert relerr(host(h), want) < TOL[dtype] and relerr(host(last), want_last) < TOL[dtype]


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize("a_shape", A_SHAPES, ids=A_IDS)
@pytest.mark.parametrize("axis,reverse", LAYOUTS)
def test_torch_arrays_vjp_matches_cpu(dtype, a_shape, axis, reverse):
    a, b, h0, dh, dl = inputs(dtype, a_shape, axis, hash((a_shape, axis, reverse)) % 2**32)
    got = strux.diag_scan_vjp(*(dev(x, dtype) for x in (dh, a, b, h0)), dh_last=dev(dl, dtype), axis=axis,
                              reverse=reverse)
    want = strux.diag_scan_vjp(dh, a, b, h0, dh_last=dl, axis=axis, reverse=reverse)
    for g, w in zip(got, want):
        assert g.is_cuda and tuple(g.shape) == w.shape and relerr(host(g), w) < 5 * TOL[dtype]


def test_half_broadcast_gradient_keeps_dtype_and_shape():
    a, b, _, dh, _ = inputs("float16", (1, 1, N), 2, 5, with_h0=False)
    da, db, dh0 = strux.diag_scan_vjp(dev(dh, "float16"), dev(a, "float16"), dev(b, "float16"), axis=2,
                                      reverse=True)
    assert da.dtype == torch.float16 and tuple(da.shape) == a.shape and dh0 is None
    want = strux.diag_scan_vjp(dh, a, b, axis=2, reverse=True)
    assert relerr(host(da), want[0]) < 2e-2 and relerr(host(db), want[1]) < 2e-2


def test_plain_call_takes_no_layout_path(monkeypatch):
    def boom(*args):
        raise AssertionError("layout path taken")
    monkeypatch.setattr(S, "_diag_scan_layout", boom)
    monkeypatch.setattr(S, "_diag_scan_vjp_layout", boom)
    a, b, h0, dh, dl = (dev(x, "float32") for x in inputs("float32", (B, T, N), 1, 6))
    strux.diag_scan(a, b, h0, return_final=True)
    strux.diag_scan_vjp(dh, a, b, h0, dh_last=dl)


def test_errors_name_the_argument():
    a, b = dev(np.full((1, 2, N), 0.5), "float32"), dev(np.ones((B, T, N)), "float32")
    with pytest.raises(ValueError, match="'a'"):
        strux.diag_scan(a, b)
    with pytest.raises(ValueError, match="'axis'"):
        strux.diag_scan(b, b, axis=3)
    with pytest.raises(TypeError, match="'reverse'"):
        strux.diag_scan(b, b, reverse="no")
    with pytest.raises(ValueError, match="'dh'"):
        strux.diag_scan_vjp(b, b.transpose(1, 2), b.transpose(1, 2), axis=2)
    with pytest.raises(TypeError, match="'b'"):
        strux.diag_scan(a, np.ones((B, T, N), np.float32))


@pytest.mark.parametrize("dtype", ["float32", "complex64", "float64"])
@pytest.mark.parametrize("a_shape", [(B, T, N), (1, 1, N), (B, T, 1)], ids=["full", "1x1xn", "BxTx1"])
@pytest.mark.parametrize("axis,reverse", LAYOUTS)
def test_strux_torch_autograd(dtype, a_shape, axis, reverse):
    """strux.torch.diag_scan with the keywords: forward against the loop, autograd against strux's
    CPU vjp (float64), return_final the final state."""
    import strux.torch as st
    a, b, h0, dh, dl = inputs(dtype, a_shape, axis, hash((a_shape, axis, reverse, dtype)) % 2**32)
    ta, tb, th0 = (dev(x, dtype).requires_grad_() for x in (a, b, h0))
    h, last = st.diag_scan(ta, tb, th0, axis=axis, reverse=reverse, return_final=True)
    want, want_last = loop(a, b, h0, axis, reverse)
    assert tuple(h.shape) == b.shape and h.is_contiguous()
    assert relerr(host(h), want) < TOL[dtype] and relerr(host(last), want_last) < TOL[dtype]
    loss = sum((torch.conj(dev(c, dtype)) * x).real.sum() for c, x in ((dh, h), (dl, last)))
    loss.backward()
    want_g = strux.diag_scan_vjp(dh, a, b, h0, dh_last=dl, axis=axis, reverse=reverse)
    for g, w in zip((ta.grad, tb.grad, th0.grad), want_g):
        assert tuple(g.shape) == w.shape and relerr(host(g), w) < 5 * TOL[dtype]


def test_strux_torch_compiles_with_layouts():
    import strux.torch as st
    a, b, _, _, _ = (dev(x, "float32") for x in inputs("float32", (1, 1, N), 2, 7, with_h0=False))
    f = torch.compile(lambda a, b: st.diag_scan(a, b, axis=2, reverse=True))
    assert relerr(host(f(a, b)), host(st.diag_scan(a, b, axis=2, reverse=True))) < 1e-6


def test_cupy_arrays():
    cp = pytest.importorskip("cupy")
    for a_shape, (axis, reverse) in [((1, 1, N), (2, True)), ((B, T, 1), (1, True)), ((B, T, N), (-1, False))]:
        a, b, h0, dh, dl = inputs("complex64", a_shape, axis, 8)
        ca, cb, ch0, cdh, cdl = (cp.asarray(x.astype(np.complex64)) for x in (a, b, h0, dh, dl))
        h, last = strux.diag_scan(ca, cb, ch0, axis=axis, reverse=reverse, return_final=True)
        want, want_last = loop(a, b, h0, axis, reverse)
        assert isinstance(h, cp.ndarray) and h.shape == b.shape and h.flags.c_contiguous
        assert relerr(host(h), want) < 2e-5 and relerr(host(last), want_last) < 2e-5
        got = strux.diag_scan_vjp(cdh, ca, cb, ch0, dh_last=cdl, axis=axis, reverse=reverse)
        for g, w in zip(got, strux.diag_scan_vjp(dh, a, b, h0, dh_last=dl, axis=axis, reverse=reverse)):
            assert isinstance(g, cp.ndarray) and g.shape == w.shape and relerr(host(g), w) < 1e-4
