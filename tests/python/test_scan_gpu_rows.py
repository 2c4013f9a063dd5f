"""The rows solver of diag_scan (n = 1: the time-last layout (B, n, T) viewed as (B * n, T, 1)),
forced through options={"path": "rows"}, against the float64 formula: forward and gradients,
every dtype it takes, T around its tile (128 threads x 16 bytes) and not a whole number of 16
bytes, h0, misaligned pointers (the guarded per-element path), in place, NaN, and the
ValueError where it does not apply. Skipped without PyTorch, a GPU or the CUDA build."""
import pytest

torch = pytest.importorskip("torch")
from strux import _cuda_scan as K  # noqa: E402
from test_scan_gpu_solvers import DEV, TOL, coeffs, ref_bwd, ref_fwd, rel  # noqa: E402

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and K.available()),
                                reason="needs a CUDA GPU and strux built with CUDA")
O = {"path": "rows"}
DTYPES = [torch.float32, torch.complex64, torch.float16, torch.bfloat16]
# T: 1, odd, one tile of f32 (1024) +- 1, several tiles, a partial last tile, a long row
TS = [1, 3, 8, 1023, 1024, 1025, 2048, 4099, 5000]


def check(a, b, h0, dh, dtype):
    h = K.diag_scan(a, b, h0=h0, options=O)
    assert h.dtype == dtype and h.shape == a.shape
    assert rel(h, ref_fwd(a, b, h0)) < TOL[dtype]
    da, db, dh0 = K.diag_scan_vjp(dh, a, b, h0=h0, options=O)
    rda, rdb, rdh0 = ref_bwd(dh, a, b, h0)
    assert rel(db, rdb) < TOL[dtype]
    assert rel(da, rda) < TOL[dtype]
    assert (dh0 is None) == (h0 is None)
    if h0 is not None:
        assert rel(dh0, rdh0) < TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("T", TS)
@pytest.mark.parametrize("with_h0", [False, True])
def test_rows_forward_and_vjp(dtype, T, with_h0):
    B = 3
    a, b = coeffs(B, T, 1, dtype)
    h0 = coeffs(B, 1, 1, dtype, seed=1)[1][:, 0].contiguous() if with_h0 else None
    dh = coeffs(B, T, 1, dtype, seed=2)[1]
    check(a, b, h0, dh, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64], ids=str)
def test_rows_long_matches_seq1(dtype):
    """Long rows (64 tiles and a partial one) against the streaming solver on the same values."""
    B, T = 5, 65536 + 100
    a, b = coeffs(B, T, 1, dtype)
    h0 = coeffs(B, 1, 1, dtype, seed=1)[1][:, 0].contiguous()
    dh = coeffs(B, T, 1, dtype, seed=2)[1]
    s = {"path": "seq1"}
    assert rel(K.diag_scan(a, b, h0=h0, options=O), wide_ref(K.diag_scan(a, b, h0=h0, options=s))) < TOL[dtype]
    got, want = K.diag_scan_vjp(dh, a, b, h0=h0, options=O), K.diag_scan_vjp(dh, a, b, h0=h0, options=s)
    for g, w in zip(got, want):
        assert rel(g, wide_ref(w)) < TOL[dtype]


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64, torch.bfloat16], ids=str)
@pytest.mark.parametrize("T", [7, 1024, 3001])
def test_rows_misaligned(dtype, T):
    """Arrays one element off 16-byte alignment: the per-element path of the same tiles."""
    def off(x):
        buf = torch.empty(x.numel() + 1, dtype=x.dtype, device=DEV)
        y = buf[1:].view(x.shape)
        y.copy_(x)
        return y

    a, b = coeffs(4, T, 1, dtype)
    dh = coeffs(4, T, 1, dtype, seed=2)[1]
    h0 = coeffs(4, 1, 1, dtype, seed=1)[1][:, 0].contiguous()
    a_m, b_m, dh_m = off(a), off(b), off(dh)
    assert a_m.data_ptr() % 16 != 0
    check(a_m, b_m, h0, dh_m, dtype)


def test_rows_time_last_view_matches_axis2():
    """(B, n, T) time-last arrays as (B * n, T, 1) views: the same h as the public axis=2 call."""
    import strux
    B, n, T = 2, 5, 777
    a, b = coeffs(B * n, T, 1, torch.float32)
    a3, b3 = a.view(B, n, T), b.view(B, n, T)
    h = K.diag_scan(a, b, options=O).view(B, n, T)
    want = strux.diag_scan(a3, b3, axis=2)
    assert rel(h, wide_ref(want)) < TOL[torch.float32]


