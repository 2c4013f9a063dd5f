"""The GPU blocks fftconv solver (plan algo 10, options={"solver": "blocks"}; src/cuda/fftconv/blocks.hpp):
overlap-save over blocks of N = the power of two >= max(1024, 8m, min(16m, 4096)) (>= 4m past 32768; m
taps used) through an inner
circular plan. Forced and automatic, against the float64 FFT form of the DESIGN.md formula
(cuda_common.fft_ref) and autograd through it for every gradient: causal and circular, L = 1,
L < N, odd and prime L, Lk from 33 to 4096, Lk > L, every dtype, gates on and off.

Tolerances (norm-wise relative error against float64) are cuda_common.TOL, doubled for the
gradients as cuda_common.check_fftconv_vjp does: the blocks compute in float32 (float64 for
float64) and round once to the input dtype, so float32 errors are those of length-N float32 FFTs
(about 1e-7·log2 N, summed over the blocks for dk) and the 16-bit types' are their output rounding.

The 16-bit path (16-bit blocks, gates inside the inner plan, backward on blocks laid out ahead) has
tests of its own whose bounds follow that arithmetic: every output and gradient element is one
rounding of a float32 value, so its norm-wise error against float64 is at most the unit roundoff u
(2^-11 float16, 2^-8 bfloat16) plus the float32 error, and each element is within u·|x| of the
float32 path's x on the same (16-bit) inputs, plus the float32 error; a value rounded twice (a
16-bit intermediate) breaks the second bound.
"""
import math

import pytest

from cuda_common import (FFTCONV_GATES as GATES, TOL, _cuda, cpu64, fft_ref, make_fftconv_inputs as make,
                         needs_gpu, rand, rel, strux, torch)

pytestmark = needs_gpu

BLOCKS = {"solver": "blocks"}
DTYPES = ["float32", "float64", "float16", "bfloat16"]
NAMES = ["du", "dk", "dpregate", "dpostgate", "dskip"]


def plan_of(B, H, L, Lk, mode, dtype, backward=False, algo=10):
    return _cuda._ext.cuda.FFTConvPlan(B, H, L, Lk, mode, dtype, backward, algo)


