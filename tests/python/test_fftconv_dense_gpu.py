"""The GPU dense fftconv solver (plan algo 15, options={"solver": "dense"}; src/cuda/fftconv/dense.hpp):
the convolution as 32×32 Toeplitz blocks of the filter on tensor cores, against a float64
reference of the rounded inputs: causal and circular, sizes 1, odd and prime, partial blocks, batch
chunks, gates, misaligned views; NaN kept to its
row; the solver's limits; its own backward (du and dpre on reversed rows, dk as tensor-core
products) against float64 autograd."""
import numpy as np
import pytest

import strux
import strux._cuda_fftconv  # noqa: F401

torch = pytest.importorskip("torch")
if not (torch.cuda.is_available() and strux._cuda_fftconv.available()):
    pytest.skip("no CUDA torch", allow_module_level=True)

DENSE = {"solver": "dense"}
# Output rounding (2^-11 float16, 2^-8 bfloat16) over a norm, with room for the float32 sums.
TOL = {"float16": 1.5e-3, "bfloat16": 1.2e-2}


def ref(u, k, mode, pre=None, post=None, skip=None):
    """float64 y by FFT of exact length (causal: 2L zero padding)."""
    v = u * (pre if pre is not None else 1.0)
    L, Lk = u.shape[-1], k.shape[-1]
    if mode == "causal":
        kk = k[:, :min(Lk, L)]
        n = 2 * L
    else:
        kk, n = k, L
    y = np.fft.irfft(np.fft.rfft(v, n) * np.fft.rfft(kk, n), n)[..., :L]
    if skip is not None:
        y = y + skip[:, None] * v
    if post is not None:
        y = y * post
    return y


def rounded(td, *xs):
    return [x.to(td) for x in xs], [x.to(td).double().cpu().numpy() for x in xs]


