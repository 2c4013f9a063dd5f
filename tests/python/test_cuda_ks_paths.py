"""GPU ks float32 product paths, each forced (plan options, force()) and at its default: the
3xTF32 tensor-core kernels, cuBLAS on strided views, the batch-last streaming kernel and the
batch-first transposition path; accuracy, tails, NaN/Inf, streams and the path rule."""
import pytest

from ks_cuda_common import (needs_gpu, DEV, K, TOL, dense, dw_path, force, ks_path, poisoned_pool,
                            nan_in_one_group, rel, rnd, side_stream_product, torch)

pytestmark = needs_gpu


# Patterns for the float32 tensor-core (3xTF32) kernel: out tiles 32..128 wide with tails
# (b = 130, 70, 33, 5), l tails that divide neither the stage (16) nor a 16-byte quad (c = 37,
# 129, 9), d > 1 (strided columns), and the bench's large patterns at small batch.
TC_PATTERNS = [(1, 130, 70, 1), (2, 64, 64, 3), (3, 33, 37, 2), (1, 200, 129, 1), (2, 5, 9, 1), (2, 40, 36, 1),
               (1, 48, 48, 16), (1, 96, 96, 2), (2, 192, 48, 4), (1, 768, 64, 1), (1, 64, 768, 1),
               (1, 96, 385, 2), (1, 200, 1031, 1)]


@pytest.mark.parametrize("p", TC_PATTERNS)
@pytest.mark.parametrize("layout", ["bsf", "bsl"])
@pytest.mark.parametrize("path", ["tc", "auto"])
def test_float32_tensor_core_accuracy(p, layout, path, monkeypatch):
    """float32 keeps ~1e-6 relative accuracy (3xTF32 split) at every batch tail and alignment.
    The mma accumulates in float32 with truncation, a bias that grows with the sum length K:
    measured ~7e-9 * K on the H200 with one running accumulator (5.4e-6 at K = 768); the kernel
    now sums each k8 step afresh and adds it with rounding, so every K (here up to 1031, forward
    and dx) must stay within 2e-6."""
    if path == "tc":  # the kernels even where the plan's rule picks cuBLAS (batch-last)
        force(monkeypatch, path="kernels")
    a, b, c, d = p
    tol = lambda k: 2e-6  # noqa: E731
    N, M = a * c * d, a * b * d
    w = rnd(*p)
    Kd = dense(w, p)
    for batch in (1, 6, 132, 1029):
        for offset in (0, 1):  # 1: a contiguous view 4 bytes past the allocation (no 16-byte copies)
            n = batch * N
            x = rnd(n + offset)[offset:].view(batch, N) if layout == "bsf" else \
                rnd(n + offset)[offset:].view(N, batch)
            poisoned_pool(4 * batch * M)
            y = K.ks_matmul(x, w, p, layout=layout)
            ref = x.double() @ Kd.T if layout == "bsf" else Kd @ x.double()
            sc = x.double().abs() @ Kd.abs().T if layout == "bsf" else Kd.abs() @ x.double().abs()
            assert not torch.isnan(y).any()
            e = rel(y, ref, sc)
            assert e < tol(c), (batch, offset, e)
            dy = rnd(*y.shape)
            poisoned_pool(4 * batch * N)
            dx, _ = K.ks_matmul_vjp(dy, x, w, p, layout=layout)
            refdx = dy.double() @ Kd if layout == "bsf" else Kd.T @ dy.double()
            scdx = dy.double().abs() @ Kd.abs() if layout == "bsf" else Kd.abs().T @ dy.double().abs()
            assert not torch.isnan(dx).any() and rel(dx, refdx, scdx) < tol(b)


def test_float32_large_values_and_nan():
    """Magnitudes far from 1 keep their relative accuracy (the lo part is relative to each
    value), and a NaN reaches exactly the outputs of its group."""
    p = (2, 64, 40, 2)
    a, b, c, d = p
    w = rnd(*p) * 1e-20
    x = rnd(300, a * c * d) * 1e25
    y = K.ks_matmul(x, w, p)
    assert rel(y, x.double() @ dense(w, p).T) < 2e-6
    x = rnd(300, a * c * d)
    x[7, 1 * c * d + 3 * d + 1] = float("nan")  # group (i=1, j=1)
    y = K.ks_matmul(x, w, p)
    bad = torch.isnan(y)
    cols = torch.tensor([1 * b * d + k * d + 1 for k in range(b)], device=DEV)
    assert bad[7, cols].all() and bad.sum() == b


