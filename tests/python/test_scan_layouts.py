"""diag_scan / diag_scan_vjp with the layout keywords of DESIGN.md ("scan"): axis=2 / -1 (time-last
(B, n, T) arrays), reverse=True (h_t = a_t h_{t+1} + b_t, h_T = h0, final state h_0) and an `a`
that broadcasts to b's shape. Checked against a float64 loop of exactly that formula (time
index order and all, no flips), gradients by the adjoint identity against the loop's exact
forward-mode derivative and by central finite differences."""
import re

import numpy as np
import pytest

import strux
from strux import scan as S
from ref_scan import rand, re_dot, relerr

B, T, N = 2, 5, 3
# a's shape, written for (B, T, n) arrays (time at axis 1); time-last calls swap its last two
A_SHAPES = [(B, T, N), (1, 1, N), (B, 1, N), (1, T, N), (B, T, 1)]
A_IDS = ["full", "1x1xn", "Bx1xn", "1xTxn", "BxTx1"]
AXES = [1, 2, -1]
TOL = {np.float32: 3e-6, np.float64: 1e-13, np.complex64: 3e-6, np.complex128: 1e-13}


def caller(shape, axis):
    """A (B, T, n)-ordered shape in the caller's layout for `axis`."""
    return shape if axis == 1 else (shape[0], shape[2], shape[1])


def loop(a, b, h0, axis, reverse, da=None, db=None, dh0=None):
    """The DESIGN.md recurrence in complex128 by a plain loop over the time index in its own
    order (no array flips or axis moves), with its exact forward-mode derivative in the
    direction (da, db, dh0) when given. Returns (h, final) or (h, final, jh, jfinal)."""
    tax = 1 if axis == 1 else 2
    b = np.asarray(b, np.complex128)
    a = np.broadcast_to(np.asarray(a, np.complex128), b.shape)
    jvp = da is not None
    if jvp:
        da = np.broadcast_to(np.asarray(da, np.complex128), b.shape)
        db = np.asarray(db, np.complex128)
    h, jh = np.zeros(b.shape, np.complex128), np.zeros(b.shape, np.complex128)
    Bn = (b.shape[0], b.shape[3 - tax])
    prev = np.zeros(Bn, np.complex128) if h0 is None else np.asarray(h0, np.complex128)
    dprev = np.zeros(Bn, np.complex128) if dh0 is None else np.asarray(dh0, np.complex128)
    steps = b.shape[tax]
    for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
        at = (slice(None), t) if tax == 1 else (slice(None), slice(None), t)
        if jvp:
            dprev = da[at] * prev + a[at] * dprev + db[at]
            jh[at] = dprev
        prev = a[at] * prev + b[at]
        h[at] = prev
    return (h, prev, jh, dprev) if jvp else (h, prev)


def as_real(x, dtype):
    return x.real if np.dtype(dtype).kind == "f" else x


# ---- forward -----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("a_shape", A_SHAPES, ids=A_IDS)
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("with_h0", [False, True])
def test_forward_matches_loop(dtype, a_shape, reverse, axis, with_h0):
    r = np.random.default_rng(hash((a_shape, reverse, axis, with_h0)) % 2**32)
    a = rand(r, caller(a_shape, axis), dtype, 0.6)
    b = rand(r, caller((B, T, N), axis), dtype)
    h0 = rand(r, (B, N), dtype) if with_h0 else None
    h, final = strux.diag_scan(a, b, h0, axis=axis, reverse=reverse, return_final=True)
    want, want_final = loop(a, b, h0, axis, reverse)
    assert h.dtype == dtype and h.shape == b.shape and h.flags.c_contiguous
    assert final.shape == (B, N) and final.dtype == dtype
    assert relerr(h, want) < TOL[dtype] and relerr(final, want_final) < TOL[dtype]
    h_only = strux.diag_scan(a, b, h0=h0, axis=axis, reverse=reverse)
    assert np.array_equal(h_only, h)


def test_reverse_final_state_is_step_zero():
    r = np.random.default_rng(1)
    a, b = rand(r, (B, T, N), np.float64, 0.6), rand(r, (B, T, N), np.float64)
    h, final = strux.diag_scan(a, b, reverse=True, return_final=True)
    assert np.array_equal(final, h[:, 0])
    h, final = strux.diag_scan(a.transpose(0, 2, 1), b.transpose(0, 2, 1), axis=-1, reverse=True, return_final=True)
    assert np.array_equal(final, h[:, :, 0])


