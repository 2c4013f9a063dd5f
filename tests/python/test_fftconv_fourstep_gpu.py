"""The four-step fftconv solver (fftconv_algo = 8, C++ options.solver = "fourstep"; FFT sizes
65536 … 4194304) against the float64 FFT formula: causal and circular, odd and prime L, Lk < L and
Lk = L, float32 / float16 / bfloat16, every gate set, B > 1 and H > 1, NaN confined to its row,
unaligned rows, a cached filter (FFTConvCUDA), and the gradients (the solver's own backward passes:
every dtype, gates absent or present, B > 1, Lk > L, odd L, NaN confined to its row and filter)."""
import math

import pytest

from cuda_common import (FFTCONV_GATES as GATES, _cuda, cpu64, fft_ref, make_fftconv_inputs as make, needs_gpu,
                         rand, rel, torch)

pytestmark = needs_gpu

DTYPES = ["float32", "float16", "bfloat16"]
FOURSTEP = 8


def tol(dtype, nfft):
    """Norm-wise relative error bound: float32 FFTs of length n about 1e-7·log2(n) per transform, with
    margin; half types add the output rounding (float16 2^-11, bfloat16 2^-8 per element)."""
    f32 = 7e-7 * math.log2(nfft)
    return {"float32": f32, "float16": 1e-3 + f32, "bfloat16": 8e-3 + f32}[dtype]


@pytest.fixture(autouse=True)
def forced():
    """Every call in these tests runs the four-step solver (plans are cached per algo)."""
    old = _cuda.fftconv_algo
    _cuda.fftconv_algo = FOURSTEP
    yield
    _cuda.fftconv_algo = old


def plan_of(B, H, L, Lk, mode, dtype, backward=False, algo=FOURSTEP):
    return _cuda._ext.cuda.FFTConvPlan(B, H, L, Lk, mode, dtype, backward, algo)


# (B, H, L, Lk, mode) -> nfft
SIZES = [
    ((2, 3, 20000, 9000, "causal"), 65536),      # smallest size (M1 128, M2 256), L + Lk - 1 well under it
    ((2, 2, 65536, 65536, "circular"), 65536),
    ((1, 3, 40001, 40001, "causal"), 131072),    # odd L, Lk = L
    ((3, 2, 65537, 300, "causal"), 131072),      # prime L, short filter
    ((2, 2, 100000, 100000, "causal"), 262144),
    ((1, 2, 300000, 777, "causal"), 524288),     # M2 = 2048, M1 = 128
    ((1, 2, 1 << 20, 1 << 19, "circular"), 1 << 20),
    ((1, 2, 600001, 600001, "causal"), 1 << 21),  # M1 = 512
]


@pytest.mark.parametrize("size, nfft", SIZES, ids=str)
def test_plan(size, nfft):
    B, H, L, Lk, mode = size
    p = plan_of(B, H, L, Lk, mode, "float32")
    assert p.fourstep and not p.fused and not p.tensor and p.nfft == nfft


def test_plan_rejects():
    with pytest.raises(ValueError, match="'L'"):
        plan_of(1, 1, 32768, 100, "circular", "float32")  # below the smallest size
    with pytest.raises(ValueError, match="'L'"):
        plan_of(1, 1, 100000, 100, "circular", "float32")  # circular L not a power of two
    with pytest.raises(ValueError, match="'L'"):
        plan_of(1, 1, 3_000_000, 3_000_000, "causal", "float32")  # nfft would pass 4M
    with pytest.raises(ValueError, match="'dtype'"):
        plan_of(1, 1, 65536, 100, "circular", "float64")