@pytest.mark.parametrize("p", [(2, 64, 40, 2), (1, 48, 96, 1)])
def test_float32_infinity_stays_infinite(p):
    """An infinite input with finite weights of one sign gives +-inf outputs, never NaN."""
    a, b, c, d = p
    w = torch.rand(*p, device="cuda") + 0.1
    x = torch.rand(5, a * c * d, device="cuda")
    x[2, 0] = float("inf")
    y = K.ks_matmul(x, w, p)
    want = x.double().cpu() @ dense(w, p).T.cpu()
    assert torch.equal(torch.isinf(y).cpu(), torch.isinf(want)) and not torch.isnan(y).any()


BLAS_PATTERNS = [(1, 1, 1, 1), (3, 5, 7, 2), (2, 17, 19, 3), (1, 48, 48, 16), (2, 40, 33, 1),
                 (6, 64, 64, 1), (1, 100, 36, 1), (4, 6, 130, 1), (1, 9, 3, 5), (3, 2, 50, 2),
                 (1, 192, 96, 2), (1, 1, 7, 1), (3, 4, 1, 1), (2, 1, 1, 1)]


@pytest.mark.parametrize("p", BLAS_PATTERNS)
@pytest.mark.parametrize("layout", ["bsf", "bsl"])
def test_float32_blas_path(p, layout, monkeypatch):
    """cuBLAS on strided views (options path "blas"): taken for batch-last (any d) and batch-first
    d == 1, float32 accuracy (no TF32) vs float64 for forward and dx, odd batches, no output left
    unwritten; batch-first d > 1 stays on the kernels."""
    force(monkeypatch, path="blas")
    a, b, c, d = p
    N, M = a * c * d, a * b * d
    applies = layout == "bsl" or d == 1
    if not applies:  # a forced path that applies to no operation of the plan
        for dt in ("float32", "float16"):
            with pytest.raises(ValueError, match="path"):
                ks_path(p, 7, layout, dt)
        return
    assert ks_path(p, 7, layout) == ("blas",) * 2
    assert ks_path(p, 7, layout, "float16") == ("blas",) * 2
    w = rnd(*p)
    Kd = dense(w, p)
    for batch in (1, 7, 301):
        x = rnd(batch, N) if layout == "bsf" else rnd(N, batch)
        poisoned_pool(4 * batch * M)
        y = K.ks_matmul(x, w, p, layout=layout)
        ref = x.double() @ Kd.T if layout == "bsf" else Kd @ x.double()
        sc = x.double().abs() @ Kd.abs().T if layout == "bsf" else Kd.abs() @ x.double().abs()
        assert not torch.isnan(y).any() and rel(y, ref, sc) < 1e-6, rel(y, ref, sc)
        dy = rnd(*y.shape)
        poisoned_pool(4 * batch * N)
        dx, dw = K.ks_matmul_vjp(dy, x, w, p, layout=layout)
        refdx = dy.double() @ Kd if layout == "bsf" else Kd.T @ dy.double()
        scdx = dy.double().abs() @ Kd.abs() if layout == "bsf" else Kd.abs().T @ dy.double().abs()
        assert not torch.isnan(dx).any() and rel(dx, refdx, scdx) < 1e-6
    # forcing the kernels gives the same values to float32 accuracy
    force(monkeypatch, path="kernels")
    assert ks_path(p, 7, layout) == ("kernels", "kernels")
    assert rel(K.ks_matmul(x, w, p, layout=layout), y.double()) < 2e-6


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_knob_forces_half_types(dtype, monkeypatch):
    """Forcing the kernels puts half types back on the FFMA kernels (forward, dx and dw), =blas on
    cuBLAS; both give the same product to half accuracy."""
    p = (2, 40, 33, 2)
    x, w = rnd(2 * 33 * 2, 9, dtype=dtype), rnd(*p, dtype=dtype)
    name = str(dtype)[6:]
    for path, want in (("kernels", "kernels"), ("blas", "blas")):
        force(monkeypatch, path=path)
        assert ks_path(p, 9, "bsl", name) == (want, want) and dw_path(p, 9, "bsl", name)[0] == want
        y = K.ks_matmul(x, w, p, layout="bsl")
        assert y.dtype == dtype and rel(y, dense(w, p) @ x.double()) < TOL[dtype]