def test_reverse_is_the_flipped_forward():
    """A guard that reverse really runs backwards (and is not the plain scan): they differ, and
    reverse equals the plain scan of flipped arrays, flipped back."""
    r = np.random.default_rng(2)
    a, b, h0 = rand(r, (B, T, N), np.float64, 0.6), rand(r, (B, T, N), np.float64), rand(r, (B, N), np.float64)
    hr = strux.diag_scan(a, b, h0, reverse=True)
    assert relerr(hr, strux.diag_scan(a[:, ::-1], b[:, ::-1], h0)[:, ::-1]) < 1e-15
    assert relerr(hr, strux.diag_scan(a, b, h0)) > 1e-3


def test_time_last_is_the_transposed_scan():
    r = np.random.default_rng(3)
    a, b = rand(r, (B, T, N), np.complex128, 0.6), rand(r, (B, T, N), np.complex128)
    ht = strux.diag_scan(a.transpose(0, 2, 1), b.transpose(0, 2, 1), axis=2)
    assert ht.shape == (B, N, T) and ht.flags.c_contiguous
    assert relerr(ht, strux.diag_scan(a, b).transpose(0, 2, 1)) < 1e-15


@pytest.mark.parametrize("axis", AXES)
def test_lower_rank_a_broadcasts_by_numpy_rules(axis):
    """Ranks broadcast as in numpy (DESIGN.md): a lower-rank or scalar `a` lines up with b's last
    axes in the caller's layout, the same as `a` with leading 1s; a rank above 3 is an error."""
    r = np.random.default_rng(4)
    b = rand(r, caller((B, T, N), axis), np.float64)
    last = b.shape[-1]
    for a in (rand(r, (last,), np.float64), rand(r, (1, last), np.float64), rand(r, (b.shape[1], 1), np.float64),
              0.5, np.float64(0.5)):
        a3 = np.reshape(a, (1,) * (3 - np.ndim(a)) + np.shape(a))
        assert relerr(strux.diag_scan(a, b, axis=axis), loop(a3, b, None, axis, False)[0]) < 1e-13
    with pytest.raises(ValueError, match="'a'"):
        strux.diag_scan(np.full((1, 1, 1, 1), 0.5), b, axis=axis)
    assert relerr(strux.diag_scan(np.full((1, 1, 1), 0.5), b, axis=axis), loop(0.5, b, None, axis, False)[0]) < 1e-13


def test_real_a_broadcast_with_complex_b():
    r = np.random.default_rng(5)
    a, b = rand(r, (1, 1, N), np.float64, 0.6), rand(r, (B, T, N), np.complex128)
    h = strux.diag_scan(a, b, reverse=True)
    assert h.dtype == np.complex128 and relerr(h, loop(a, b, None, 1, True)[0]) < 1e-13
    da, db, _ = strux.diag_scan_vjp(rand(r, (B, T, N), np.complex128), a, b, reverse=True)
    assert da.dtype == np.float64 and da.shape == (1, 1, N) and db.dtype == np.complex128


def test_float16_with_layouts():
    r = np.random.default_rng(6)
    a, b = rand(r, (1, N, 1), np.float16, 0.5), rand(r, (B, N, T), np.float16)
    h = strux.diag_scan(a, b, axis=2, reverse=True)
    assert h.dtype == np.float16 and relerr(h, loop(a, b, None, 2, True)[0]) < 2e-3
    da, db, dh0 = strux.diag_scan_vjp(np.ones_like(b), a, b, axis=2, reverse=True)
    assert da.dtype == np.float16 and da.shape == (1, N, 1) and db.dtype == np.float16 and dh0 is None


def test_cpu_arrays_other_than_numpy():
    r = np.random.default_rng(7)
    a, b = rand(r, (1, N, 1), np.float64, 0.6), rand(r, (B, N, T), np.float64)
    h = strux.diag_scan(a.tolist(), b.tolist(), axis=2)
    assert relerr(h, loop(a, b, None, 2, False)[0]) < 1e-13