# (L, Lk, mode, dtype) -> the default plan's four-step nfft, None where it is not chosen
DEFAULT_RULE = [
    ((100000, 100000, "causal", "float32"), 262144),
    ((20000, 12769, "causal", "float16"), None),      # L + Lk - 1 = 32768: the fused kernels' largest
    ((20000, 12770, "causal", "bfloat16"), 65536),    # one past it
    ((20000, 12770, "causal", "float32"), 65536),
    ((65536, 20000, "circular", "float32"), 65536),
    ((65536, 100, "circular", "float32"), None),      # a short filter: blocks (blocks.hpp automatic)
    ((32768, 100, "circular", "float32"), None),      # fused
    ((100000, 20000, "circular", "float32"), None),   # not a power of two: cuFFT
    ((100000, 100000, "causal", "float64"), None),
    ((3_000_000, 3_000_000, "causal", "float32"), None),  # past 4M: cuFFT
]


@pytest.mark.parametrize("size, nfft", DEFAULT_RULE, ids=str)
def test_default_rule(size, nfft):
    """algo 0 takes the four-step kernels past the fused sizes (measured faster than cuFFT at every
    size, bench/NOTES-gpu-fftconv-long.md), with and without gradients."""
    L, Lk, mode, dtype = size
    for backward in (False, True):
        p = plan_of(1, 1, L, Lk, mode, dtype, backward, algo=0)
        assert p.fourstep == (nfft is not None), (size, backward)
        if nfft is not None:
            assert p.nfft == nfft


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size, nfft", SIZES[:6], ids=str)
def test_forward(dtype, size, nfft):
    B, H, L, Lk, mode = size
    for gates in GATES:
        u, k, pre, post, skip = make(B, H, L, Lk, dtype, gates)
        y = _cuda.fftconv(u, k, mode, pre, post, skip)
        assert y.dtype == u.dtype and y.shape == u.shape
        err = rel(y, fft_ref(*cpu64(u, k), mode, *cpu64(pre, post, skip)))
        assert err < tol(dtype, nfft), (gates, err)


@pytest.mark.parametrize("size, nfft", SIZES[6:], ids=str)
def test_forward_large(size, nfft):
    B, H, L, Lk, mode = size
    for dtype in ("float32", "float16"):
        u, k, pre, post, skip = make(B, H, L, Lk, dtype, ("pre", "post", "skip"))
        y = _cuda.fftconv(u, k, mode, pre, post, skip)
        err = rel(y, fft_ref(*cpu64(u, k), mode, *cpu64(pre, post, skip)))
        assert err < tol(dtype, nfft), (dtype, err)


def test_nan_stays_in_its_row():
    B, H, L = 2, 3, 40001
    u, k, *_ = make(B, H, L, L, "float32", ())
    u[1, 2, 777] = float("nan")
    y = _cuda.fftconv(u, k)
    bad = torch.isnan(y).any(-1).cpu()
    assert bad[1, 2] and int(bad.sum()) == 1
    ok = torch.ones(B, H, dtype=torch.bool)
    ok[1, 2] = False
    assert rel(y[ok.cuda()], fft_ref(*cpu64(u, k))[ok]) < tol("float32", 131072)


def test_unaligned_and_odd_rows():
    """Row bases 2 bytes off a 4-byte boundary (a slice) take the scalar load path."""
    B, H, L = 2, 2, 50000
    flat = rand((1 + B * H * L,), "float16")
    u = flat[1:].view(B, H, L)
    k = rand((H, 5000), "float16") / 70
    assert rel(_cuda.fftconv(u, k), fft_ref(*cpu64(u, k))) < tol("float16", 131072)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_quad_loads_at_boundaries(dtype):
    """16-bit rows load four samples at once where the row stride is a multiple of 4 and the bases are
    8-byte aligned: a filter longer than L (stride Lk = 40004, valid length L = 40002 inside a group of
    four), with gates; and rows 4 but not 8 bytes aligned (a slice), which take the pair loads."""
    B, H, L = 2, 2, 40002
    u, _, pre, post, skip = make(B, H, L, L, dtype, ("pre", "post", "skip"))
    k = rand((H, L + 2), dtype) / 200
    y = _cuda.fftconv(u, k, "causal", pre, post, skip)
    assert rel(y, fft_ref(*cpu64(u, k), "causal", *cpu64(pre, post, skip))) < tol(dtype, 131072)
    L = 40000
    flat = rand((2 + B * H * L,), dtype)
    u = flat[2:].view(B, H, L)
    k = rand((H, 3001), dtype) / 60
    assert rel(_cuda.fftconv(u, k), fft_ref(*cpu64(u, k))) < tol(dtype, 131072)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_rows_by_k1_probe(dtype):
    """Plan algo 14 (the row pass's grid row by row) is the same arithmetic as 8 in another CTA order:
    bit-identical results, B > 1 and H > 1."""
    B, H, L, Lk = 3, 2, 50001, 20000
    u, k, pre, post, skip = make(B, H, L, Lk, dtype, ("pre", "post", "skip"))
    y8 = _cuda.fftconv(u, k, "causal", pre, post, skip)
    _cuda.fftconv_algo = 14
    assert plan_of(B, H, L, Lk, "causal", dtype, algo=14).fourstep
    y14 = _cuda.fftconv(u, k, "causal", pre, post, skip)
    assert torch.equal(y8, y14)