@pytest.mark.parametrize("layout", ["bsf", "bsl"])
def test_float32_blas_nan_and_stream(layout, monkeypatch):
    """A NaN reaches exactly the outputs of its group and batch column; work goes on the caller's
    stream."""
    force(monkeypatch, path="blas")
    p = (2, 64, 40, 1) if layout == "bsf" else (2, 64, 40, 2)
    a, b, c, d = p
    w = rnd(*p)
    x = rnd(300, a * c * d) if layout == "bsf" else rnd(a * c * d, 300)
    jj = d - 1
    f = 1 * c * d + 3 * d + jj  # group (i=1, j=d-1)
    if layout == "bsf":
        x[7, f] = float("nan")
    else:
        x[f, 7] = float("nan")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = K.ks_matmul(x, w, p, layout=layout)
    s.synchronize()
    yb = y if layout == "bsf" else y.T
    bad = torch.isnan(yb)
    cols = torch.tensor([1 * b * d + k * d + jj for k in range(b)], device=DEV)
    assert bad[7, cols].all() and bad.sum() == b
    x2 = torch.nan_to_num(x)
    y2 = K.ks_matmul(x2, w, p, layout=layout)
    ref = x2.double() @ dense(w, p).T if layout == "bsf" else dense(w, p) @ x2.double()
    assert rel(y2, ref) < 1e-6


# The batch-last streaming kernel (options path "stream"; W of a group held in shared memory):
# b or c of 1, 2, odd, primes, not multiples of the 16 x 8 mma tile, b = c = 128, c large with
# b small, more groups than resident blocks (a block's run of items crosses groups).
STREAM_PATTERNS = [(1, 1, 1, 1), (2, 2, 2, 4), (3, 5, 7, 2), (2, 17, 19, 3), (1, 1, 13, 3),
                   (1, 13, 1, 2), (2, 31, 97, 1), (1, 48, 48, 16), (6, 64, 64, 1), (1, 128, 128, 1),
                   (2, 192, 48, 4), (1, 33, 200, 1), (3, 16, 8, 5), (64, 16, 16, 8), (1, 96, 96, 2)]


def stream_check(p, batch, offset=0, tol=2e-6):
    """Forward and dx of one pattern at one batch (offset 1: x, dy 4 bytes past an allocation,
    so no 16-byte copies) vs float64; no output left unwritten."""
    a, b, c, d = p
    N, M = a * c * d, a * b * d
    w = rnd(*p)
    Kd = dense(w, p)
    x = rnd(N * batch + offset)[offset:].view(N, batch)
    poisoned_pool(4 * batch * M)
    y = K.ks_matmul(x, w, p, layout="bsl")
    ref, sc = Kd @ x.double(), Kd.abs() @ x.double().abs()
    assert not torch.isnan(y).any() and rel(y, ref, sc) < tol, (p, batch, offset, rel(y, ref, sc))
    dy = rnd(M * batch + offset)[offset:].view(M, batch)
    poisoned_pool(4 * batch * N)
    dx, _ = K.ks_matmul_vjp(dy, x, w, p, layout="bsl")
    refdx, scdx = Kd.T @ dy.double(), Kd.abs().T @ dy.double().abs()
    assert not torch.isnan(dx).any() and rel(dx, refdx, scdx) < tol, (p, batch, offset, rel(dx, refdx, scdx))
    return y


