"""The contract fixes of test_contract_audit_sk.py on CUDA tensors (torch): h0 as the third
positional argument of circulant_scan / block_circulant_scan and their vjp, and a lower-rank `a` in
diag_scan / diag_scan_vjp, each against the same float64 loops. Skipped without PyTorch, a GPU or
the CUDA build."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import strux  # noqa: E402
from strux import _cuda_scan as K  # noqa: E402
from test_contract_audit_sk import B, N, T, _circ, _loop_dense, _loop_diag, _rel  # noqa: E402

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and K.available()),
                                reason="needs a CUDA GPU and strux built with CUDA")


def dev(x):
    """float32 CUDA tensor of x, keeping its shape (a 0-d array stays 0-d)."""
    return torch.tensor(np.asarray(x, np.float32)).cuda()


def host(x):
    return x.detach().cpu().double().numpy()


@pytest.mark.parametrize("Bb,Tt,n", [(2, 5, 8), (1, 1, 4), (3, 7, 16)])
def test_circulant_scan_h0_positional_cuda(Bb, Tt, n):
    r = np.random.default_rng(21)
    a, u, h0 = 0.5 * r.standard_normal((Bb, Tt, n)), r.standard_normal((Bb, Tt, n)), r.standard_normal((Bb, n))
    ref = _loop_dense(_circ(a), u, h0)
    h = strux.circulant_scan(dev(a), dev(u), dev(h0))
    assert h.is_cuda and _rel(host(h), ref) < 2e-5
    assert torch.equal(h, strux.circulant_scan(dev(a), dev(u), h0=dev(h0)))
    dh = dev(r.standard_normal((Bb, Tt, n)))
    g_pos = strux.circulant_scan_vjp(dh, dev(a), dev(u), dev(h0))
    g_kw = strux.circulant_scan_vjp(dh, dev(a), dev(u), h0=dev(h0))
    assert g_pos[2] is not None and all(torch.equal(x, y) for x, y in zip(g_pos, g_kw))
    g_cpu = strux.circulant_scan_vjp(host(dh), a, u, h0)
    assert all(_rel(host(x), y) < 1e-4 for x, y in zip(g_pos, g_cpu))


@pytest.mark.parametrize("Bb,Tt,p,k", [(2, 3, 2, 4), (1, 1, 1, 2), (1, 4, 4, 2)])
def test_block_circulant_scan_h0_positional_cuda(Bb, Tt, p, k):
    r = np.random.default_rng(22)
    n = p * k
    a = 0.4 * r.standard_normal((Bb, Tt, p, p, k))
    u, h0 = r.standard_normal((Bb, Tt, n)), r.standard_normal((Bb, n))
    c = np.moveaxis(_circ(a), -3, -2).reshape(Bb, Tt, n, n)
    h = strux.block_circulant_scan(dev(a), dev(u), dev(h0))
    assert h.is_cuda and _rel(host(h), _loop_dense(c, u, h0)) < 2e-5
    assert torch.equal(h, strux.block_circulant_scan(dev(a), dev(u), h0=dev(h0)))
    dh = dev(r.standard_normal((Bb, Tt, n)))
    g_pos = strux.block_circulant_scan_vjp(dh, dev(a), dev(u), dev(h0))
    g_kw = strux.block_circulant_scan_vjp(dh, dev(a), dev(u), h0=dev(h0))
    assert g_pos[2] is not None and all(torch.equal(x, y) for x, y in zip(g_pos, g_kw))


@pytest.mark.parametrize("axis", [1, 2])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("a_shape", [(N,), (1, N), (T, N), (1, 1), ()], ids=str)
def test_diag_scan_lower_rank_a_cuda(a_shape, reverse, axis):
    r = np.random.default_rng(23)
    bshape = (B, T, N) if axis == 1 else (B, N, T)
    a_shape = tuple(bshape[len(bshape) - len(a_shape):][i] if s != 1 else 1 for i, s in enumerate(a_shape))
    a = 0.8 * r.standard_normal(a_shape)
    b, h0 = r.standard_normal(bshape), r.standard_normal((B, N))
    a = np.asarray(a, np.float32).astype(np.float64)
    ref, ref_last = _loop_diag(a, b, h0, reverse, axis)
    h, last = strux.diag_scan(dev(a), dev(b), dev(h0), axis=axis, reverse=reverse, return_final=True)
    assert h.is_cuda and tuple(h.shape) == bshape and h.dtype == torch.float32
    assert _rel(host(h), ref) < 2e-5 and _rel(host(last), ref_last) < 2e-5
    dh = r.standard_normal(bshape)
    da, db, dh0 = strux.diag_scan_vjp(dev(dh), dev(a), dev(b), dev(h0), axis=axis, reverse=reverse)
    rda, rdb, rdh0 = strux.diag_scan_vjp(dh, a, b, h0, axis=axis, reverse=reverse)
    assert tuple(da.shape) == a.shape
    assert _rel(host(da), rda) < 1e-4 and _rel(host(db), rdb) < 2e-5 and _rel(host(dh0), rdh0) < 2e-5