def test_plain_call_takes_no_layout_path(monkeypatch):
    """The defaults cost one check: a plain call never enters the layout functions."""
    def boom(*args):
        raise AssertionError("layout path taken")
    monkeypatch.setattr(S, "_diag_scan_layout", boom)
    monkeypatch.setattr(S, "_diag_scan_vjp_layout", boom)
    r = np.random.default_rng(8)
    a, b, h0 = rand(r, (B, T, N), np.float64, 0.6), rand(r, (B, T, N), np.float64), rand(r, (B, N), np.float64)
    strux.diag_scan(a, b, h0, return_final=True)
    strux.diag_scan(a, b, h0=h0, axis=1, reverse=False)
    strux.diag_scan_vjp(b, a, b, h0, dh_last=h0)
    with pytest.raises(AssertionError, match="layout"):
        strux.diag_scan(a, b, reverse=True)


# ---- gradients ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("a_shape", A_SHAPES, ids=A_IDS)
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("with_h0,with_last", [(False, False), (True, False), (False, True), (True, True)])
def test_vjp_adjoint_identity(dtype, a_shape, reverse, axis, with_h0, with_last):
    """Re<dh, J v> + Re<dh_last, J_final v> = Re<J* (dh, dh_last), v> for a random direction v,
    J the exact derivative of the loop (so da of a broadcast `a` must be the sum over the
    broadcast axes)."""
    r = np.random.default_rng(hash((a_shape, reverse, axis, with_h0, with_last)) % 2**32)
    a = rand(r, caller(a_shape, axis), dtype, 0.6)
    b = rand(r, caller((B, T, N), axis), dtype)
    h0 = rand(r, (B, N), dtype) if with_h0 else None
    dh, dl = rand(r, b.shape, dtype), (rand(r, (B, N), dtype) if with_last else None)
    va, vb = rand(r, a.shape, dtype), rand(r, b.shape, dtype)
    vh0 = None if h0 is None else rand(r, h0.shape, dtype)
    da, db, dh0 = strux.diag_scan_vjp(dh, a, b, h0, dh_last=dl, axis=axis, reverse=reverse)
    assert da.shape == a.shape and db.shape == b.shape and da.dtype == dtype and db.dtype == dtype
    assert (dh0 is None) == (h0 is None)
    _, _, jh, jfinal = loop(a, b, h0, axis, reverse, va, vb, vh0)
    lhs = re_dot(dh, jh) + (0.0 if dl is None else re_dot(dl, jfinal))
    rhs = re_dot(da, va) + re_dot(db, vb) + (0.0 if h0 is None else re_dot(dh0, vh0))
    assert abs(lhs - rhs) <= 1e-11 * (abs(lhs) + 1), (lhs, rhs)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("a_shape", [(B, T, N), (1, 1, N), (B, T, 1)], ids=["full", "1x1xn", "BxTx1"])
@pytest.mark.parametrize("axis,reverse", [(1, True), (2, False), (-1, True)])
def test_vjp_finite_differences(dtype, a_shape, axis, reverse):
    """dL = Re<grad, v> for L = Re<dh, h> + Re<dh_last, h_last>, by central differences of
    strux's own forward (PyTorch's convention for complex inputs)."""
    r = np.random.default_rng(hash((a_shape, axis, reverse)) % 2**32)
    a = rand(r, caller(a_shape, axis), dtype, 0.6)
    b = rand(r, caller((B, T, N), axis), dtype)
    h0, dh, dl = rand(r, (B, N), dtype), rand(r, b.shape, dtype), rand(r, (B, N), dtype)
    grads = strux.diag_scan_vjp(dh, a, b, h0, dh_last=dl, axis=axis, reverse=reverse)

    def loss(x):
        h, last = strux.diag_scan(*x, axis=axis, reverse=reverse, return_final=True)
        return re_dot(dh, h) + re_dot(dl, last)

    eps = 1e-6
    for i, (x, g) in enumerate(zip((a, b, h0), grads)):
        v = rand(r, x.shape, dtype)
        plus, minus = [a, b, h0], [a, b, h0]
        plus[i], minus[i] = x + eps * v, x - eps * v
        fd = (loss(plus) - loss(minus)) / (2 * eps)
        assert abs(fd - re_dot(g, v)) <= 1e-7 * (abs(fd) + 1), (i, fd, re_dot(g, v))