@pytest.mark.parametrize("p", STREAM_PATTERNS)
def test_float32_stream_path(p, monkeypatch):
    """Forced streaming path: taken for batch-last float32 (forward and dx), never batch-first or
    half types (they keep their own rule); float32 accuracy vs float64 at batch tails of every
    tile width, aligned or not."""
    force(monkeypatch, path="stream")
    assert ks_path(p, 7, "bsl") == ("stream", "stream")
    with pytest.raises(ValueError, match="path"):  # batch-last only
        ks_path(p, 7, "bsf")
    with pytest.raises(ValueError, match="path"):  # float32 only
        ks_path(p, 7, "bsl", "bfloat16")
    for batch in (1, 7, 32, 301, 300):
        for offset in (0, 1):
            y = stream_check(p, batch, offset)
    # the kernels give the same values to float32 accuracy
    force(monkeypatch, path="kernels")
    x = rnd(p[0] * p[2] * p[3], 300)
    w = rnd(*p)
    y = K.ks_matmul(x, w, p, layout="bsl")
    force(monkeypatch, path="stream")
    assert rel(K.ks_matmul(x, w, p, layout="bsl"), y.double()) < 2e-6


@pytest.mark.parametrize("mt", ["1", "2"])
@pytest.mark.parametrize("tn", ["32", "64", "128"])
@pytest.mark.parametrize("p", [(2, 17, 19, 3), (6, 64, 64, 1), (64, 16, 16, 8), (1, 48, 33, 2)])
def test_float32_stream_tiles(p, tn, mt, monkeypatch):
    """Every batch tile width and warp item height (options stream_tn, stream_mt), at batches that
    divide none of the tiles."""
    force(monkeypatch, path="stream", stream_tn=int(tn), stream_mt=int(mt))
    for batch in (33, 97, 300, 1029):
        stream_check(p, batch)


@pytest.mark.parametrize("batch", [25088, 25091])
def test_float32_stream_large_batch(batch, monkeypatch):
    """The bench shapes at full batch (16-byte copies) and one past it (4-byte copies)."""
    force(monkeypatch, path="stream")
    for p in [(6, 64, 64, 1), (2, 192, 48, 4)]:
        stream_check(p, batch, tol=1e-6)


def test_float32_stream_nan_inf_and_stream(monkeypatch):
    """A NaN reaches exactly the outputs of its group and batch column; an infinite input with
    positive weights gives infinities, never NaN; work goes on the caller's stream."""
    force(monkeypatch, path="stream")
    p = (2, 64, 40, 2)
    a, b, c, d = p
    w = rnd(*p)
    x = rnd(a * c * d, 300)
    f = 1 * c * d + 3 * d + 1  # group (i=1, j=1)
    x[f, 7] = float("nan")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = K.ks_matmul(x, w, p, layout="bsl")
    s.synchronize()
    bad = torch.isnan(y)
    rows = torch.tensor([1 * b * d + k * d + 1 for k in range(b)], device=DEV)
    assert bad[rows, 7].all() and bad.sum() == b
    for w in (torch.rand(*p, device=DEV) + 0.1,  # and weights exact in tf32 (lo part 0)
              torch.randint(1, 8, p, device=DEV).float() / 4):
        x = torch.rand(a * c * d, 301, device=DEV)
        x[0, 2] = float("inf")
        y = K.ks_matmul(x, w, p, layout="bsl")
        want = dense(w, p).cpu() @ x.double().cpu()
        assert torch.equal(torch.isinf(y).cpu(), torch.isinf(want)) and not torch.isnan(y).any()


def test_stream_is_the_default_for_small_batch_last_groups():
    """The plan's rule (the ks solver table, src/cuda/ks/ks_plan.cu; measurements in
    bench/NOTES-gpu-ks-scan.md#ks-path-rule) at the bench shapes."""
    for p in [(6, 64, 64, 1), (16, 64, 64, 1), (1, 48, 48, 16), (4, 64, 64, 4), (4, 96, 96, 2)]:
        assert ks_path(p, 25088, "bsl") == ("stream", "stream")
        # batch-first: d = 1 forward on the kernels, dx on cuBLAS; d > 1 on the transposition path
        assert ks_path(p, 25088, "bsf") == (("kernels", "blas") if p[3] == 1 else ("tr",) * 2)
    # dx of (2,192,48,4) is the (2,48,192,4) product: only a 64-column tile fits, the kernels win;
    # dx of the one big group (1,768,768,1) runs cuBLAS, its forward the 3xTF32 kernels
    assert ks_path((2, 192, 48, 4), 25088, "bsl") == ("stream", "kernels")
    assert ks_path((1, 768, 768, 1), 25088, "bsl") == ("kernels", "blas")
    assert ks_path((1, 768, 192, 2), 25088, "bsl") == ("blas", "blas")