def wide_ref(x):
    return x.detach().cpu().to(torch.complex128 if x.is_complex() else torch.float64)


def test_rows_in_place_and_nan():
    a, b = coeffs(2, 3000, 1, torch.float32)
    ref = ref_fwd(a, b)
    K._diag_fwd(a, b, None, 1.0, K._O.diag_scan_code(O), out=b)
    assert rel(b, ref) < TOL[torch.float32]
    a, b = coeffs(2, 3000, 1, torch.float32)
    b[0, 1234, 0] = float("nan")
    nan = torch.isnan(K.diag_scan(a, b, options=O)).cpu()
    assert nan[0, 1234:, 0].all() and not nan[0, :1234].any() and not nan[1].any()


def test_rows_applies_only_to_n1():
    with pytest.raises(ValueError, match="rows"):
        K.diag_scan(*coeffs(2, 50, 4, torch.float32), options=O)
    with pytest.raises(ValueError):
        K.diag_scan(*coeffs(2, 50, 1, torch.float64), options=O)
    assert "rows" in K.diag_scan_describe(8, 4096, 1, "float32", options=O)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("B, n, T", [(1, 1, 1), (2, 3, 1000), (3, 50, 257), (1, 200, 64), (2, 80, 1100)])
@pytest.mark.parametrize("contiguous", [True, False])
def test_public_time_last_runs_as_rows(dtype, B, n, T, contiguous):
    """strux.diag_scan / diag_scan_vjp / strux.torch.diag_scan with axis=2 on CUDA tensors, against
    the float64 recurrence in (B, T, n); h0, dh_last, return_final; time-last arrays that are
    transposed views of (B, T, n) storage too. (2, 80, 1100): 160 rows of a whole tile, the
    (B * n, T, 1) row view where the GPU has at most 160 SMs; the others take the copies."""
    import strux
    import strux.torch as st
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert K.runs_as_rows(torch.empty(B, n, T, dtype=dtype, device=DEV)) == (B * n >= sms and T >= 1024 * 2 // (
        torch.empty((), dtype=dtype).element_size())), (B, n, T)
    a, b = coeffs(B, T, n, dtype)
    dh = coeffs(B, T, n, dtype, seed=2)[1]
    h0 = coeffs(B, 1, n, dtype, seed=1)[1][:, 0].contiguous()
    dl = coeffs(B, 1, n, dtype, seed=3)[1][:, 0].contiguous()
    tl = (lambda x: x.transpose(1, 2).contiguous()) if contiguous else (lambda x: x.transpose(1, 2))
    h, last = strux.diag_scan(tl(a), tl(b), h0, axis=2, return_final=True)
    want = ref_fwd(a, b, h0)
    assert h.shape == (B, n, T) and last.shape == (B, n)
    assert rel(h.transpose(1, 2), want) < TOL[dtype]
    assert rel(last, want[:, -1]) < TOL[dtype]
    dhw = dh.clone()
    dhw[:, -1] += dl
    rda, rdb, rdh0 = ref_bwd(dhw, a, b, h0)
    da, db, dh0 = strux.diag_scan_vjp(tl(dh), tl(a), tl(b), h0, dh_last=dl, axis=2)
    assert rel(da.transpose(1, 2), rda) < TOL[dtype] and rel(db.transpose(1, 2), rdb) < TOL[dtype]
    assert rel(dh0, rdh0) < TOL[dtype]
    if dtype.is_complex:
        return  # torch autograd's complex convention is checked in the torch tests
    t = [tl(a).clone().requires_grad_(True), tl(b).clone().requires_grad_(True), h0.clone().requires_grad_(True)]
    ht = st.diag_scan(*t, axis=2)
    assert rel(ht.detach().transpose(1, 2), want) < TOL[dtype]
    ht.backward(tl(dh))
    rda, rdb, rdh0 = ref_bwd(dh, a, b, h0)
    assert rel(t[0].grad.transpose(1, 2), rda) < TOL[dtype] and rel(t[1].grad.transpose(1, 2), rdb) < TOL[dtype]
    assert rel(t[2].grad, rdh0) < TOL[dtype]
