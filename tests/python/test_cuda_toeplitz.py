"""Block Toeplitz on the GPU (strux._cuda.BlockToeplitzCUDA) against float64 loops."""
import numpy as np
import pytest

from cuda_common import needs_gpu, ref_toeplitz, rel, torch

from strux import _cuda_toeplitz as _cuda  # noqa: E402

pytestmark = needs_gpu

TOL = {"float32": 2e-5, "float64": 1e-12}
# (3, 7, 100) and (3, 7, 101): the one-rhs matvec with 16 lanes per row; odd Nm with Nd < 32 (and
# (3, 20, 1031) past its 8-row loop): the adjoint's aligned packs (adjoint_shift); the last: the
# adjoint's rows split among threads.
SIZES = [(1, 1, 1), (5, 3, 4), (7, 2, 3), (13, 4, 6), (32, 3, 5), (6, 37, 300), (4, 101, 131), (3, 10, 1031),
         (3, 7, 100), (3, 7, 101), (3, 20, 1031), (3, 300, 9)]


def to_layout(x, layout):
    """(Nt, n, R) → the layout's shape."""
    return x if layout == "time-major" else np.ascontiguousarray(x.transpose(1, 0, 2))


def from_layout(x, layout):
    return x if layout == "time-major" else x.transpose(1, 0, 2)


def random_op(size, dtype, layout, algo, **kw):
    """(rng, float64 blocks (Nt, Nd, Nm), the GPU operator on them in `dtype`)."""
    rng = np.random.default_rng()
    blocks = rng.standard_normal(size)
    op = _cuda.BlockToeplitzCUDA(torch.tensor(blocks, dtype=getattr(torch, dtype), device="cuda"), layout, algo, **kw)
    return rng, blocks, op


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["time-major", "space-major"])
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("R", [None, 1, 3, 19])
@pytest.mark.parametrize("algo", [-1, 0, 1, 2])
def test_matvec_rmatvec(dtype, layout, size, R, algo):
    Nt, Nd, Nm = size
    rng, blocks, op = random_op(size, dtype, layout, algo)
    assert op.shape == (Nt * Nd, Nt * Nm)
    r = 1 if R is None else R
    m = rng.standard_normal((Nt, Nm, r))
    d = rng.standard_normal((Nt, Nd, r))
    for x, adj in ((m, False), (d, True)):
        xin = to_layout(x, layout)
        if R is None:
            xin = xin[..., 0]
        t = torch.tensor(xin, dtype=getattr(torch, dtype), device="cuda")
        y = op.rmatvec(t) if adj else op.matvec(t)
        assert y.dtype == t.dtype and y.dim() == t.dim()
        got = y.double().cpu().numpy()
        if R is None:
            got = got[..., None]
        want = ref_toeplitz(blocks, x, adjoint=adj)
        assert rel(from_layout(got, layout), want) < TOL[dtype]


def test_adjoint_dot_product():
    Nt, Nd, Nm = 40, 6, 9
    blocks = torch.randn(Nt, Nd, Nm, dtype=torch.float64, device="cuda")
    op = _cuda.BlockToeplitzCUDA(blocks)
    m = torch.randn(Nt, Nm, dtype=torch.float64, device="cuda")
    d = torch.randn(Nt, Nd, dtype=torch.float64, device="cuda")
    a = float((op.matvec(m) * d).sum())
    b = float((m * op.rmatvec(d)).sum())
    assert abs(a - b) < 1e-10 * max(abs(a), 1.0)


def test_from_lti():
    ns, Nd, Nm, Nt = 4, 3, 2, 9
    rng = np.random.default_rng()
    A = rng.standard_normal((ns, ns)) * 0.4
    B = rng.standard_normal((ns, Nm))
    C = rng.standard_normal((Nd, ns))
    D = rng.standard_normal((Nd, Nm))
    blocks = np.stack([C @ np.linalg.matrix_power(A, t) @ B for t in range(Nt)])
    blocks[0] += D
    g = lambda x: torch.tensor(x, device="cuda")  # noqa: E731
    op = _cuda.BlockToeplitzCUDA.from_lti(g(A), g(B), g(C), g(D), Nt=Nt)
    m = rng.standard_normal((Nt, Nm, 1))
    got = op.matvec(g(m[..., 0])).cpu().numpy()[..., None]
    assert rel(got, ref_toeplitz(blocks, m)) < 1e-12