def block_fft(L, Lk, mode):
    """The solver's N, S and blocks per row (blocks.hpp auto_fft_size)."""
    m = Lk if mode == "circular" else min(Lk, L)
    N = pow2_at_least(max(1024, 8 * m, min(16 * m, 4096)))
    if N > 32768:
        N = pow2_at_least(max(1024, 4 * m))
    S = N - (m - 1)
    return N, S, -(-L // S)


def pow2_at_least(n):
    return 1 << max(0, math.ceil(math.log2(n)))


def check_forward(B, H, L, Lk, mode, dtype, gates, options=BLOCKS):
    u, k, pre, post, skip = make(B, H, L, Lk, dtype, gates)
    y = _cuda.fftconv(u, k, mode, pre, post, skip, options=options)
    assert y.dtype == u.dtype and y.shape == u.shape
    err = rel(y, fft_ref(*cpu64(u, k), mode, *cpu64(pre, post, skip)))
    assert err < TOL[dtype], (B, H, L, Lk, mode, dtype, gates, err)


def check_gradients(B, H, L, Lk, mode, dtype, gates, options=BLOCKS):
    """Every gradient of fftconv_vjp against autograd of the float64 FFT reference."""
    u, k, pre, post, skip = make(B, H, L, Lk, dtype, gates)
    dy = rand((B, H, L), dtype)
    got = _cuda.fftconv_vjp(dy, u, k, mode, pre, post, skip, options=options)
    args = [x.requires_grad_(True) if x is not None else None for x in cpu64(u, k, pre, post, skip)]
    live = [a for a in args if a is not None]
    want = iter(torch.autograd.grad(fft_ref(args[0], args[1], mode, *args[2:]), live, dy.double().cpu()))
    for name, g, a in zip(NAMES, got, args):
        if a is None:
            assert g is None, name
            continue
        w = next(want)
        assert g.dtype == u.dtype and tuple(g.shape) == tuple(a.shape), name
        err = rel(g, w)
        assert err < 2 * TOL[dtype], (name, B, H, L, Lk, mode, dtype, gates, err)


# (B, H, L, Lk, mode): L = 1, L < N (one block), Lk > L, odd and prime L, several blocks per row
SIZES = [
    (2, 3, 1, 1, "causal"),
    (1, 2, 1, 50, "causal"),          # Lk > L = 1: one tap used
    (2, 2, 700, 33, "causal"),        # one block, L < N
    (1, 3, 500, 1000, "causal"),      # Lk > L: m = L = 500, N = 2048
    (2, 2, 5001, 100, "causal"),      # odd L, 6 blocks of 1024
    (1, 2, 65537, 257, "causal"),     # prime L, N = 2048
    (2, 1, 100003, 1000, "causal"),   # prime L, N = 4096
    (1, 2, 100003, 4096, "causal"),   # N = 16384, S = 12289
    (3, 2, 40000, 4096, "causal"),    # 4 blocks, the last one part-filled
    (2, 2, 1, 1, "circular"),
    (1, 2, 1031, 1031, "circular"),   # Lk = L, one block (N = 8192 > L): the row's end wraps into it
    (2, 3, 5003, 257, "circular"),    # prime L, several blocks, block 0's head = the row's end
    (1, 2, 65537, 100, "circular"),
]
FAST = [s for s in SIZES if s[2] <= 70000]


@pytest.mark.parametrize("size", SIZES, ids=str)
def test_plan(size):
    B, H, L, Lk, mode = size
    N, S, nb = block_fft(L, Lk, mode)
    p = plan_of(B, H, L, Lk, mode, "float32", True)
    assert p.blocks and not p.fused and not p.direct and p.nfft == N and p.blocks_per_row == nb
    m = Lk if mode == "circular" else min(Lk, L)
    assert p.inner_fused == (m > 32)  # the inner plan's own choice: direct kernels up to 32 taps


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", SIZES, ids=str)
def test_forward(size, dtype):
    for gates in GATES:
        check_forward(*size, dtype, gates)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("size", SIZES, ids=str)
def test_gradients(size, dtype):
    for gates in GATES:
        check_gradients(*size, dtype, gates)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("size", FAST, ids=str)
def test_gradients_16bit(size, dtype):
    for gates in [(), ("pre", "post", "skip")]:
        check_gradients(*size, dtype, gates)


@pytest.mark.parametrize("Lk", [33, 100, 257, 1000, 4096])
def test_taps(Lk):
    """Each filter length of issue 12 on a prime row, forward and gradients, all gates."""
    check_forward(1, 2, 100003, Lk, "causal", "float32", ("pre", "post", "skip"))
    check_gradients(1, 2, 100003, Lk, "causal", "float32", ("pre", "post", "skip"))
    check_forward(1, 2, 100003, Lk, "causal", "float16", ("pre", "post", "skip"))


# (L, Lk, mode, dtype) -> whether the automatic choice (algo 0) takes the blocks solver
DEFAULT_RULE = [
    ((1 << 20, 100, "causal", "float32"), True),
    ((1 << 20, 100, "causal", "float16"), True),
    ((1 << 20, 100, "causal", "bfloat16"), True),
    ((1 << 20, 32, "causal", "float32"), False),      # direct kernels
    ((1 << 20, 33, "causal", "float32"), True),
    ((65537, 1000, "causal", "float32"), True),       # N = 4096, 8N <= 66536
    ((200000, 4096, "causal", "float32"), True),      # N = 16384, 8N = 131072 <= 204095
    ((100000, 4096, "causal", "float16"), False),     # 8N > L + m - 1: the whole row (four-step)
    ((30000, 100, "causal", "float32"), False),       # the fused kernels' sizes
    ((1 << 20, 100, "circular", "float32"), True),    # circular too (measured 2.0-3.5x, H100)
    ((100000, 64, "circular", "float16"), True),
    ((30000, 100, "circular", "float32"), False),     # the fused kernels' sizes
    ((1 << 20, 100, "causal", "float64"), False),
    ((1 << 20, 1 << 20, "causal", "float32"), False),
]


@pytest.mark.parametrize("size, blocks", DEFAULT_RULE, ids=str)
def test_default_rule(size, blocks):
    L, Lk, mode, dtype = size
    for backward in (False, True):
        p = plan_of(1, 2, L, Lk, mode, dtype, backward, algo=0)
        assert p.blocks == blocks, (size, backward)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_automatic(dtype):
    """The automatic choice takes the solver on a long causal row and gives the same answers."""
    B, H, L, Lk = 2, 2, 1 << 18, 257
    assert plan_of(B, H, L, Lk, "causal", dtype, algo=0).blocks
    check_forward(B, H, L, Lk, "causal", dtype, ("pre", "post", "skip"), options=None)
    check_gradients(B, H, L, Lk, "causal", dtype, ("pre", "post", "skip"), options=None)


def test_short_filter_inner_direct():
    """Forced with m <= 32 taps the inner plan takes the direct kernels; results unchanged."""
    p = plan_of(2, 2, 3000, 5, "causal", "float32", True)
    assert p.blocks and not p.inner_fused and p.nfft == 1024
    for gates in GATES:
        check_forward(2, 2, 3000, 5, "causal", "float32", gates)
        check_gradients(2, 2, 3000, 5, "circular", "float32", gates)


def test_public_api_and_describe():
    B, H, L, Lk = 1, 2, 50000, 300
    u, k, pre, post, skip = make(B, H, L, Lk, "float32", ("pre", "post", "skip"))
    y = strux.fftconv(u, k, pregate=pre, postgate=post, skip=skip, options=BLOCKS)
    assert rel(y, fft_ref(*cpu64(u, k), "causal", *cpu64(pre, post, skip))) < TOL["float32"]
    old = _cuda.fftconv_algo
    _cuda.fftconv_algo = 10
    try:
        conv = _cuda.FFTConvCUDA(k, B, L)
    finally:
        _cuda.fftconv_algo = old
    assert conv._plan.blocks and "blocks of 4096" in conv.describe()
    assert rel(conv(u, pre, post, skip), y) < 1e-6


def test_rows_apart():
    """A NaN in one (b, h) row stays in that row: the blocks of different rows never mix."""
    B, H, L, Lk = 2, 3, 20000, 100
    u, k, *_ = make(B, H, L, Lk, "float32", ())
    u[1, 2, 7777] = float("nan")
    y = _cuda.fftconv(u, k, options=BLOCKS)
    bad = torch.isnan(y).any(-1).cpu()
    assert bad[1, 2] and int(bad.sum()) == 1
    ok = torch.ones(B, H, dtype=torch.bool)
    ok[1, 2] = False
    assert rel(y[ok.cuda()], fft_ref(*cpu64(u, k))[ok]) < TOL["float32"]


def test_errors():
    with pytest.raises(ValueError, match="'k'"):
        plan_of(1, 1, 100, 200, "circular", "float32")
    with pytest.raises(ValueError, match="'algo'"):
        plan_of(1, 1, 100, 10, "causal", "float32", algo=17)
    u = rand((1, 1, 100), "float32")
    with pytest.raises(ValueError, match="solver"):
        _cuda.fftconv(u, rand((1, 10), "float32"), options={"solver": "block"})


# ---- the 16-bit path ------------------------------------------------------------------------------
U16 = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}  # unit roundoff
F32 = 2e-5  # float32 error of the blocks (norm-wise, and element-wise against the largest element)
ALL = ("pre", "post", "skip")
# (B, H, L, Lk, mode): odd and prime L, Lk = 1 and 2 (inner direct kernels), 63, 64, 65 (inner fused
# kernels, N = 1024), several blocks per row (S = 1024 - (m - 1)); a part-filled last block; Lk = L.
SIZES16 = [
    (2, 2, 2053, 1, "causal"),
    (1, 2, 3001, 2, "circular"),
    (2, 2, 4099, 63, "causal"),
    (1, 3, 5003, 64, "circular"),
    (2, 1, 6007, 65, "causal"),
    (1, 2, 2003, 65, "circular"),
    (1, 2, 65, 65, "circular"),       # one block, Lk = L: its head is the whole row
    (1, 2, 100003, 64, "causal"),     # 105 blocks per row
]