def test_cached_filter_operator():
    B, H, L, Lk = 2, 2, 70000, 70000
    u, k, pre, post, skip = make(B, H, L, Lk, "bfloat16", ("pre", "post", "skip"))
    conv = _cuda.FFTConvCUDA(k, B, L)
    assert conv._plan.fourstep and "four-step" in conv.describe()
    assert rel(conv(u, pre, post, skip), fft_ref(*cpu64(u, k), "causal", *cpu64(pre, post, skip))) < \
        tol("bfloat16", 262144)
    k2 = rand((H, Lk), "bfloat16") / 300
    conv.set_filter(k2)
    assert rel(conv(u), fft_ref(*cpu64(u, k2))) < tol("bfloat16", 262144)


def vjp_ref(dy, u, k, mode, pre, post, skip):
    """(du, dk, dpregate, dpostgate, dskip) by autograd of the float64 formula, None where not given."""
    args = [x.requires_grad_(True) if x is not None else None for x in cpu64(u, k, pre, post, skip)]
    live = [a for a in args if a is not None]
    want = iter(torch.autograd.grad(fft_ref(args[0], args[1], mode, *args[2:]), live, dy.double().cpu()))
    return [next(want) if a is not None else None for a in args]


NAMES = ["du", "dk", "dpregate", "dpostgate", "dskip"]


def check_vjp(B, H, L, Lk, mode, dtype, gates, bound):
    assert plan_of(B, H, L, Lk, mode, dtype, backward=True).fourstep
    u, k, pre, post, skip = make(B, H, L, Lk, dtype, gates)
    dy = rand((B, H, L), dtype)
    got = _cuda.fftconv_vjp(dy, u, k, mode, pre, post, skip)
    for name, g, w in zip(NAMES, got, vjp_ref(dy, u, k, mode, pre, post, skip)):
        assert (g is None) == (w is None), name
        if g is not None:
            assert g.dtype == u.dtype and g.shape == w.shape, name
            assert rel(g, w) < bound, (name, rel(g, w))


@pytest.mark.parametrize("mode", ["causal", "circular"])
def test_gradients(mode):
    """float32 gradients of the four-step backward (pass A on v and dz, the row pass B', pass C with
    the gradient epilogues) against autograd of the float64 formula."""
    check_vjp(2, 2, 65536, 3000, mode, "float32", ("pre", "post", "skip"), 2e-5)


# (B, H, L, Lk, mode, dtype, gates) -> nfft; the bound is 2·tol: two forward transforms and one inverse
# per gradient in float32, each output rounded once to its dtype
GRAD_CASES = [
    ((2, 2, 65536, 3000, "causal", "float16", ("pre", "post", "skip")), 131072),
    ((2, 2, 65536, 65536, "circular", "bfloat16", ("pre", "post", "skip")), 65536),
    ((3, 2, 20000, 9000, "causal", "float32", ("pre", "post", "skip")), 65536),  # B = 3: dK̂ summed over b
    ((2, 2, 30001, 50000, "causal", "float32", ("pre", "post", "skip")), 65536),  # Lk > L: taps past L get 0
    ((1, 3, 40001, 40001, "causal", "float32", ("skip",)), 131072),  # odd L, M2 = 512, no dpost (no Ẑ)
    ((2, 2, 100000, 100000, "causal", "float16", ()), 262144),       # no gates, no skip, M2 = 1024
    ((1, 2, 300000, 777, "causal", "bfloat16", ("pre", "post")), 524288),  # M2 = 2048, dpost without skip
]