def test_from_fhat_shares_spectrum():
    blocks = torch.randn(6, 2, 3, device="cuda")
    op = _cuda.BlockToeplitzCUDA(blocks)
    op2 = _cuda.BlockToeplitzCUDA.from_fhat(op.fhat, 6, layout="space-major")
    m = torch.randn(6, 3, device="cuda")
    assert rel(op2.matvec(m.t().contiguous()).t(), op.matvec(m)) < 1e-6


def test_non_contiguous_vector():
    blocks = torch.randn(8, 3, 4, dtype=torch.float64, device="cuda")
    op = _cuda.BlockToeplitzCUDA(blocks)
    m = torch.randn(4, 8, dtype=torch.float64, device="cuda").t()
    want = ref_toeplitz(blocks.cpu().numpy(), m.cpu().numpy()[..., None])[..., 0]
    assert rel(op.matvec(m), want) < 1e-12


def test_nan_propagates():
    blocks = torch.randn(5, 2, 3, device="cuda")
    op = _cuda.BlockToeplitzCUDA(blocks)
    m = torch.randn(5, 3, device="cuda")
    m[2, 1] = float("nan")
    assert torch.isnan(op.matvec(m)).any()


@pytest.mark.parametrize("algo", [-1, 0, 1, 2, 3])
def test_large_vs_torch_recipe(algo):
    Nt, Nd, Nm = 200, 20, 300
    blocks = torch.randn(Nt, Nd, Nm, dtype=torch.float64, device="cuda")
    op = _cuda.BlockToeplitzCUDA(blocks.float(), algo=algo)
    n = _cuda.toeplitz_nfft(Nt)
    F = torch.fft.rfft(blocks, n=n, dim=0)
    m = torch.randn(Nt, Nm, 16, dtype=torch.float64, device="cuda")
    want = torch.fft.irfft(F @ torch.fft.rfft(m, n=n, dim=0), n=n, dim=0)[:Nt]
    assert rel(op.matvec(m.float()), want) < 1e-5
    wantT = torch.fft.irfft(F.conj().transpose(1, 2) @ torch.fft.rfft(want, n=n, dim=0), n=n, dim=0)[:Nt]
    assert rel(op.rmatvec(want.float()), wantT) < 1e-5


@pytest.mark.parametrize("call, arg, exc", [
    (lambda op: op.matvec(torch.randn(8, 5, device="cuda")), "m", ValueError),
    (lambda op: op.matvec(torch.randn(8, device="cuda")), "m", ValueError),
    (lambda op: op.rmatvec(torch.randn(8, 4, device="cuda")), "d", ValueError),
    (lambda op: op.matvec(torch.randn(8, 4, device="cuda", dtype=torch.float64)), "m", TypeError),
    (lambda op: op.matvec(torch.randn(8, 4)), "m", ValueError),
    (lambda op: _cuda.BlockToeplitzCUDA(torch.randn(8, 3, device="cuda")), "blocks", ValueError),
    (lambda op: _cuda.BlockToeplitzCUDA(torch.randn(8, 3, 4, device="cuda").half()), "blocks", TypeError),
    (lambda op: _cuda.BlockToeplitzCUDA(torch.randn(8, 3, 4, device="cuda"), layout="row"), "layout", ValueError),
    (lambda op: _cuda.BlockToeplitzCUDA.from_fhat(op.fhat, 3), "fhat", ValueError),
    (lambda op: _cuda.BlockToeplitzCUDA(torch.randn(8, 3, 4, device="cuda"), algo=4), "algo", ValueError),
    (lambda op: _cuda.BlockToeplitzCUDA(torch.randn(8, 3, 4, device="cuda"), algo=-2), "algo", ValueError),
    (lambda op: _cuda.BlockToeplitzCUDA(torch.randn(8, 3, 4, device="cuda"), fft=3), "fft", ValueError),
    (lambda op: _cuda._ext.cuda.ToeplitzPlan(8, 3, 4, 1, "time-major", "float32", -1, 7), "fft", ValueError),
])
def test_bad_inputs(call, arg, exc):
    op = _cuda.BlockToeplitzCUDA(torch.randn(8, 3, 4, device="cuda"))
    with pytest.raises(exc, match=f"'{arg}'"):
        call(op)