# Batch-first d > 1 through in-row transpositions + cuBLAS (options path "tr").
# b or c = 1, 2, odd, primes, d = 2, 3, 5, 16; segment sizes with and without 16-byte passes.
TR_PATTERNS = [(1, 1, 1, 2), (2, 2, 2, 2), (3, 5, 7, 3), (2, 17, 19, 5), (1, 48, 48, 16), (1, 1, 7, 3),
               (2, 7, 1, 2), (1, 13, 11, 16), (3, 2, 50, 2), (1, 192, 96, 2), (2, 31, 37, 4),
               (1, 96, 385, 2), (4, 3, 2, 5)]


@pytest.mark.parametrize("p", TR_PATTERNS)
def test_float32_tr_path(p, monkeypatch):
    """Forced tr path: forward and dx within 1e-6 of float64 at batches 1 / 7 / 301, every output
    written (NaN-poisoned pool), same values as the kernels to float32 accuracy."""
    force(monkeypatch, path="tr")
    a, b, c, d = p
    N, M = a * c * d, a * b * d
    assert ks_path(p, 7, "bsf") == ("tr", "tr")
    with pytest.raises(ValueError, match="path"):  # batch-first only
        ks_path(p, 7, "bsl")
    assert ks_path(p, 7, "bsf", "float16") == ("tr", "tr")  # every dtype
    w = rnd(*p)
    Kd = dense(w, p)
    for batch in (1, 7, 301):
        x = rnd(batch, N)
        poisoned_pool(4 * batch * M)
        y = K.ks_matmul(x, w, p)
        ref = x.double() @ Kd.T
        sc = x.double().abs() @ Kd.abs().T
        assert not torch.isnan(y).any() and rel(y, ref, sc) < 1e-6, (batch, rel(y, ref, sc))
        dy = rnd(batch, M)
        poisoned_pool(4 * batch * N)
        dx, _ = K.ks_matmul_vjp(dy, x, w, p)
        assert not torch.isnan(dx).any() and rel(dx, dy.double() @ Kd, dy.double().abs() @ Kd.abs()) < 1e-6
    force(monkeypatch, path="kernels")
    assert ks_path(p, 7, "bsf") == ("kernels", "kernels")
    assert rel(K.ks_matmul(x, w, p), y.double()) < 2e-6


def test_tr_rule_and_limits(monkeypatch):
    """The default rule takes tr for the bench's batch-first d > 1 patterns at batch 25088, every
    dtype, forward, dx and dw (halves and dw too; not for d == 1 or batch-last), the
    kernels below batch 1024 (segments over 48 KB: test_tr_large_rule); segments too large for
    one block's opt-in shared memory keep the kernels and forcing tr there is a ValueError."""
    for p in [(1, 48, 48, 16), (2, 96, 384, 4), (2, 192, 48, 4), (1, 768, 192, 2), (4, 64, 64, 4),
              (1, 256, 256, 4), (4, 96, 96, 2)]:
        for dt in ("float32", "float16", "bfloat16"):
            assert ks_path(p, 25088, "bsf", dt) == ("tr", "tr"), (p, dt)
            assert dw_path(p, 25088, "bsf", dt)[0] == "tr", (p, dt)
            assert ks_path(p, 1000, "bsf", dt) == ("kernels", "kernels"), (p, dt)
            assert dw_path(p, 1000, "bsf", dt) == ("kernels", 0), (p, dt)
            assert "tr" not in ks_path(p, 25088, "bsl", dt) and dw_path(p, 25088, "bsl", dt)[0] == "blas"
    assert ks_path((1, 768, 768, 1), 25088, "bsf")[0] != "tr"
    big = (1, 40000, 7, 2)  # y segment 2 x 40000 floats > 227 KB: no tr forward, dx or dw
    force(monkeypatch, path="tr")
    with pytest.raises(ValueError, match="path"):
        ks_path(big, 7, "bsf")
    force(monkeypatch)
    assert ks_path(big, 2048, "bsf")[0] == "kernels"
    x, w = rnd(3, 14), rnd(*big)
    assert rel(K.ks_matmul(x, w, big), x.double() @ dense(w, big).T) < 2e-6