def check(B, H, L, Lk, mode, dtype, gates, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    td = getattr(torch, dtype)
    u, pre, post = (torch.randn(B, H, L, device="cuda", generator=g) for _ in range(3))
    k = torch.randn(H, Lk, device="cuda", generator=g) / min(Lk, L) ** 0.5
    skip = torch.randn(H, device="cuda", generator=g)
    (u, pre, post, k, skip), (ru, rpre, rpost, rk, rskip) = rounded(td, u, pre, post, k, skip)
    if gates:
        y = strux.fftconv(u, k, mode=mode, pregate=pre, postgate=post, skip=skip, options=DENSE)
        want = ref(ru, rk, mode, rpre, rpost, rskip)
    else:
        y = strux.fftconv(u, k, mode=mode, options=DENSE)
        want = ref(ru, rk, mode)
    assert y.dtype == td and y.shape == (B, H, L)
    err = np.linalg.norm(y.double().cpu().numpy() - want) / max(np.linalg.norm(want), 1e-30)
    assert err <= TOL[dtype], (B, H, L, Lk, mode, dtype, gates, err)


CAUSAL = [(1, 1), (1, 7), (5, 5), (31, 31), (32, 32), (33, 33), (33, 1), (100, 100), (128, 128), (256, 256),
          (257, 300), (512, 512), (1000, 37), (4099, 4099), (4096, 4096), (2048, 9000)]
CIRCULAR = [(32, 1), (32, 32), (64, 33), (96, 96), (128, 128), (256, 256), (256, 100), (1024, 1024)]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("gates", [False, True])
@pytest.mark.parametrize("mode,L,Lk", [("causal",) + c for c in CAUSAL] + [("circular",) + c for c in CIRCULAR])
def test_forward(mode, L, Lk, dtype, gates):
    check(3, 2, L, Lk, mode, dtype, gates, seed=L * 7 + Lk)


@pytest.mark.parametrize("B", [1, 2, 63, 64, 65, 130])
def test_batch_chunks(B):
    """Rows per CTA (R <= 64) and a last, partial chunk of rows."""
    check(B, 3, 256, 256, "circular", "float16", True, seed=B)
    check(B, 3, 500, 500, "causal", "float16", False, seed=B + 1)


def test_long_rows_and_many_taps():
    """Row lengths where one row fills a CTA's shared memory, and the tap limit."""
    check(2, 2, 32768, 64, "causal", "float16", True, seed=1)
    check(1, 2, 8192, 8192, "causal", "bfloat16", False, seed=2)
    check(2, 1, 8192, 8192, "circular", "float16", False, seed=3)


def test_misaligned_views():
    """Inputs whose rows are not 16-byte aligned run the one-sample-at-a-time kernels: same result
    as the aligned copies, bit for bit."""
    B, H, L, Lk = 2, 3, 256, 200
    g = torch.Generator(device="cuda").manual_seed(5)
    n = B * H * L
    buf = [torch.randn(n + 1, device="cuda", generator=g).half() for _ in range(3)]
    u, pre, post = (b[1:].view(B, H, L) for b in buf)
    assert u.data_ptr() % 16 != 0
    k = (torch.randn(H, Lk, device="cuda", generator=g) / 15).half()
    skip = torch.randn(H, device="cuda", generator=g).half()
    y = strux.fftconv(u, k, pregate=pre, postgate=post, skip=skip, options=DENSE)
    y2 = strux.fftconv(u.clone(), k, pregate=pre.clone(), postgate=post.clone(), skip=skip, options=DENSE)
    assert torch.equal(y, y2)


def ref_grads(dy, u, k, mode, pre, post, skip):
    """float64 gradients (du, dk, dpre, dpost, dskip) of the contract's formula by torch autograd on
    the CPU (an exact-length FFT convolution; causal taps past L get 0)."""
    t = [torch.tensor(x, dtype=torch.float64, requires_grad=True) if x is not None else None
         for x in (u, k, pre, post, skip)]
    u_, k_, pre_, post_, skip_ = t
    L = u.shape[-1]
    v = u_ * pre_ if pre_ is not None else u_
    kk, n = (k_[:, :min(k.shape[1], L)], 2 * L) if mode == "causal" else (k_, L)
    y = torch.fft.irfft(torch.fft.rfft(v, n) * torch.fft.rfft(kk, n), n)[..., :L]
    if skip_ is not None:
        y = y + skip_[:, None] * v
    if post_ is not None:
        y = y * post_
    y.backward(torch.tensor(dy, dtype=torch.float64))
    return [x.grad.numpy() if x is not None else None for x in t]


def check_grads(B, H, L, Lk, mode, dtype, gates, seed, options=DENSE):
    g = torch.Generator(device="cuda").manual_seed(seed)
    td = getattr(torch, dtype)
    u, pre, post, dy = (torch.randn(B, H, L, device="cuda", generator=g) for _ in range(4))
    k = torch.randn(H, Lk, device="cuda", generator=g) / min(Lk, L) ** 0.5
    skip = torch.randn(H, device="cuda", generator=g)
    (u, pre, post, dy, k, skip), r = rounded(td, u, pre, post, dy, k, skip)
    if not gates:
        pre = post = skip = None
        r[1] = r[2] = r[5] = None
    got = strux.fftconv_vjp(dy, u, k, mode=mode, pregate=pre, postgate=post, skip=skip, options=options)
    want = ref_grads(r[3], r[0], r[4], mode, r[1], r[2], r[5])
    for name, a, w in zip(("du", "dk", "dpre", "dpost", "dskip"), got, want):
        if w is None:
            continue
        err = np.linalg.norm(a.double().cpu().numpy() - w) / max(np.linalg.norm(w), 1e-30)
        assert err <= 2 * TOL[dtype], (name, B, H, L, Lk, mode, dtype, gates, err)


GRAD_CASES = [("causal", 1, 1), ("causal", 33, 33), ("causal", 100, 40), ("causal", 300, 300), ("causal", 512, 512),
              ("causal", 1000, 37), ("causal", 257, 600), ("causal", 1024, 1024), ("circular", 32, 32),
              ("circular", 96, 50), ("circular", 256, 256)]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("gates", [False, True])
@pytest.mark.parametrize("mode,L,Lk", GRAD_CASES)
def test_gradients(mode, L, Lk, dtype, gates):
    """The dense plan's own backward (three passes of the products) against float64 autograd."""
    check_grads(3, 2, L, Lk, mode, dtype, gates, seed=L + 3 * Lk)


@pytest.mark.parametrize("B", [1, 17, 70])
def test_gradients_batch_chunks(B):
    """dk and dskip summed over several CTAs of rows (partials in a fixed order)."""
    check_grads(B, 3, 256, 256, "circular", "float16", True, seed=B)
    check_grads(B, 2, 700, 300, "causal", "bfloat16", True, seed=B + 1)


def test_gradients_where_the_kernel_does_not_fit():
    """Long rows with many taps and both gates: the filter gradient's shared memory does not fit,
    so the plan's gradients run through the automatic choice without the dense kernels."""
    check_grads(1, 1, 32768, 8192, "causal", "float16", True, seed=9)


def test_backward_bits_repeat_and_misaligned_views():
    """The same gradients run after run (fixed-order sums), and from rows that are not 16-byte
    aligned (the one-sample-at-a-time kernels) the same bits as from aligned copies."""
    B, H, L, Lk = 5, 3, 256, 200
    g = torch.Generator(device="cuda").manual_seed(8)
    n = B * H * L
    buf = [torch.randn(n + 1, device="cuda", generator=g).half() for _ in range(4)]
    u, pre, post, dy = (b[1:].view(B, H, L) for b in buf)
    k = (torch.randn(H, Lk, device="cuda", generator=g) / 15).half()
    skip = torch.randn(H, device="cuda", generator=g).half()
    a = strux.fftconv_vjp(dy, u, k, pregate=pre, postgate=post, skip=skip, options=DENSE)
    b = strux.fftconv_vjp(dy.clone(), u.clone(), k, pregate=pre.clone(), postgate=post.clone(), skip=skip,
                          options=DENSE)
    c = strux.fftconv_vjp(dy.clone(), u.clone(), k, pregate=pre.clone(), postgate=post.clone(), skip=skip,
                          options=DENSE)
    for x, y, z in zip(a, b, c):
        assert torch.equal(x, y) and torch.equal(y, z)


def test_torch_autograd_under_forced_algo():
    """strux.torch.fftconv with plan algo 15: forward and backward by the dense kernels through autograd."""
    import strux.torch as st
    from strux.bench.gpu import fftconv_algo
    g = torch.Generator(device="cuda").manual_seed(11)
    u = torch.randn(2, 4, 200, device="cuda", generator=g).half().requires_grad_(True)
    k = (torch.randn(4, 200, device="cuda", generator=g) / 14).half().requires_grad_(True)
    with fftconv_algo(15):
        y = st.fftconv(u, k, "causal")
        y.float().square().sum().backward()
    want = ref(u.detach().double().cpu().numpy(), k.detach().double().cpu().numpy(), "causal")
    assert np.linalg.norm(y.detach().double().cpu().numpy() - want) <= TOL["float16"] * np.linalg.norm(want)
    assert u.grad is not None and torch.isfinite(u.grad).all() and torch.isfinite(k.grad).all()


@pytest.mark.parametrize("mode", ["causal", "circular"])
def test_nan_stays_in_its_row(mode):
    """A NaN reaches only its own batch row (rows of one CTA share tiles of the products)."""
    g = torch.Generator(device="cuda").manual_seed(2)
    u = torch.randn(40, 2, 256, device="cuda", generator=g).half()
    k = (torch.randn(2, 256, device="cuda", generator=g) / 16).half()
    clean = strux.fftconv(u, k, mode=mode, options=DENSE)
    u[17, 1, 100] = float("nan")
    y = strux.fftconv(u, k, mode=mode, options=DENSE)
    bad = torch.isnan(y)
    assert bad[17, 1, 100 if mode == "causal" else 0:].any()
    others = torch.ones_like(bad)
    others[17, 1] = False
    assert not bad[others].any()
    assert torch.equal(y[others], clean[others])


def test_nan_in_dy_reaches_dk_only_at_its_lags():
    """Causal dk[x] = sum over t >= x of dz[t]·v[t - x]: a NaN in dy at t0 makes dk[x] NaN for
    x <= t0 only (the FFT gradients spread it over all of dk; the dense kernel keeps the formula)."""
    g = torch.Generator(device="cuda").manual_seed(3)
    B, H, L = 8, 2, 1024
    u, dy = (torch.randn(B, H, L, device="cuda", generator=g).half() for _ in range(2))
    k = (torch.randn(H, L, device="cuda", generator=g) / 32).half()
    t0 = 300
    dy[5, 1, t0] = float("nan")
    _, dk = strux.fftconv_vjp(dy, u, k, mode="causal", options=DENSE)[:2]
    assert torch.isnan(dk[1, :t0 + 1]).all()
    assert not torch.isnan(dk[1, t0 + 1:]).any()
    assert not torch.isnan(dk[0]).any()


def test_limits():
    P = strux._ext.cuda.FFTConvPlan
    with pytest.raises(ValueError, match="'algo'"):
        P(2, 3, 256, 256, "causal", "float32", False, 15)
    with pytest.raises(ValueError, match="'algo'"):
        P(2, 3, 100, 100, "circular", "float16", False, 15)  # circular L not a multiple of 32
    with pytest.raises(ValueError, match="'algo'"):
        P(2, 3, 20000, 9000, "causal", "float16", False, 15)  # more than 8192 taps
    with pytest.raises(ValueError, match="'algo'"):
        P(2, 3, 40000, 10, "causal", "float16", False, 15)  # L past 32768
    with pytest.raises(ValueError, match="algo|solver"):  # float32 through the Python options
        strux.fftconv(torch.zeros(1, 2, 64, device="cuda"), torch.zeros(2, 64, device="cuda"), options=DENSE)
    p = P(2, 3, 256, 256, "causal", "float16", True, 15)
    assert p.dense and p.nfft == 0
    assert not P(2, 3, 256, 256, "causal", "float16", True, 16).dense


# (B, L, Lk, mode) -> whether the automatic choice takes the dense kernels for float16/bfloat16:
# the cost model of dense.hpp (2·taps·L / 310 TFLOP/s against the FFT solvers' measured time per row
# at their FFT size), more than 32 taps used (the direct kernels' rule first), L <= 32768, circular L
# a multiple of 32, and min(B, 64)·⌈L/32⌉ >= 128 (two tiles of 16 rows for each of four warps).
AUTO = [((64, 256, 256, "causal"), True), ((64, 512, 512, "causal"), True), ((64, 1024, 1024, "causal"), True),
        ((64, 1023, 1023, "causal"), True), ((64, 1025, 1025, "causal"), True),
        ((64, 2048, 2048, "causal"), True), ((64, 3000, 3000, "causal"), True), ((64, 5000, 5000, "causal"), True),
        ((64, 5000, 1250, "causal"), False), ((64, 4096, 2048, "causal"), False),
        ((64, 4096, 4096, "causal"), False), ((64, 4096, 600, "causal"), True),
        ((64, 256, 256, "circular"), True), ((64, 512, 512, "circular"), True), ((64, 768, 768, "circular"), True),
        ((64, 1024, 1024, "circular"), False), ((64, 2048, 1024, "circular"), False),
        ((64, 1536, 1536, "circular"), True), ((64, 3008, 3008, "circular"), False),
        ((64, 1000, 100, "circular"), False),
        ((64, 100, 32, "causal"), False), ((64, 100, 33, "causal"), True), ((2, 32768, 256, "causal"), True),
        ((2, 32769, 256, "causal"), False), ((64, 20000, 12769, "causal"), False),
        ((1, 1024, 1024, "causal"), False), ((4, 1024, 1024, "causal"), True), ((3, 1024, 1024, "causal"), False),
        ((16, 256, 256, "circular"), True), ((15, 256, 256, "circular"), False), ((1, 4096, 100, "causal"), True)]


# Where the wgmma kernel runs (compute capability 9.0, its sm_90a image), its model (2·taps·L / 420
# TFLOP/s over the share of live columns in its tiles) also beats the FFT solvers at these.
AUTO_WGMMA = {(64, 5000, 1250, "causal"), (64, 4096, 2048, "causal"), (64, 1024, 1024, "circular")}


def _wgmma_runs():
    """Whether this device runs the wgmma kernel: compute capability 9.0 and strux's sm_90a image
    loaded (else a forced algo-17 plan is a ValueError and the rule never takes it)."""
    if torch.cuda.get_device_capability() != (9, 0):
        return False
    try:
        strux._ext.cuda.FFTConvPlan(2, 1, 64, 64, "causal", "float16", False, 17)
        return True
    except ValueError:
        return False


@pytest.mark.parametrize("size, want", AUTO, ids=str)
def test_automatic_rule(size, want):
    P = strux._ext.cuda.FFTConvPlan
    B, L, Lk, mode = size
    want = want or (_wgmma_runs() and size in AUTO_WGMMA)
    for dt in ("float16", "bfloat16"):
        for backward in (False, True):
            assert P(B, 3, L, Lk, mode, dt, backward, 0).dense == want, (dt, backward)
        assert not P(B, 3, L, Lk, mode, dt, False, 16).dense
    for dt in ("float32", "float64"):
        assert not P(B, 3, L, Lk, mode, dt, False, 0).dense


# (L, Lk) causal, B = 64 -> (gated calls by the dense kernels, backward by the dense kernels): gated
# products cost twice (hi + lo), so a pregate moves causal 2048 to the FFT solvers; the dense
# gradients run where the dense forward is at most 0.57 of the FFT forward (dense.hpp).
SPLIT_RULE = [((1024, 1024), (True, True)), ((1025, 1025), (True, True)), ((2048, 2048), (False, False)),
              ((4096, 600), (True, True)), ((4096, 1024), (False, False)), ((3000, 3000), (False, False))]


@pytest.mark.parametrize("size, want", SPLIT_RULE, ids=str)
def test_automatic_gated_and_backward_rule(size, want):
    P = strux._ext.cuda.FFTConvPlan
    L, Lk = size
    for backward in (False, True):
        p = P(64, 3, L, Lk, "causal", "float16", backward, 0)
        assert p.dense and (p.dense_gated, p.dense_backward) == (want[0], want[1] and backward)
    forced = P(64, 3, L, Lk, "causal", "float16", True, 15)
    assert forced.dense_gated and forced.dense_backward


def test_gated_call_beyond_the_gated_rule_runs_the_fft_solvers():
    """causal L = 2048: an automatic plan takes the dense kernels ungated; a call with a pregate gets
    the bits of the automatic choice without them (algo 16), its gradients too, and both agree with
    float64."""
    from strux.bench.gpu import fftconv_algo
    g = torch.Generator(device="cuda").manual_seed(7)
    B, H, L = 4, 2, 2048
    u, dy, pre, post = (torch.randn(B, H, L, device="cuda", generator=g) for _ in range(4))
    k = torch.randn(H, L, device="cuda", generator=g) / L ** 0.5
    (u, dy, pre, post, k), (ru, _, rpre, rpost, rk) = rounded(torch.float16, u, dy, pre, post, k)
    f, vjp = strux._cuda_fftconv.fftconv, strux._cuda_fftconv.fftconv_vjp
    with fftconv_algo(0):
        y0, y_ungated = f(u, k, "causal", pregate=pre, postgate=post), f(u, k, "causal")
        g0 = vjp(dy, u, k, "causal", pregate=pre, postgate=post)
    with fftconv_algo(16):
        y16, g16 = f(u, k, "causal", pregate=pre, postgate=post), vjp(dy, u, k, "causal", pregate=pre, postgate=post)
    # the ungated call: the mma.sync kernel's bits, or the wgmma kernel's where the rule takes it
    plan = strux._ext.cuda.FFTConvPlan(B, H, L, L, "causal", "float16", False, 0)
    with fftconv_algo(17 if plan.dense_wgmma else 15):
        y_dense = f(u, k, "causal")
    assert torch.equal(y0, y16) and torch.equal(y_ungated, y_dense)
    assert all((a is None and b is None) or torch.equal(a, b) for a, b in zip(g0, g16))
    want = ref(ru, rk, "causal", rpre, rpost)
    assert np.linalg.norm(y0.double().cpu().numpy() - want) / np.linalg.norm(want) <= TOL["float16"]


@pytest.mark.parametrize("L,Lk,own", [(512, 512, True), (1024, 1024, True), (1025, 1025, True), (2048, 2048, False)])
def test_automatic_backward_rule(L, Lk, own):
    """An automatic dense plan runs its own backward where the model gives it the gradients (causal
    512, 1024, 1025): the bits of the forced dense plan; elsewhere (causal 2048) those of the
    automatic choice without it (algo 16)."""
    from strux.bench.gpu import fftconv_algo
    g = torch.Generator(device="cuda").manual_seed(L)
    u, dy = (torch.randn(64, 2, L, device="cuda", generator=g).half() for _ in range(2))
    k = (torch.randn(2, Lk, device="cuda", generator=g) / L ** 0.5).half()
    assert strux._ext.cuda.FFTConvPlan(64, 2, L, Lk, "causal", "float16", True, 0).dense
    vjp = strux._cuda_fftconv.fftconv_vjp
    with fftconv_algo(0):
        auto = vjp(dy, u, k, "causal")
    with fftconv_algo(15 if own else 16):
        want = vjp(dy, u, k, "causal")
    for a, w in zip(auto, want):
        assert (a is None and w is None) or torch.equal(a, w)


# ---- algo 17: the ungated forward on wgmma (sm_90a; dense_wgmma.cuh) ----------------------------

WGMMA = [("causal", 64, 64), ("causal", 1, 1), ("causal", 100, 37), ("causal", 257, 300), ("causal", 1000, 1000),
         ("causal", 2048, 2048), ("causal", 2050, 129), ("causal", 4096, 1024), ("causal", 3000, 3000), ("circular", 64, 64),
         ("circular", 256, 256), ("circular", 1024, 1024), ("circular", 1024, 65), ("circular", 2048, 2048)]


@pytest.mark.skipif(not _wgmma_runs(), reason="the wgmma kernel needs compute capability 9.0 and the sm_90a build")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("B", [3, 17])
@pytest.mark.parametrize("mode,L,Lk", WGMMA)
def test_wgmma_forward(mode, L, Lk, B, dtype):
    """algo 17 against float64 (rows past B in a CTA, L not a multiple of 8 or 64, short and long
    filters), and a gated call on the same plan by the mma.sync kernels (algo 15's bits)."""
    from strux.bench.gpu import fftconv_algo
    g = torch.Generator(device="cuda").manual_seed(L * 31 + Lk + B)
    td = getattr(torch, dtype)
    u = torch.randn(B, 2, L, device="cuda", generator=g)
    k = torch.randn(2, Lk, device="cuda", generator=g) / min(Lk, L) ** 0.5
    pre = torch.randn(B, 2, L, device="cuda", generator=g)
    (u, k, pre), (ru, rk, _) = rounded(td, u, k, pre)
    f = strux._cuda_fftconv.fftconv
    with fftconv_algo(17):
        y = f(u, k, mode)
        y_gated = f(u, k, mode, pregate=pre)
    with fftconv_algo(15):
        y15_gated = f(u, k, mode, pregate=pre)
    want = ref(ru, rk, mode)
    err = np.linalg.norm(y.double().cpu().numpy() - want) / max(np.linalg.norm(want), 1e-30)
    assert y.dtype == td and err <= TOL[dtype], (mode, L, Lk, B, dtype, err)
    assert torch.equal(y_gated, y15_gated)


@pytest.mark.skipif(not _wgmma_runs(), reason="the wgmma kernel needs compute capability 9.0 and the sm_90a build")
def test_wgmma_misaligned_and_nan():
    """Rows not 16-byte aligned take the one-sample path; a NaN stays in its row."""
    from strux.bench.gpu import fftconv_algo
    g = torch.Generator(device="cuda").manual_seed(5)
    L = 512
    base = torch.randn(2 * 3 * L + 1, device="cuda", generator=g).half()
    u = base[1:].view(2, 3, L)
    k = (torch.randn(3, L, device="cuda", generator=g) / L ** 0.5).half()
    with fftconv_algo(17):
        y = strux._cuda_fftconv.fftconv(u, k, "causal")
        u2 = u.clone()
        u2[1, 2, 100] = float("nan")
        y2 = strux._cuda_fftconv.fftconv(u2, k, "causal")
    want = ref(u.double().cpu().numpy(), k.double().cpu().numpy(), "causal")
    assert np.linalg.norm(y.double().cpu().numpy() - want) / np.linalg.norm(want) <= TOL["float16"]
    bad = torch.isnan(y2)
    assert bad[1, 2].any() and not bad[0].any() and not bad[1, :2].any()
    assert torch.equal(y2[0], y[0])


def test_wgmma_refused_where_it_does_not_apply():
    P = strux._ext.cuda.FFTConvPlan
    with pytest.raises(ValueError, match="'algo'"):
        P(2, 3, 96, 96, "circular", "float16", False, 17)  # circular L not a multiple of 64
    with pytest.raises(ValueError, match="'algo'"):
        P(2, 3, 256, 256, "causal", "float32", False, 17)
    if _wgmma_runs():  # a CTA's rows past the shared memory (the mma.sync kernel takes them)
        with pytest.raises(ValueError, match="'L'.*shared memory"):
            P(2, 3, 16384, 4096, "causal", "float16", False, 17)
        assert P(2, 3, 16384, 4096, "causal", "float16", False, 15).dense


# (B, L, Lk, mode) -> whether an automatic float16 plan's ungated forward runs the wgmma kernel: where
# its model beats the mma.sync kernel's; not causal 1025 (17 blocks of 64: 136 of 256 tile columns
# live), nor B = 4 at causal 1024 (8 rows per CTA: half of them zeros), nor B = 17 at causal 3000
# (three CTAs of 8 rows for 17), nor where the FFT solvers win (causal 4096).
WGMMA_AUTO = [((64, 2048, 2048, "causal"), True), ((64, 1024, 1024, "circular"), True),
              ((64, 128, 128, "causal"), True), ((64, 1025, 1025, "causal"), False),
              ((64, 4096, 4096, "causal"), False), ((64, 3000, 3000, "causal"), True),
              ((4, 1024, 1024, "causal"), False), ((17, 3000, 3000, "causal"), False)]


@pytest.mark.skipif(not _wgmma_runs(), reason="the wgmma kernel needs compute capability 9.0 and the sm_90a build")
@pytest.mark.parametrize("size, want", WGMMA_AUTO, ids=str)
def test_automatic_wgmma(size, want):
    """The automatic choice of the wgmma kernel; its ungated calls give algo 17's bits, its gated ones
    those of algo 15 or (past the gated rule) algo 16."""
    from strux.bench.gpu import fftconv_algo
    B, L, Lk, mode = size
    p = strux._ext.cuda.FFTConvPlan(B, 3, L, Lk, mode, "float16", False, 0)
    assert p.dense_wgmma == (want and _wgmma_runs())
    if not p.dense_wgmma:
        return
    g = torch.Generator(device="cuda").manual_seed(L)
    u = torch.randn(B, 3, L, device="cuda", generator=g).half()
    k = (torch.randn(3, Lk, device="cuda", generator=g) / min(L, Lk) ** 0.5).half()
    pre = torch.randn_like(u)
    f = strux._cuda_fftconv.fftconv
    y0, y0g = f(u, k, mode), f(u, k, mode, pregate=pre)
    with fftconv_algo(17):
        y17 = f(u, k, mode)
    with fftconv_algo(15 if p.dense_gated else 16):  # a gated call past the gated rule: the FFT solvers
        yg = f(u, k, mode, pregate=pre)
    assert torch.equal(y0, y17) and torch.equal(y0g, yg)


@pytest.mark.skipif(not _wgmma_runs(), reason="the wgmma kernel needs compute capability 9.0 and the sm_90a build")
def test_wgmma_solver_option():
    """options={"solver": "dense_wgmma"} of strux.fftconv: algo 17's bits."""
    from strux.bench.gpu import fftconv_algo
    g = torch.Generator(device="cuda").manual_seed(11)
    u = torch.randn(5, 3, 640, device="cuda", generator=g).half()
    k = (torch.randn(3, 640, device="cuda", generator=g) / 640 ** 0.5).half()
    y = strux.fftconv(u, k, mode="circular", options={"solver": "dense_wgmma"})
    with fftconv_algo(17):
        assert torch.equal(y, strux._cuda_fftconv.fftconv(u, k, "circular"))
