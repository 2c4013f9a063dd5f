"""Shared helpers of the GPU ks tests (test_cuda_ks.py, test_cuda_ks_paths.py,
test_cuda_ks_backward.py): the skip mark, forced kernel choices (force), float64 references of the
DESIGN.md formula (dense K), error measures and the paths a plan picks (ks_path, dw_path)."""
import functools
import sys

import pytest

torch = pytest.importorskip("torch")
from strux import _cuda_ks as K  # noqa: E402

needs_gpu = pytest.mark.skipif(not (torch.cuda.is_available() and K.available()),
                               reason="needs a CUDA GPU and strux built with CUDA")
DEV = "cuda"
TOL = {torch.float32: 1e-5, torch.float16: 3e-3, torch.bfloat16: 2e-2}

# Forced kernel choices are options passed to the plans (strux._cuda_options). force() makes the
# tests' K calls (they call K.ks_*, looked up on the module at each call) and the path queries
# below pass them; the forced options live here, in this module's _FORCED, so one force() serves
# every test module, and monkeypatch restores both after each test.
_PLAIN = {n: getattr(K, n) for n in ("ks_matmul", "ks_matmul_vjp", "ks_chain", "ks_chain_vjp")}
_FORCED: dict = {}


def force(monkeypatch, **options):
    """K.ks_* and ks_path / dw_path with these options (none: the plans' own choice)."""
    monkeypatch.setattr(sys.modules[__name__], "_FORCED", options)
    for name, f in _PLAIN.items():
        monkeypatch.setattr(K, name, functools.partial(f, options=options) if options else f)


def _code():
    return K._O.ks_code(_FORCED or None)


def dense_loop(w, p):
    """The dense K (M, N) of one factor, float64, entry by entry from the index formula."""
    a, b, c, d = p
    Kd = torch.zeros(a * b * d, a * c * d, dtype=torch.float64)
    wc = w.double().cpu()
    for i in range(a):
        for k in range(b):
            for l in range(c):
                for j in range(d):
                    Kd[i * b * d + k * d + j, i * c * d + l * d + j] = wc[i, k, l, j]
    return Kd.to(w.device)


def dense(w, p):
    """The same dense K through I_a ⊗ w ⊗ I_d (vectorised; checked against dense_loop)."""
    return dense_autograd([w.double()], [p])


def dense_autograd(wd, ps):
    Kt = None
    for w, p in zip(wd, ps):
        a, b, c, d = p
        eye_a, eye_d = torch.eye(a, dtype=w.dtype, device=w.device), torch.eye(d, dtype=w.dtype, device=w.device)
        D = torch.einsum("iklj,ie,jf->ikjelf", w, eye_a, eye_d).reshape(a * b * d, a * c * d)
        Kt = D if Kt is None else Kt @ D
    return Kt


def rel(x, ref, scale=None):
    """|x - ref| / |scale| (default: ref). For products that can cancel (a single output of a few
    terms), pass scale = the same product of absolute values: float32 rounding is relative to
    the terms, not to their sum."""
    s = ref if scale is None else scale
    return ((x.double() - ref).norm() / s.norm().clamp_min(1e-300)).item()


def rnd(*shape, dtype=torch.float32):
    return torch.randn(*shape, device=DEV, dtype=torch.float64).to(dtype)