def up(*xs):
    return [None if x is None else x.float() for x in xs]


def check16(B, H, L, Lk, mode, dtype, gates, algo=None):
    """Forward and every gradient of the 16-bit path: against float64 (norm-wise, <= u + float32 error)
    and element-wise against the float32 path on the same inputs (one rounding)."""
    u, k, pre, post, skip = make(B, H, L, Lk, dtype, gates)
    dy = rand((B, H, L), dtype)
    opts = BLOCKS if algo is None else None
    if algo is not None:  # the block-size probes (algos 11, 12): no solver name, the plan algo itself
        r = _cuda._fast(u, k, mode, pre, post, skip)
        y = _cuda.forward_torch(u, k, pre, post, skip, r, algo)
        got = _cuda._vjp(dy, u, k, pre, post, skip, r, u.new_empty, algo)
    else:
        y = _cuda.fftconv(u, k, mode, pre, post, skip, options=opts)
        got = _cuda.fftconv_vjp(dy, u, k, mode, pre, post, skip, options=opts)
    y32 = _cuda.fftconv(*up(u, k), mode, *up(pre, post, skip), options=BLOCKS)
    got32 = _cuda.fftconv_vjp(*up(dy, u, k), mode, *up(pre, post, skip), options=BLOCKS)
    args = [x.requires_grad_(True) if x is not None else None for x in cpu64(u, k, pre, post, skip)]
    ref = fft_ref(args[0], args[1], mode, *args[2:])
    live = [a for a in args if a is not None]
    want = iter(torch.autograd.grad(ref, live, dy.double().cpu()))
    uu = U16[dtype]
    outs = [("y", y, y32, ref.detach())]
    for name, g, g32, a in zip(NAMES, got, got32, args):
        if a is None:
            assert g is None, name
            continue
        outs.append((name, g, g32, next(want)))
    for name, g, g32, w in outs:
        assert g.dtype == u.dtype and tuple(g.shape) == tuple(w.shape), name
        err = rel(g, w)
        assert err < uu + F32, (name, B, H, L, Lk, mode, dtype, gates, err)
        g, g32 = g.double(), g32.double()
        over = (g - g32).abs() - uu * g32.abs() - F32 * float(g32.abs().max())
        assert float(over.max()) <= 0, (name, B, H, L, Lk, mode, dtype, gates, "rounded twice?", float(over.max()))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("size", SIZES16, ids=str)