def test_vjp_float32_close_to_float64():
    r = np.random.default_rng(9)
    a, b = rand(r, (B, N, 1), np.complex128, 0.6), rand(r, (B, N, T), np.complex128)
    dh, h0 = rand(r, (B, N, T), np.complex128), rand(r, (B, N), np.complex128)
    g64 = strux.diag_scan_vjp(dh, a, b, h0, axis=2, reverse=True)
    g32 = strux.diag_scan_vjp(*(x.astype(np.complex64) for x in (dh, a, b, h0)), axis=2, reverse=True)
    for x, y in zip(g32, g64):
        assert x.dtype == np.complex64 and x.shape == y.shape and relerr(x, y) < 2e-5


# ---- errors ------------------------------------------------------------------------------------

def _ab(axis=1):
    r = np.random.default_rng(10)
    return rand(r, caller((B, T, N), axis), np.float64, 0.6), rand(r, caller((B, T, N), axis), np.float64)


@pytest.mark.parametrize("axis", [0, 3, -2, -3, True, 1.0, "1", None])
def test_bad_axis(axis):
    a, b = _ab()
    with pytest.raises(ValueError, match="'axis'"):
        strux.diag_scan(a, b, axis=axis)
    with pytest.raises(ValueError, match="'axis'"):
        strux.diag_scan_vjp(b, a, b, axis=axis)


def test_numpy_integer_axis_is_taken():
    a, b = _ab(2)
    assert np.array_equal(strux.diag_scan(a, b, axis=np.int64(2)), strux.diag_scan(a, b, axis=2))
    assert np.array_equal(strux.diag_scan(a, b, axis=np.int32(-1)), strux.diag_scan(a, b, axis=2))


@pytest.mark.parametrize("reverse", [1, 0, "yes", None])
def test_bad_reverse(reverse):
    a, b = _ab()
    with pytest.raises(TypeError, match="'reverse'"):
        strux.diag_scan(a, b, reverse=reverse)
    with pytest.raises(TypeError, match="'reverse'"):
        strux.diag_scan_vjp(b, a, b, reverse=reverse)


@pytest.mark.parametrize("a_shape", [(B, 2, N), (B, T, N + 1), (3, T, N), (1, B, T, N), (N, 1), (B, T, N, 1)])
def test_a_not_broadcastable(a_shape):
    _, b = _ab()
    a = np.full(a_shape, 0.5)
    with pytest.raises(ValueError, match=r"'a'.*" + re.escape(str(b.shape)) + ".*" + re.escape(str(a_shape))):
        strux.diag_scan(a, b)
    with pytest.raises(ValueError, match="'a'"):
        strux.diag_scan_vjp(b, a, b)


def test_b_is_not_broadcast():
    """h has b's shape: a larger `a` is an error naming 'a', not a broadcast b."""
    a, b = _ab()
    with pytest.raises(ValueError, match="'a'"):
        strux.diag_scan(a, b[:1])


@pytest.mark.parametrize("axis", [2, -1])
def test_shapes_of_h0_dh_dh_last_in_time_last_layout(axis):
    a, b = _ab(axis)   # (B, n, T)
    with pytest.raises(ValueError, match="'h0'"):
        strux.diag_scan(a, b, np.zeros((B, T)), axis=axis)
    strux.diag_scan(a, b, np.zeros((B, N)), axis=axis)
    with pytest.raises(ValueError, match="'dh'"):   # dh in the (B, T, n) layout, not h's
        strux.diag_scan_vjp(np.zeros((B, T, N)), a, b, axis=axis)
    with pytest.raises(ValueError, match="'dh_last'"):
        strux.diag_scan_vjp(np.zeros_like(b), a, b, axis=axis, dh_last=np.zeros((B, T)))
    with pytest.raises(ValueError, match="'b'"):
        strux.diag_scan(a[0], b[0], axis=axis)


def test_broadcast_a_dtype_errors_name_the_argument():
    _, b = _ab()
    with pytest.raises(TypeError, match="'a'"):
        strux.diag_scan(np.full((1, 1, N), 0.5, np.float32), b)
    with pytest.raises(TypeError, match="'a'"):
        strux.diag_scan(np.full((1, 1, N), 1, np.int64).astype("U1"), b, reverse=True)


# ---- strux.torch (CPU tensors; the GPU ones: test_cuda_scan_layouts.py) -------------------------