# Own kernels (algo 2) at shapes that exercise every chunk width (16, 8, 4, 2, 1 right-hand sides),
# tiles that divide nothing (Nd not a multiple of the 16/32-row CTAs, Nm not of the 128/512-column
# tiles, odd Nm: no float4 loads), the column split S = 2 (Nd = 100) and a misaligned F̂ view.
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape, R", [((3, 100, 257), 31), ((2, 33, 129), 16), ((5, 17, 64), 15),
                                      ((2, 1, 1), 16), ((3, 7, 1031), 1), ((3, 7, 1030), 1)])
def test_own_kernels_chunks(dtype, shape, R):
    Nt, Nd, Nm = shape
    rng = np.random.default_rng()
    blocks = rng.standard_normal((Nt, Nd, Nm))
    op = _cuda.BlockToeplitzCUDA(torch.tensor(blocks, dtype=getattr(torch, dtype), device="cuda"), algo=2)
    g = lambda x: torch.tensor(x, dtype=getattr(torch, dtype), device="cuda")  # noqa: E731
    m = rng.standard_normal((Nt, Nm, R))
    d = rng.standard_normal((Nt, Nd, R))
    assert rel(op.matvec(g(m)).cpu().numpy(), ref_toeplitz(blocks, m)) < TOL[dtype]
    assert rel(op.rmatvec(g(d)).cpu().numpy(), ref_toeplitz(blocks, d, adjoint=True)) < TOL[dtype]


def test_own_kernels_unaligned_fhat():
    # F̂ starting 8 bytes off a 16-byte boundary: the one-RHS kernels must fall back to 8-byte loads.
    Nt, Nd, Nm = 6, 5, 40
    blocks = torch.randn(Nt, Nd, Nm, device="cuda")
    ref = _cuda.BlockToeplitzCUDA(blocks, algo=0)
    buf = torch.empty(ref.fhat.numel() + 1, dtype=ref.fhat.dtype, device="cuda")
    buf[1:].copy_(ref.fhat.reshape(-1))
    fh = buf[1:].view(ref.fhat.shape)
    assert fh.data_ptr() % 16 == 8
    op = _cuda.BlockToeplitzCUDA.from_fhat(fh, Nt, algo=2)
    m, d = torch.randn(Nt, Nm, device="cuda"), torch.randn(Nt, Nd, device="cuda")
    assert rel(op.matvec(m), ref.matvec(m)) < 1e-5
    assert rel(op.rmatvec(d), ref.rmatvec(d)) < 1e-5


@pytest.mark.parametrize("fft", [0, 2])
def test_own_kernels_nan_in_tail(fft):
    # A NaN in F̂ must reach exactly the outputs it touches; tile padding must not spread it.
    # (fft 1 pairs output rows d and d + ceil(Nd/2) in one complex FFT: see test_paired_nan.)
    Nt, Nd, Nm = 3, 35, 130
    blocks = torch.randn(Nt, Nd, Nm, device="cuda")
    blocks[:, 34, 129] = float("nan")
    op = _cuda.BlockToeplitzCUDA(blocks, algo=2, fft=fft)
    y = op.matvec(torch.randn(Nt, Nm, 16, device="cuda"))
    assert torch.isnan(y[:, 34]).all() and not torch.isnan(y[:, :34]).any()
    x = op.rmatvec(torch.randn(Nt, Nd, 16, device="cuda"))
    assert torch.isnan(x[:, 129]).all() and not torch.isnan(x[:, :129]).any()