# Segments over 48 KB (padded; x's c x d, y's d x b, dy's b x d), from batch 1024 (ks_plan.cu
# tr_rule, bench/NOTES-gpu-ks-scan.md "ks-path-rule"): tr wherever the segments fit the opt-in
# shared memory and min(b, c) >= 4, forward, dx and dw, every dtype. pattern -> {dtype: ((forward,
# dx), dw)}.
TR_LARGE_RULE = {
    (1, 1024, 1024, 16): {"float32": (("tr", "tr"), "tr"), "bfloat16": (("tr", "tr"), "tr")},
    (1, 96, 96, 128): {"float32": (("tr", "tr"), "tr"), "bfloat16": (("tr", "tr"), "tr")},
    (1, 192, 768, 16): {"float32": (("tr", "tr"), "tr"), "bfloat16": (("tr", "tr"), "tr")},
    (1, 512, 128, 64): {"float32": (("tr", "tr"), "tr"), "bfloat16": (("tr", "tr"), "tr")},
    (1, 1024, 256, 64): {"float32": (("kernels", "kernels"), "kernels"),  # over the opt-in smem
                         "bfloat16": (("tr", "tr"), "tr")},
    (1, 14, 28, 1024): {"float32": (("tr", "tr"), "tr"), "bfloat16": (("tr", "tr"), "tr")},
    (1, 2, 4, 7168): {"float32": (("kernels", "kernels"), "kernels"),
                      "bfloat16": (("kernels", "kernels"), "kernels")},
}


def test_tr_large_rule(monkeypatch):
    """The rule for segments over 48 KB (TR_LARGE_RULE) at batches 1024 and 25088 (float16 as
    bfloat16); below 1024 the kernels; forced tr applies wherever the segments fit the opt-in
    shared memory."""
    for p, want in TR_LARGE_RULE.items():
        for dt, (prod, dw) in want.items():
            for name in (dt,) if dt == "float32" else (dt, "float16"):
                for batch in (1024, 25088):
                    assert ks_path(p, batch, "bsf", name) == prod, (p, name, batch)
                    assert dw_path(p, batch, "bsf", name)[0] == dw, (p, name, batch)
                assert ks_path(p, 1000, "bsf", name) == ("kernels", "kernels"), (p, name)
                assert dw_path(p, 1000, "bsf", name)[0] == "kernels", (p, name)
    force(monkeypatch, path="tr")
    for p in TR_LARGE_RULE:
        for dt in ("float32", "bfloat16"):
            if p == (1, 1024, 256, 64) and dt == "float32":
                with pytest.raises(ValueError, match="path"):
                    ks_path(p, 1024, "bsf", dt)
            else:
                assert ks_path(p, 1024, "bsf", dt) == ("tr", "tr"), (p, dt)
                assert dw_path(p, 1024, "bsf", dt)[0] == "tr", (p, dt)


@pytest.mark.parametrize("p,dtype", [((1, 1024, 1024, 16), torch.float32),
                                     ((1, 64, 32, 512), torch.bfloat16),
                                     ((1, 64, 32, 512), torch.float32)])
def test_tr_large_default_results(p, dtype):
    """The default choice on segments over 48 KB at batch 1024 (tr forward, dx and dw) against
    float64 by the index formula (einsum), every output written (NaN-poisoned pool)."""
    name = str(dtype)[6:]
    a, b, c, d = p
    batch = 1024
    assert ks_path(p, batch, "bsf", name) == ("tr", "tr") and dw_path(p, batch, "bsf", name)[0] == "tr"
    w = (rnd(*p) / c ** 0.5).to(dtype)
    x, dy = rnd(batch, a * c * d, dtype=dtype), rnd(batch, a * b * d, dtype=dtype)
    poisoned_pool(dtype.itemsize * batch * a * b * d)
    y = K.ks_matmul(x, w, p)
    poisoned_pool(dtype.itemsize * x.numel())
    dx, dw = K.ks_matmul_vjp(dy, x, w, p)
    wd, xd, dyd = w.double(), x.double().view(batch, a, c, d), dy.double().view(batch, a, b, d)
    ry = torch.einsum("iklj,nilj->nikj", wd, xd).reshape(batch, -1)
    rdx = torch.einsum("iklj,nikj->nilj", wd, dyd).reshape(batch, -1)
    rdw = torch.einsum("nikj,nilj->iklj", dyd, xd)
    tol = 1e-5 if dtype == torch.float32 else TOL[dtype]
    for t, r, what in ((y, ry, "y"), (dx, rdx, "dx"), (dw, rdw, "dw")):
        assert not torch.isnan(t).any(), what
        assert rel(t, r) < tol, (what, rel(t, r))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("p", [(1, 4, 200, 124), (1, 200, 4, 124), (2, 24, 400, 64)])