def test_16bit(size, dtype):
    for gates in GATES:
        check16(*size, dtype, gates)


@pytest.mark.parametrize("algo, ratio", [(11, 8), (12, 16)])
def test_block_size_probes(algo, ratio):
    """Algos 11 and 12: N = the power of two >= max(1024, 8m) / 16m; the same answers."""
    for L, Lk, mode in [(20011, 300, "causal"), (9001, 65, "circular")]:
        p = plan_of(1, 2, L, Lk, mode, "float32", True, algo=algo)
        N = 1024
        while N < ratio * Lk:
            N *= 2
        assert p.blocks and p.nfft == N and p.blocks_per_row == -(-L // (N - Lk + 1))
        check16(1, 2, L, Lk, mode, "float16", ALL, algo=algo)


def test_block_fft_model():
    """block_fft above is the plan's rule (blocks.hpp auto_fft_size), and algo 13 forces N >= 4m."""
    for m, want in ((1, 1024), (33, 1024), (65, 2048), (256, 4096), (1024, 8192), (4097, 32768), (8193, 65536)):
        N, S, _ = block_fft(10**6, m, "causal")
        assert N == want and S == N - m + 1
        assert plan_of(1, 1, 10**6, m, "causal", "float32").nfft == N
        assert plan_of(1, 1, 10**6, m, "causal", "float32", algo=13).nfft == max(1024, pow2_at_least(4 * m))