def test_default_is_automatic():
    op = _cuda.BlockToeplitzCUDA(torch.randn(4, 3, 5, device="cuda"))
    assert op.algo == -1 and op.fft == -1
    for R in (1, 16):
        assert op._plan(R).fft == AUTO_FFT
    assert "fft" in op.describe(16)
    assert _cuda.BlockToeplitzCUDA(torch.randn(4, 3, 5, device="cuda"), fft=2)._plan(1).fft == 2
    with pytest.raises(ValueError, match="'fft'"):
        _cuda.BlockToeplitzCUDA(torch.randn(4, 3, 5, device="cuda"), fft="x")
    for R in (1, 16):  # float32 matvec R > 1: the real gemm (algo 3, version 7); float64 keeps algo 0
        assert (op._plan(R).algo, op._plan(R).rmatvec_algo) == (0 if R == 1 else 3, 2)
    # float32, one right-hand side, F̂ at least as tall as wide with even Nm: the own kernels both
    # ways; odd Nm keeps cuBLAS's gemv for matvec
    tall = _cuda.BlockToeplitzCUDA(torch.randn(4, 6, 4, device="cuda"))
    assert (tall._plan(1).algo, tall._plan(1).rmatvec_algo, tall._plan(16).algo) == (2, 2, 3)
    assert _cuda.BlockToeplitzCUDA(torch.randn(4, 5, 3, device="cuda"))._plan(1).algo == 0
    op64 = _cuda.BlockToeplitzCUDA(torch.randn(4, 3, 5, device="cuda", dtype=torch.float64))
    assert (op64._plan(16).algo, op64._plan(16).rmatvec_algo) == (0, 2)
    assert _cuda.BlockToeplitzCUDA(torch.randn(4, 3, 5, device="cuda"), fft=0)._plan(16).algo == 0
    assert (_cuda.BlockToeplitzCUDA(torch.randn(4, 3, 5, device="cuda"), algo=1)._plan(1).rmatvec_algo) == 1


AUTO_FFT = 2  # toeplitz_auto_fft: contiguous transforms + transposes (bench/NOTES-gpu.md version 4)


# Transform layouts: fft 0 (strided R2C/C2R), 1 (two real columns per complex column, strided C2C;
# odd column counts get an empty partner), 2 (contiguous R2C/C2R + tiled transposes), with the
# cuBLAS (gemv reversal trick for R = 1) and own products. Nt = 1 (nfft = 2), prime Nt with odd
# nfft (Nt = 5 → 9, 13 → 25), Nt = 2 (nfft = 3), tiles that divide nothing (37, 131 > 32).
FFT_SIZES = [(1, 1, 1), (2, 3, 2), (5, 3, 4), (13, 5, 7), (7, 37, 131)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["time-major", "space-major"])
@pytest.mark.parametrize("size", FFT_SIZES)
@pytest.mark.parametrize("R", [None, 3, 16])
@pytest.mark.parametrize("algo", [0, 2])
@pytest.mark.parametrize("fft", [0, 1, 2])
def test_fft_layouts(dtype, layout, size, R, algo, fft):
    Nt, Nd, Nm = size
    rng, blocks, op = random_op(size, dtype, layout, algo, fft=fft)
    r = 1 if R is None else R
    assert op._plan(r).fft == fft
    for n, adj in ((Nm, False), (Nd, True)):
        x = rng.standard_normal((Nt, n, r))
        xin = to_layout(x, layout)
        t = torch.tensor(xin if R is not None else xin[..., 0], dtype=getattr(torch, dtype), device="cuda")
        y = op.rmatvec(t) if adj else op.matvec(t)
        got = y.double().cpu().numpy()
        if R is None:
            got = got[..., None]
        assert rel(from_layout(got, layout), ref_toeplitz(blocks, x, adjoint=adj)) < TOL[dtype]


@pytest.mark.parametrize("layout", ["time-major", "space-major"])
def test_paired_nan(layout):
    # fft 1 pairs columns (n, r) and (n + ceil(N/2), r) of ONE right-hand side: a NaN in one
    # right-hand side must not reach the others; in F̂ row d it reaches row d and its partner only.
    Nt, Nd, Nm, R = 4, 5, 6, 3
    blocks = torch.randn(Nt, Nd, Nm, device="cuda")
    op = _cuda.BlockToeplitzCUDA(blocks, layout, fft=1)
    m = torch.randn(Nt, Nm, R, device="cuda")
    m[1, 2, 1] = float("nan")
    if layout == "space-major":
        m = m.permute(1, 0, 2).contiguous()
    y = op.matvec(m)
    y = y if layout == "time-major" else y.permute(1, 0, 2)
    assert torch.isnan(y[:, :, 1]).any() and not torch.isnan(y[:, :, [0, 2]]).any()
    blocks[:, 1, 3] = float("nan")
    op = _cuda.BlockToeplitzCUDA(blocks, "time-major", fft=1)
    y = op.matvec(torch.randn(Nt, Nm, R, device="cuda"))
    assert torch.isnan(y[:, 1]).all() and not torch.isnan(y[:, [0, 2, 3]]).any()