def test_tr_large_segments(p, dtype, monkeypatch):
    """Row segments over 48 KB (x's c x d, y's d x b; padded) run one per block on opt-in shared
    memory: forced tr gives the forced kernels' forward, dx and dw (to the dtype's accuracy) at
    batches 1 and 37, every output written (NaN-poisoned pool)."""
    name = str(dtype)[6:]
    a, b, c, d = p
    w = rnd(*p, dtype=dtype)
    for batch in (1, 37):
        x, dy = rnd(batch, a * c * d, dtype=dtype), rnd(batch, a * b * d, dtype=dtype)
        out = {}
        for path in ("tr", "kernels"):
            force(monkeypatch, path=path)
            assert ks_path(p, batch, "bsf", name) == (path, path) and dw_path(p, batch, "bsf", name)[0] == path
            poisoned_pool(4 * batch * a * b * d)
            y = K.ks_matmul(x, w, p)
            poisoned_pool(4 * x.numel())
            dx, dw = K.ks_matmul_vjp(dy, x, w, p)
            for t in (y, dx, dw):
                assert not torch.isnan(t).any(), (path, batch)
            out[path] = (y, dx, dw)
        for t, k in zip(out["tr"], out["kernels"]):
            assert rel(t, k.double()) < TOL[dtype], (batch, rel(t, k.double()))


def test_float32_tr_workspace_passes(monkeypatch):
    """Rows of 8192 input floats: the 256 MB x' workspace takes 8192 rows, so batch 8300 runs in
    two equal passes (4150 rows), forward and dx; both within 1e-6 of float64."""
    force(monkeypatch, path="tr")
    p = (1, 3, 512, 16)
    a, b, c, d = p
    assert ks_path(p, 8300, "bsf") == ("tr", "tr")
    w = rnd(*p)
    Kd = dense(w, p)
    x = rnd(8300, a * c * d)
    poisoned_pool(4 * 8300 * a * b * d)
    y = K.ks_matmul(x, w, p)
    assert not torch.isnan(y).any() and rel(y, x.double() @ Kd.T) < 1e-6
    dy = rnd(8300, a * b * d)
    poisoned_pool(4 * 8300 * a * c * d)
    dx, _ = K.ks_matmul_vjp(dy, x, w, p)
    assert not torch.isnan(dx).any() and rel(dx, dy.double() @ Kd) < 1e-6


def test_float32_tr_nan_inf_and_stream(monkeypatch):
    """tr path: a NaN reaches exactly the outputs of its group and row; an infinite input with
    positive weights gives inf, never NaN; the call is ordered on the caller's (side) stream:
    an input written just before on that stream behind a long sleep is the one used, and a copy
    of y enqueued right after sees the finished result."""
    force(monkeypatch, path="tr")
    bad, cols, b = nan_in_one_group()
    assert bad[7, cols].all() and bad.sum() == b
    p = (2, 64, 40, 2)
    a, c, d = p[0], p[2], p[3]
    wp = torch.rand(*p, device=DEV) + 0.1
    xi = torch.rand(5, a * c * d, device=DEV)
    xi[2, 0] = float("inf")
    yi = K.ks_matmul(xi, wp, p)
    want = xi.double().cpu() @ dense(wp, p).T.cpu()
    assert torch.equal(torch.isinf(yi).cpu(), torch.isinf(want)) and not torch.isnan(yi).any()
    q = (1, 48, 48, 16)
    y, y2, x1, wq = side_stream_product(q)
    ref = x1.double() @ dense(wq, q).T
    assert rel(y, ref) < 1e-6 and rel(y2, ref) < 1e-6