@pytest.mark.parametrize("dtype", ["float64", "complex128"])
@pytest.mark.parametrize("a_shape", [(B, T, N), (1, 1, N), (B, T, 1)], ids=["full", "1x1xn", "BxTx1"])
@pytest.mark.parametrize("axis,reverse", [(1, True), (2, False), (-1, True), (2, True)])
def test_torch_diag_scan_layouts(dtype, a_shape, axis, reverse):
    """strux.torch.diag_scan takes the same keywords: forward against the loop, autograd against
    strux.diag_scan_vjp (da in a's broadcast shape), return_final the final state."""
    torch = pytest.importorskip("torch")
    import strux.torch as st
    r = np.random.default_rng(hash((a_shape, axis, reverse)) % 2**32)
    na, nb = rand(r, caller(a_shape, axis), np.dtype(dtype), 0.6), rand(r, caller((B, T, N), axis), np.dtype(dtype))
    nh0, ndh, ndl = (rand(r, s, np.dtype(dtype)) for s in ((B, N), nb.shape, (B, N)))
    a, b, h0 = (torch.tensor(x, requires_grad=True) for x in (na, nb, nh0))
    h, last = st.diag_scan(a, b, h0, axis=axis, reverse=reverse, return_final=True)
    want, want_last = loop(na, nb, nh0, axis, reverse)
    assert tuple(h.shape) == nb.shape and h.is_contiguous()
    assert relerr(h.detach().numpy(), want) < 1e-13 and relerr(last.detach().numpy(), want_last) < 1e-13
    # L = Re<dh, h> + Re<dh_last, h_last>: torch's gradients are strux's vjp (PyTorch's convention)
    loss = sum((torch.conj(torch.tensor(c)) * x).real.sum() for c, x in ((ndh, h), (ndl, last)))
    loss.backward()
    for g, want_g in zip((a.grad, b.grad, h0.grad),
                         strux.diag_scan_vjp(ndh, na, nb, nh0, dh_last=ndl, axis=axis, reverse=reverse)):
        assert tuple(g.shape) == want_g.shape and relerr(g.numpy(), want_g) < 1e-13


def test_torch_diag_scan_layout_errors():
    torch = pytest.importorskip("torch")
    import strux.torch as st
    a, b = torch.full((1, 2, N), 0.5), torch.ones(B, T, N)
    with pytest.raises(ValueError, match="'a'"):
        st.diag_scan(a, b)
    with pytest.raises(ValueError, match="'axis'"):
        st.diag_scan(b, b, axis=0)
    with pytest.raises(TypeError, match="'reverse'"):
        st.diag_scan(b, b, reverse=1)


# ---- larger shapes: the CPU kernels' tiles (time-last), chunks and batch-shared sums ------------

def stable(r, shape, dtype):
    """|a| in [0.5, 0.99): the recurrence stays bounded over long T."""
    m = r.uniform(0.5, 0.99, shape)
    a = m * (np.exp(1j * r.uniform(-np.pi, np.pi, shape)) if np.dtype(dtype).kind == "c" else r.choice([-1, 1], shape))
    return a.astype(dtype)