def poisoned_pool(nbytes):
    """Leaves a freed NaN-filled block in PyTorch's cache so that the next output allocation of
    that size reuses it: an output element the kernel never writes stays NaN."""
    torch.full((nbytes // 4 + 64,), float("nan"), device=DEV)


def nan_in_one_group():
    """(bad, cols, b): which outputs are NaN after one NaN is put in x (row 7 of 300, group
    (i=1, j=1) of pattern (2, 64, 40, 2)) under the forced options, and the columns of that group's
    outputs in row 7."""
    p = (2, 64, 40, 2)
    a, b, c, d = p
    w = rnd(*p)
    x = rnd(300, a * c * d)
    x[7, 1 * c * d + 3 * d + 1] = float("nan")  # group (i=1, j=1)
    bad = torch.isnan(K.ks_matmul(x, w, p))
    return bad, torch.tensor([1 * b * d + k * d + 1 for k in range(b)], device=DEV), b


def side_stream_product(q):
    """(y, y2, x1, w) of a product of pattern q (batch 4096, batch-first) enqueued on a side stream
    behind ~10 ms of GPU sleep and a copy that gives x its values (y2: a copy of y enqueued right
    after): both must equal the product of x1, so the call ran on that stream, in order."""
    w = rnd(*q)
    x0, x1 = rnd(4096, q[0] * q[2] * q[3]), rnd(4096, q[0] * q[2] * q[3])
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        torch.cuda._sleep(20_000_000)  # ~10 ms of GPU time before x0 becomes x1
        x0.copy_(x1)
        y = K.ks_matmul(x0, w, q)
        y2 = y.clone()
    s.synchronize()
    return y, y2, x1, w


def ks_path(p, batch, layout, dtype="float32"):
    """(forward, backward_x) path a plan picks: "blas" (cuBLAS on strided views) or "kernels"."""
    return tuple(K._ext.cuda_ks_path(list(p), batch, layout == "bsl", K._DTYPE_CODE[dtype], _code()))


def dw_path(p, batch, layout, dtype="float32"):
    """backward_w's path and batch chunk: ("blas", rows per GEMM accumulation) or ("kernels", 0)."""
    return tuple(K._ext.cuda_ks_dw_path(list(p), batch, layout == "bsl", K._DTYPE_CODE[dtype], _code()))


def refs(x, w, dy, p, layout):
    """float64 y, dx, dw of the DESIGN.md formula (dense K; dw by einsum over the batch), and the
    scale of dw's rounding errors, T = sqrt(sum over the batch of (dy x)^2) per element: a sum's
    float32 error is relative to T, not to the sum itself, which may cancel (see dw_err)."""
    a, b, c, d = p
    Kd = dense(w, p)
    xd, dyd = x.double(), dy.double()
    if layout == "bsf":
        y, dx, xb, dyb = xd @ Kd.T, dyd @ Kd, xd, dyd
    else:
        y, dx, xb, dyb = Kd @ xd, Kd.T @ dyd, xd.T, dyd.T
    dw = torch.einsum("nikj,nilj->iklj", dyb.reshape(-1, a, b, d), xb.reshape(-1, a, c, d))
    T = torch.einsum("nikj,nilj->iklj", dyb.reshape(-1, a, b, d) ** 2, xb.reshape(-1, a, c, d) ** 2).sqrt()
    return y, dx, (dw, T)


def dw_err(dw, ref):
    """||dw - dw64|| / ||T||: the norm-wise error in units of the sums' rounding scale T (refs);
    equals the relative error for sums without cancellation, stays meaningful for one element
    whose sum cancels (a 7-row single-element dw measured 1.3e-6 'relative' on the H200 with a
    correct float32 sum)."""
    r, T = ref
    return ((dw.double() - r).norm() / T.norm().clamp_min(1e-300)).item()


def acts(p, batch, layout, dtype):
    a, b, c, d = p
    N, M = a * c * d, a * b * d
    if layout == "bsf":
        return rnd(batch, N, dtype=dtype), rnd(batch, M, dtype=dtype)
    return rnd(N, batch, dtype=dtype), rnd(M, batch, dtype=dtype)


def dw_tol(chunk):
    """float32 dw vs float64 (dw_err): one sequential float32 accumulation of n products errs by
    ~0.3-0.4 u sqrt(n) T (u = 2^-24; the running sum grows like a random walk), the chunk sums
    add ~u T more; 1.5 u sqrt(chunk) + 2e-7 leaves a factor ~4 over the mean (a float32 simulation
    of these patterns and batches, 20 seeds: at most 0.53 of it, for single elements; many
    elements average out: 0.19). 512-row chunks: 2.2e-6 (measured 4.3e-7 on the H200); one
    25088-row sum would measure ~3e-6 and fail."""
    return 1.5 * 2.0 ** -24 * chunk ** 0.5 + 2e-7