@pytest.mark.parametrize("case, nfft", GRAD_CASES, ids=str)
def test_gradients_cases(case, nfft):
    B, H, L, Lk, mode, dtype, gates = case
    assert plan_of(B, H, L, Lk, mode, dtype, backward=True).nfft == nfft
    check_vjp(B, H, L, Lk, mode, dtype, gates, 2 * tol(dtype, nfft))


def test_backward_workspace():
    """With gradients the plan holds v's and dz's intermediates (B·H rows) and dK̂'s (H rows) of 4·nfft
    bytes each, and no cuFFT plan."""
    B, H, L, Lk = 2, 3, 65536, 3000
    fwd = plan_of(B, H, L, Lk, "causal", "float16")
    bwd = plan_of(B, H, L, Lk, "causal", "float16", backward=True)
    assert bwd.fourstep and bwd.nfft == 131072
    assert bwd.workspace_bytes - fwd.workspace_bytes == (B * H + H) * 4 * bwd.nfft


def test_backward_rule_few_row_pairs():
    """The automatic rule (algo 0) takes the four-step forward at B = 4, H = 1, L = 65536 but hands
    the gradients to its cuFFT plan (the row pass would have 65 CTAs, each looping over the batch):
    more workspace than the own passes' and the same gradients; forced algo 8 keeps its passes."""
    B, H, L, Lk = 4, 1, 65536, 65536
    auto = plan_of(B, H, L, Lk, "causal", "float32", backward=True, algo=0)
    own = plan_of(B, H, L, Lk, "causal", "float32", backward=True)
    assert auto.fourstep and own.fourstep
    assert own.workspace_bytes - plan_of(B, H, L, Lk, "causal", "float32").workspace_bytes == (B * H + H) * 4 * own.nfft
    assert auto.workspace_bytes != own.workspace_bytes
    _cuda.fftconv_algo = 0
    check_vjp(B, H, L, Lk, "causal", "float32", ("pre", "post", "skip"), 2e-5)


def test_backward_nan_stays_in_its_row():
    """NaN in one sample of dy: that row's du and dpregate, that sample's dpostgate, that h's dk and
    dskip; every other gradient finite and right."""
    B, H, L = 2, 3, 40001
    u, k, pre, post, skip = make(B, H, L, L, "float32", ("pre", "post", "skip"))
    dy = rand((B, H, L), "float32")
    dy[1, 2, 777] = float("nan")
    du, dk, dpre, dpost, dskip = _cuda.fftconv_vjp(dy, u, k, "causal", pre, post, skip)
    ok = torch.ones(B, H, dtype=torch.bool)
    ok[1, 2] = False
    for g in (du, dpre):
        assert torch.equal(torch.isnan(g).any(-1).cpu(), ~ok)
    assert int(torch.isnan(dpost).sum()) == 1 and bool(torch.isnan(dpost[1, 2, 777]))
    assert torch.isnan(dk).any(-1).cpu().tolist() == [False, False, True]
    assert torch.isnan(dskip).cpu().tolist() == [False, False, True]
    dy0 = dy.clone()
    dy0[1, 2, 777] = 0  # the reference of every gradient that does not see the NaN
    want = vjp_ref(dy0, u, k, "causal", pre, post, skip)
    bound = 2 * tol("float32", 131072)
    okc = ok.cuda()
    assert rel(du[okc], want[0][ok]) < bound and rel(dpre[okc], want[2][ok]) < bound
    assert rel(dk[:2], want[1][:2]) < bound and rel(dskip[:2], want[4][:2]) < bound