BIG = [(3, 133, 37), (2, 64, 16), (1, 200, 1), (2, 1, 20), (4, 17, 300)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("dims", BIG, ids=lambda d: "x".join(map(str, d)))
@pytest.mark.parametrize("a_kind", ["full", "1x1xn", "Bx1xn", "1xTxn"])
@pytest.mark.parametrize("axis,reverse", [(1, True), (2, False), (2, True), (1, False)])
def test_layouts_larger_shapes(dtype, dims, a_kind, axis, reverse):
    Bb, Tt, Nn = dims
    a_shape = {"full": (Bb, Tt, Nn), "1x1xn": (1, 1, Nn), "Bx1xn": (Bb, 1, Nn), "1xTxn": (1, Tt, Nn)}[a_kind]
    r = np.random.default_rng(hash((dims, a_kind, axis, reverse)) % 2**32)
    a = stable(r, caller(a_shape, axis), dtype)
    b = rand(r, caller(dims, axis), dtype)
    h0 = rand(r, (Bb, Nn), dtype)
    tol = 1e-12 if np.dtype(dtype).itemsize >= 16 or dtype == np.float64 else 2e-5
    for hh in (None, h0):
        h, final = strux.diag_scan(a, b, hh, axis=axis, reverse=reverse, return_final=True)
        want, want_final = loop(a, b, hh, axis, reverse)
        # the final state against the scale of h (one value of it may come from cancellation)
        assert relerr(h, want) < tol and np.abs(final - want_final).max() <= tol * np.abs(want).max()
    if np.dtype(dtype).itemsize not in (8, 16) or dtype == np.complex64:
        return  # gradients: float64 and complex128 (the adjoint identity needs their precision)
    dh, dl = rand(r, b.shape, dtype), rand(r, (Bb, Nn), dtype)
    va, vb, vh0 = rand(r, a.shape, dtype), rand(r, b.shape, dtype), rand(r, h0.shape, dtype)
    da, db, dh0 = strux.diag_scan_vjp(dh, a, b, h0, dh_last=dl, axis=axis, reverse=reverse)
    assert da.shape == a.shape and db.shape == b.shape and dh0.shape == h0.shape
    _, _, jh, jfinal = loop(a, b, h0, axis, reverse, va, vb, vh0)
    lhs = re_dot(dh, jh) + re_dot(dl, jfinal)
    rhs = re_dot(da, va) + re_dot(db, vb) + re_dot(dh0, vh0)
    assert abs(lhs - rhs) <= 1e-10 * (abs(lhs) + 1), (lhs, rhs)


def test_layouts_read_noncontiguous_inputs():
    r = np.random.default_rng(5)
    a = stable(r, (2, 40, 9), np.float64)[:, ::2]  # (2, 20, 9), strided
    b = rand(r, (2, 9, 40), np.float64)[:, :, ::2]  # (2, 9, 20) time-last, strided
    h = strux.diag_scan(np.swapaxes(a, 1, 2), b, axis=2)
    assert relerr(h, loop(np.swapaxes(a, 1, 2), b, None, 2, False)[0]) < 1e-13


# ---- float16 read and written by the forward kernel (channels-last layouts) -------------------

@pytest.mark.parametrize("dims", [(3, 133, 37), (1, 1, 5), (2, 9, 300), (1, 600, 3)], ids=lambda d: "x".join(map(str, d)))
@pytest.mark.parametrize("a_kind", ["full", "1x1xn", "Bx1xn", "1xTxn"])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("with_h0", [False, True])
def test_float16_forward_kernel(dims, a_kind, reverse, with_h0):
    """The float16 path computes in float32 and rounds each h once: within a float16 rounding
    of the float32 path, and close to the float64 loop."""
    Bb, Tt, Nn = dims
    a_shape = {"full": (Bb, Tt, Nn), "1x1xn": (1, 1, Nn), "Bx1xn": (Bb, 1, Nn), "1xTxn": (1, Tt, Nn)}[a_kind]
    r = np.random.default_rng(hash((dims, a_kind, reverse, with_h0)) % 2**32)
    a = stable(r, a_shape, np.float16)
    b = rand(r, dims, np.float16)
    h0 = rand(r, (Bb, Nn), np.float16) if with_h0 else None
    h, final = strux.diag_scan(a, b, h0, reverse=reverse, return_final=True)
    assert h.dtype == np.float16 and final.dtype == np.float16 and h.shape == dims
    h32 = strux.diag_scan(a.astype(np.float32), b.astype(np.float32), None if h0 is None else h0.astype(np.float32),
                          reverse=reverse)
    assert np.allclose(h.astype(np.float32), h32, rtol=2e-3, atol=2e-3 * np.abs(h32).max())
    want, want_final = loop(a, b, h0, 1, reverse)
    assert relerr(h, want) < 2e-3 and relerr(final, want_final) < 2e-3


def test_float16_forward_kernel_edge_values():
    a = np.full((1, 4, 3), 0.5, np.float16)
    b = np.ones((1, 4, 3), np.float16)
    a[0, 0, 1] = np.inf  # inf * 0 at the first step: NaN, as the formula in IEEE arithmetic
    b[0, 2, 2] = np.nan
    h = strux.diag_scan(a, b)
    assert np.isnan(h[0, :, 1]).all() and np.isnan(h[0, 2:, 2]).all() and not np.isnan(h[0, :2, 2]).any()
    assert not np.isnan(h[0, :, 0]).any()
    big = np.full((1, 3, 2), 300.0, np.float16)  # h overflows float16 (> 65504): inf, as a cast would
    assert np.isinf(strux.diag_scan(big, big)[0, 2]).all()
    nc = rand(np.random.default_rng(1), (2, 20, 6), np.float16)[:, ::2]  # noncontiguous
    assert relerr(strux.diag_scan(nc * np.float16(0.5), nc), loop(nc * np.float16(0.5), nc, None, 1, False)[0]) < 2e-3