# fft 2 keeps the zero padding of its input rows from plan time (the gathers write the Nt data
# entries only; the time-reversed gather of R = 1 rmatvec with gemv has its own buffer) and, for
# even nfft, computes the R2C as a half-length C2C with the post step fused into the transpose.
# Repeated, interleaved calls on one plan, a NaN input followed by clean ones, even nfft with an
# even and an odd half (Nt = 100 → 200, 6 → 12, 7 → 14), odd nfft (13 → 25), tiles with tails.
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["time-major", "space-major"])
@pytest.mark.parametrize("size", [(100, 3, 70), (6, 5, 67), (7, 66, 3), (13, 2, 5)])
@pytest.mark.parametrize("R", [None, 2, 16])
@pytest.mark.parametrize("algo", [0, 2, 3])
def test_fft2_padding_persists(dtype, layout, size, R, algo):
    Nt, Nd, Nm = size
    rng, blocks, op = random_op(size, dtype, layout, algo, fft=2)
    r = 1 if R is None else R

    def call(x, adj, nan=False):
        xin = to_layout(x, layout)
        t = torch.tensor(xin if R is not None else xin[..., 0], dtype=getattr(torch, dtype), device="cuda")
        if nan:
            t.view(-1)[t.numel() // 2] = float("nan")
        y = op.rmatvec(t) if adj else op.matvec(t)
        got = y.double().cpu().numpy()
        return from_layout(got if R is not None else got[..., None], layout)

    for rep in range(3):
        for n, adj in ((Nm, False), (Nd, True)):
            if rep == 1:
                assert np.isnan(call(rng.standard_normal((Nt, n, r)), adj, nan=True)).any()
            x = rng.standard_normal((Nt, n, r))
            assert rel(call(x, adj), ref_toeplitz(blocks, x, adjoint=adj)) < TOL[dtype]


# algo 3: matvec with R > 1 as one real gemm per frequency (F̂ read as real Nd × 2Nm times the
# operand 2Nm × 2R with rows [Re m̂ₙ | Im m̂ₙ], [−Im m̂ₙ | Re m̂ₙ], written by the forward transpose;
# the back transpose reads [Re d̂ | Im d̂]). R = 1, rmatvec and fft 0/1 use algo 0. Even nfft with
# even/odd half, odd nfft (Nt = 2 → 3, 5 → 9, 13 → 25), Nt = 1, tiles with tails, both layouts
# and dtypes; a NaN in one right-hand side stays in it.
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["time-major", "space-major"])
@pytest.mark.parametrize("size", [(1, 1, 1), (2, 3, 2), (5, 3, 4), (13, 5, 7), (7, 37, 131), (6, 66, 67)])
@pytest.mark.parametrize("R", [2, 5, 16, 19])
def test_real_gemm(dtype, layout, size, R):
    Nt, Nd, Nm = size
    rng = np.random.default_rng()
    blocks = rng.standard_normal((Nt, Nd, Nm))
    tdt = getattr(torch, dtype)
    op = _cuda.BlockToeplitzCUDA(torch.tensor(blocks, dtype=tdt, device="cuda"), layout, 3)
    assert (op._plan(R).algo, op._plan(R).rmatvec_algo, op._plan(1).algo) == (3, 0, 0)
    for rep in range(2):
        x = rng.standard_normal((Nt, Nm, R))
        got = op.matvec(torch.tensor(to_layout(x, layout), dtype=tdt, device="cuda")).double().cpu().numpy()
        assert rel(from_layout(got, layout), ref_toeplitz(blocks, x)) < TOL[dtype]
        d = rng.standard_normal((Nt, Nd, R))
        got = op.rmatvec(torch.tensor(to_layout(d, layout), dtype=tdt, device="cuda")).double().cpu().numpy()
        assert rel(from_layout(got, layout), ref_toeplitz(blocks, d, adjoint=True)) < TOL[dtype]
    x = rng.standard_normal((Nt, Nm, R))
    t = torch.tensor(x, dtype=tdt, device="cuda")
    t[Nt // 2, Nm - 1, R - 2] = float("nan")
    y = op.matvec(t if layout == "time-major" else t.permute(1, 0, 2).contiguous())
    y = y if layout == "time-major" else y.permute(1, 0, 2)
    keep = [r for r in range(R) if r != R - 2]
    assert torch.isnan(y[:, :, R - 2]).any() and not torch.isnan(y[:, :, keep]).any()
    want = ref_toeplitz(blocks, x[:, :, keep])
    assert rel(y[:, :, keep].double().cpu().numpy(), want) < TOL[dtype]


@pytest.mark.parametrize("fft", [0, 1])
def test_real_gemm_other_ffts_use_cgemm(fft):
    op = _cuda.BlockToeplitzCUDA(torch.randn(5, 3, 4, device="cuda"), algo=3, fft=fft)
    assert op._plan(16).algo == 0


# fft 2 with even nfft: the inverse side is c2r_pre_transpose (cuFFT's C2R pre step fused into
# the back transpose) and the side's half-length C2C run backwards (bench/NOTES-toeplitz-precision.md
# #narrow-shapes). Nt → M = nfft / 2: 1 → 1 (f = 0 and its mirror M only), 6 → 6 (f = M/2 its own
# mirror), 7 → 7 and 9 → 9 (odd M, prime Nt), 40 → 40 (two frequency tiles); column counts of 1,
# odd, even and past one 32-column tile on either side.
EVEN_SIZES = [(1, 1, 1), (1, 2, 35), (6, 1, 33), (7, 34, 1), (9, 3, 66), (40, 65, 8), (40, 7, 9)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["time-major", "space-major"])
@pytest.mark.parametrize("size", EVEN_SIZES)
@pytest.mark.parametrize("R", [None, 3])
@pytest.mark.parametrize("algo", [-1, 0, 2, 3])
def test_fft2_even_inverse(dtype, layout, size, R, algo):
    Nt, Nd, Nm = size
    rng, blocks, op = random_op(size, dtype, layout, algo, fft=2)
    r = 1 if R is None else R
    assert op._plan(r).fft == 2 and op._plan(r).nfft % 2 == 0
    for rep in range(2):  # a second call on the same plan: nothing left behind in its buffers
        for n, adj in ((Nm, False), (Nd, True)):
            x = rng.standard_normal((Nt, n, r))
            xin = to_layout(x, layout)
            t = torch.tensor(xin if R is not None else xin[..., 0], dtype=getattr(torch, dtype), device="cuda")
            got = (op.rmatvec(t) if adj else op.matvec(t)).double().cpu().numpy()
            if R is None:
                got = got[..., None]
            assert rel(from_layout(got, layout), ref_toeplitz(blocks, x, adjoint=adj)) < TOL[dtype]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("Nt", [1, 6, 7])
def test_fft2_even_nan_in_fhat(dtype, Nt):
    # A NaN in F̂ reaches exactly the output columns it touches through the fused pre step (the
    # own products, as in test_own_kernels_nan_in_tail, which runs odd nfft only).
    Nd, Nm = 35, 130
    blocks = torch.randn(Nt, Nd, Nm, device="cuda", dtype=getattr(torch, dtype))
    blocks[:, 34, 129] = float("nan")
    op = _cuda.BlockToeplitzCUDA(blocks, algo=2, fft=2)
    assert op._plan(1).nfft % 2 == 0
    for R in (None, 3):
        tail = () if R is None else (R,)
        y = op.matvec(torch.randn(Nt, Nm, *tail, device="cuda", dtype=blocks.dtype))
        assert torch.isnan(y[:, 34]).all() and not torch.isnan(y[:, :34]).any()
        x = op.rmatvec(torch.randn(Nt, Nd, *tail, device="cuda", dtype=blocks.dtype))
        assert torch.isnan(x[:, 129]).all() and not torch.isnan(x[:, :129]).any()


@pytest.mark.parametrize("precision", [None, {"fhat": "bfloat16"}])
@pytest.mark.parametrize("Nt", [1, 6, 7])
def test_fft2_even_nan_in_input(precision, Nt):
    # A NaN in the input spreads over its transform (every output at its last time is NaN); the
    # next clean call on the same plan is clean.
    Nd, Nm = 3, 66
    op = _cuda.BlockToeplitzCUDA(torch.randn(Nt, Nd, Nm, device="cuda"), fft=2, precision=precision)
    for n, f in ((Nm, op.matvec), (Nd, op.rmatvec)):
        x = torch.randn(Nt, n, device="cuda")
        x[0, n - 1] = float("nan")
        y = f(x)
        assert torch.isnan(y[Nt - 1 if f == op.matvec else 0]).all()
        assert not torch.isnan(f(torch.randn(Nt, n, device="cuda"))).any()
