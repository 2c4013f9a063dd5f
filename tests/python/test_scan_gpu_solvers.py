"""Every diag_scan solver of the GPU plan, forced through options={"path": ...}, against the
float64 formula (DESIGN.md "scan"): forward and gradients, every dtype, T = 1, prime and long T,
few and many channels, h0, non-contiguous and misaligned inputs, NaN propagation, repeated
calls and two streams on one plan (the chunk solver's plan-owned workspace), and the public
layout options (axis, reverse, a broadcast). Skipped without PyTorch, a GPU or the CUDA build."""
import functools

import pytest

torch = pytest.importorskip("torch")
from strux import _cuda_scan as K  # noqa: E402

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and K.available()),
                                reason="needs a CUDA GPU and strux built with CUDA")
DEV = "cuda"
DTYPES = [torch.float32, torch.complex64, torch.float16, torch.bfloat16, torch.float64, torch.complex128]
TOL = {torch.float32: 5e-5, torch.complex64: 1e-4, torch.float16: 5e-3, torch.bfloat16: 3e-2,
       torch.float64: 1e-12, torch.complex128: 1e-12}
SOLVERS = ["auto", "lookback", "seq1", "seqv", "chunk", "pipe", "tile"]
VEC = {torch.float32: 4, torch.complex64: 2, torch.float16: 8, torch.bfloat16: 8}


def applies(path, dtype, n):
    """Whether a forced solver exists for this dtype and n (else the plan raises ValueError)."""
    if path in ("auto", "lookback"):
        return True
    if dtype in (torch.float64, torch.complex128):
        return False
    return path != "seqv" or n % VEC[dtype] == 0


def opts(path):
    return None if path == "auto" else {"path": path}


def coeffs(B, T, n, dtype, seed=0):
    """Stable random a (0.5 <= |a| < 1, random signs / phases) and b, exactly representable in dtype."""
    g = torch.Generator().manual_seed(seed)
    mag = 0.5 + 0.49 * torch.rand(B, T, n, generator=g, dtype=torch.float64)
    if dtype.is_complex:
        a = torch.polar(mag, 6.3 * torch.rand(B, T, n, generator=g, dtype=torch.float64))
        b = torch.complex(torch.randn(B, T, n, generator=g, dtype=torch.float64),
                          torch.randn(B, T, n, generator=g, dtype=torch.float64))
    else:
        a = mag * torch.sign(torch.randn(B, T, n, generator=g, dtype=torch.float64))
        b = torch.randn(B, T, n, generator=g, dtype=torch.float64)
    return a.to(dtype).to(DEV), b.to(dtype).to(DEV)


def wide(x):
    if x is None:
        return None
    return x.detach().cpu().to(torch.complex128 if x.is_complex() else torch.float64)


def ref_fwd(a, b, h0=None):
    a, b, h0 = wide(a), wide(b), wide(h0)
    h = torch.zeros_like(b[:, 0]) if h0 is None else h0
    out = torch.empty_like(b)
    for t in range(a.shape[1]):
        h = a[:, t] * h + b[:, t]
        out[:, t] = h
    return out


def ref_bwd(dh, a, b, h0=None):
    """g_t = dh_t + conj(a_{t+1}) g_{t+1}; da_t = g_t conj(h_{t-1}); db = g; dh0 = conj(a_0) g_0."""
    h = ref_fwd(a, b, h0)
    a, dh, h0w = wide(a), wide(dh), wide(h0)
    T = a.shape[1]
    g = torch.empty_like(dh)
    acc = torch.zeros_like(dh[:, 0])
    for t in range(T - 1, -1, -1):
        acc = dh[:, t] + (a[:, t + 1].conj() * acc if t + 1 < T else 0)
        g[:, t] = acc
    hp = torch.zeros_like(h)
    hp[:, 1:] = h[:, :-1]
    if h0w is not None:
        hp[:, 0] = h0w
    dh0 = None if h0 is None else a[:, 0].conj() * g[:, 0]
    return g * hp.conj(), g, dh0


def rel(x, ref):
    x = wide(x)
    return float((x - ref).abs().norm() / ref.abs().norm().clamp_min(1e-300))


SHAPES = [(1, 1, 1), (1, 1, 8), (2, 7, 3), (1, 131, 8), (3, 1009, 5), (2, 4099, 16), (1, 5003, 3),
          (4, 67, 1024), (2, 300, 64)]


@functools.lru_cache(maxsize=None)
def case(shape, dtype, with_h0):
    """Inputs and float64 references of one (shape, dtype, h0) case, shared by the solvers."""
    B, T, n = shape
    a, b = coeffs(B, T, n, dtype)
    h0 = coeffs(B, 1, n, dtype, seed=1)[1][:, 0].contiguous() if with_h0 else None
    dh = coeffs(B, T, n, dtype, seed=2)[1]
    return (a, b, h0, dh), ref_fwd(a, b, h0), ref_bwd(dh, a, b, h0)


@pytest.mark.parametrize("path", SOLVERS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("with_h0", [False, True])
def test_forward_and_vjp(path, dtype, shape, with_h0):
    B, T, n = shape
    if not applies(path, dtype, n):
        with pytest.raises(ValueError):
            K.diag_scan(*coeffs(B, T, n, dtype), options=opts(path))
        return
    (a, b, h0, dh), rh, (rda, rdb, rdh0) = case(shape, dtype, with_h0)
    h = K.diag_scan(a, b, h0=h0, options=opts(path))
    assert h.dtype == dtype and h.shape == (B, T, n)
    assert rel(h, rh) < TOL[dtype]
    da, db, dh0 = K.diag_scan_vjp(dh, a, b, h0=h0, options=opts(path))
    assert rel(db, rdb) < TOL[dtype]
    assert rel(da, rda) < TOL[dtype]
    assert (dh0 is None) == (h0 is None)
    if h0 is not None:
        assert rel(dh0, rdh0) < TOL[dtype]


@pytest.mark.parametrize("path", SOLVERS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64, torch.bfloat16], ids=str)
def test_non_contiguous_and_misaligned(path, dtype):
    """A strided view (copied by the adapter) and a contiguous array one element off 16-byte
    alignment (seqv and chunk fall back to one element per lane on that call)."""
    B, T, n = 2, 777, 32
    a, b = coeffs(B, T, 2 * n, dtype)
    a_s, b_s = a[:, :, ::2], b[:, :, 1::2]
    ref = ref_fwd(a_s, b_s)
    assert rel(K.diag_scan(a_s, b_s, options=opts(path)), ref) < TOL[dtype]

    def off(x):
        buf = torch.empty(x.numel() + 1, dtype=x.dtype, device=DEV)
        y = buf[1:].view(x.shape)
        y.copy_(x)
        return y

    a_m, b_m = off(a_s.contiguous()), off(b_s.contiguous())
    assert a_m.data_ptr() % 16 != 0
    assert rel(K.diag_scan(a_m, b_m, options=opts(path)), ref) < TOL[dtype]
    dh = off(coeffs(B, T, n, dtype, seed=3)[1])
    da, db, _ = K.diag_scan_vjp(dh, a_m, b_m, options=opts(path))
    rda, rdb, _ = ref_bwd(dh, a_m, b_m)
    assert rel(db, rdb) < TOL[dtype] and rel(da, rda) < TOL[dtype]


@pytest.mark.parametrize("path", SOLVERS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64, torch.float16, torch.float64], ids=str)
@pytest.mark.parametrize("where", ["a", "b"])
def test_nan_propagates(path, dtype, where):
    """A NaN at (batch 0, step t0, channel c) makes h NaN from t0 on in that channel only."""
    B, T, n, t0, c = 2, 2000, 8, 1234, 5
    if not applies(path, dtype, n):
        pytest.skip("solver does not apply")
    a, b = coeffs(B, T, n, dtype)
    (a if where == "a" else b)[0, t0, c] = float("nan")
    h = K.diag_scan(a, b, options=opts(path)).cpu()
    nan = torch.isnan(h.real if h.is_complex() else h)
    assert nan[0, t0:, c].all()
    nan[0, t0:, c] = False
    assert not nan.any()


@pytest.mark.parametrize("path", ["chunk", "pipe", "tile"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64, torch.bfloat16], ids=str)
def test_chunk_repeated_calls_and_streams(path, dtype):
    """The chunk / pipe solvers' workspace is the plan's, reused without a reset: many calls on one
    plan, alternating two streams, forward and backward, give the same results as the first call."""
    B, T, n = 2, 3001, 24
    a, b = coeffs(B, T, n, dtype)
    dh = coeffs(B, T, n, dtype, seed=4)[1]
    o = {"path": path}
    h_ref = K.diag_scan(a, b, options=o)
    g_ref = K.diag_scan_vjp(dh, a, b, options=o)
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    torch.cuda.synchronize()
    outs = []
    for i in range(12):
        with torch.cuda.stream(s1 if i % 2 else s2):
            outs.append((K.diag_scan(a, b, options=o), K.diag_scan_vjp(dh, a, b, h=h_ref, options=o)))
    torch.cuda.synchronize()
    for h, (da, db, _) in outs:
        assert torch.equal(h, h_ref)
        assert torch.equal(da, g_ref[0]) and torch.equal(db, g_ref[1])
    assert rel(h_ref, ref_fwd(a, b)) < TOL[dtype]


@pytest.mark.parametrize("shape,dtype", [
    ((8, 6000, 512), torch.float32),    # 32 lane tiles x 125 chunks: blocks loop over many chunks
    ((1, 200003, 4), torch.float32),    # one tile, 4167 chunks: look-backs over many windows
    ((2, 50001, 64), torch.complex64),
    ((3, 9000, 40), torch.bfloat16),
    ((2, 7001, 5), torch.float32),      # one element per lane
], ids=str)
def test_pipe_many_chunks_matches_seq1(shape, dtype):
    """The pipe solver's persistent blocks (more chunks than resident blocks, tickets taken ahead,
    look-back windows of 32 chunks) against seq1 on the same data, forward and backward, with h0,
    twice on one plan (the second call runs in the next epoch of the workspace's flags)."""
    B, T, n = shape
    a, b = coeffs(B, T, n, dtype, seed=5)
    h0 = coeffs(B, 1, n, dtype, seed=6)[1][:, 0].contiguous()
    dh = coeffs(B, T, n, dtype, seed=7)[1]
    tol = 4 * TOL[dtype]  # the two kernels round in different orders over long sequences

    def grel(x, r):  # on the device: these arrays are large
        w = torch.complex128 if x.is_complex() else torch.float64
        x, r = x.to(w), r.to(w)
        return float((x - r).abs().norm() / r.abs().norm().clamp_min(1e-300))

    ref = K.diag_scan(a, b, h0=h0, options={"path": "seq1"})
    rda, rdb, rdh0 = K.diag_scan_vjp(dh, a, b, h0=h0, h=ref, options={"path": "seq1"})
    o = {"path": "pipe"}
    for _ in range(2):
        h = K.diag_scan(a, b, h0=h0, options=o)
        assert grel(h, ref) < tol
        da, db, dh0 = K.diag_scan_vjp(dh, a, b, h0=h0, h=ref, options=o)
        assert grel(db, rdb) < tol and grel(da, rda) < tol and grel(dh0, rdh0) < tol


@pytest.mark.parametrize("path", ["pipe", "tile"])
def test_pipe_in_place(path):
    """h written over b (as circulant_scan's spectra use it): each chunk is read before it is written."""
    a, b = coeffs(3, 5000, 64, torch.complex64)
    ref = ref_fwd(a, b)
    K._diag_fwd(a, b, None, 1.0, K._O.diag_scan_code({"path": path}), out=b)
    assert rel(b, ref) < TOL[torch.complex64]


# The tile solver across its chunk and tile boundaries, per row width (tile_bytes; 0: the plan's):
# chunks of 32 / 64 / 128 / 256 steps (16-byte lanes of 256- / 128- / 64- / 32-byte rows), tiles straddling
# batch rows (n / lane width not a multiple of the lanes per row), partial last chunks, one-element
# lanes, many chunks with few tiles (issue 14's (4, 65536, 256) on shorter T) and more tiles than
# one wave of resident blocks.
_TILE = [
    ((3, 1000, 40), torch.float32), ((2, 2053, 96), torch.float32), ((1, 257, 4), torch.float32),
    ((4, 20000, 256), torch.float32), ((2, 1031, 20), torch.complex64), ((2, 777, 72), torch.bfloat16),
    ((2, 513, 9), torch.float16), ((3, 700, 7), torch.float32), ((64, 300, 1024), torch.float32),
]


@pytest.mark.parametrize("tile_bytes", [0, 32, 64, 128, 256])
@pytest.mark.parametrize("shape,dtype", _TILE, ids=str)
def test_tile_boundaries_match_seq1(shape, dtype, tile_bytes):
    """Forward and backward with h0 against seq1 on the same data, twice on one plan."""
    B, T, n = shape
    a, b = coeffs(B, T, n, dtype, seed=8)
    h0 = coeffs(B, 1, n, dtype, seed=9)[1][:, 0].contiguous()
    dh = coeffs(B, T, n, dtype, seed=10)[1]
    tol = 4 * TOL[dtype]

    def grel(x, r):
        w = torch.complex128 if x.is_complex() else torch.float64
        x, r = x.to(w), r.to(w)
        return float((x - r).abs().norm() / r.abs().norm().clamp_min(1e-300))

    ref = K.diag_scan(a, b, h0=h0, options={"path": "seq1"})
    rda, rdb, rdh0 = K.diag_scan_vjp(dh, a, b, h0=h0, h=ref, options={"path": "seq1"})
    o = {"path": "tile", "tile_bytes": tile_bytes}
    for _ in range(2):
        h = K.diag_scan(a, b, h0=h0, options=o)
        assert grel(h, ref) < tol
        da, db, dh0 = K.diag_scan_vjp(dh, a, b, h0=h0, h=ref, options=o)
        assert grel(db, rdb) < tol and grel(da, rda) < tol and grel(dh0, rdh0) < tol


def test_tile_describe():
    """The plan's row width (the widest with a tile per SM, 15 of 16 SMs busy: issue 14's rows on a
    132-SM GPU take 256, 32 and 256 bytes), the forced width, one-element lanes, no workspace, and
    the refusals."""
    from strux import _ext
    d = K.diag_scan_describe(8, 8192, 1024, "float32", options={"path": "tile"})
    assert ": tile" in d and "stages" in d
    if _sms() == 132:
        assert "256-byte rows" in d
        assert "32-byte rows" in K.diag_scan_describe(4, 65536, 256, "float32", options={"path": "tile"})
        assert "256-byte rows" in K.diag_scan_describe(1, 4096, 16384, "float32", options={"path": "tile"})
        assert "128-byte rows" in K.diag_scan_describe(8, 8192, 1024, "bfloat16", options={"path": "tile"})
    assert "64-byte rows" in K.diag_scan_describe(4, 65536, 256, "float32", options={"path": "tile", "tile_bytes": 64})
    assert "32 one-element lanes per block" in K.diag_scan_describe(2, 500, 3, "float32", options={"path": "tile"})
    assert _ext.cuda_diag_scan_workspace(0, 2, 5000, 64, 0, 6) == 0
    for dt in ("float64", "complex128"):
        with pytest.raises(ValueError):
            K.diag_scan_describe(2, 50, 4, dt, options={"path": "tile"})
    with pytest.raises(ValueError):
        K.diag_scan_describe(2, 50, 4, "float32", options={"path": "chunk", "tile_bytes": 32})


def test_chunk_describe_and_workspace():
    d = K.diag_scan_describe(2, 5000, 64, "float32", options={"path": "chunk"})
    assert "chunk" in d and "16-byte lanes" in d
    assert "one element per lane" in K.diag_scan_describe(2, 5000, 3, "float32", options={"path": "chunk"})
    from strux import _ext
    assert _ext.cuda_diag_scan_workspace(0, 2, 5000, 64, 0, 3) == 0  # plan-owned
    with pytest.raises(ValueError):
        K.diag_scan_describe(2, 50, 4, "float64", options={"path": "chunk"})
    d = K.diag_scan_describe(2, 5000, 64, "complex64", options={"path": "pipe"})
    assert "pipe" in d and "16-byte lanes" in d
    assert _ext.cuda_diag_scan_workspace(0, 2, 5000, 64, 0, 4) == 0  # plan-owned
    with pytest.raises(ValueError):
        K.diag_scan_describe(2, 50, 4, "complex128", options={"path": "pipe"})


def _sms():
    return torch.cuda.get_device_properties(0).multi_processor_count


@pytest.mark.parametrize("B,T,n,dtype,want", [
    # issue 14's rows (bench/NOTES-gpu-ks-scan.md#scan-solver-rule)
    (8, 8192, 1024, "float32", "tile"), (4, 65536, 256, "float32", "tile"),
    (8, 8192, 1024, "complex64", "tile"), (32, 512, 64, "complex64", "tile"),
    (1, 4096, 16384, "float32", "tile"), (64, 1024, 2048, "bfloat16", "tile"),
    (16, 2048, 4096, "complex64", "seq1"),
    # half types with few channels, as float32; float64 / complex128 keep the look-back kernel
    (8, 8192, 1024, "bfloat16", "tile"), (8, 8192, 1024, "float16", "tile"),
    # too few lanes for a tile per SM, or n not a whole number of 16-byte lanes: chunk
    (4, 65536, 240, "float32", "chunk"), (8, 8192, 1022, "float32", "chunk"),
    (8, 8192, 1024, "float64", "lookback"), (32, 512, 64, "complex128", "lookback"),
    # within one chunk of time (T <= 128): streams, no plan-owned workspace
    (1, 16, 8, "float32", "seq1"), (4, 128, 256, "complex64", "seq1"),
    (1, 129, 8, "float32", "chunk"),
    # n = 1 (the time-last layout as rows): one block per row from one row per SM
    (8448, 1985, 1, "float32", "rows"), (132, 127100, 1, "complex64", "rows"), (528, 4096, 1, "bfloat16", "rows"),
    (33, 4096, 1, "float32", "chunk"), (64, 16, 1, "float16", "seq1"), (8448, 511, 1, "float32", "chunk"),
])
def test_default_solver_rule(B, T, n, dtype, want):
    """The default's choice: the rule (n = 1 with at least one row per SM and a tile of time
    (128 x 16 bytes): rows; n a whole number of 16-byte lanes, T > 128 and from one tile per SM to
    128 lanes per SM: tile; else chunk up to 128 channels per SM with T > 128, seqv past 512 per SM,
    else seq1; float64 / complex128 lookback) on every row, and on a GPU with the measured SM count
    (132: H100, H200) the choices the measurements were made for."""
    sms, vec = _sms(), {"float32": 4, "complex64": 2, "float16": 8, "bfloat16": 8}
    if dtype in ("float64", "complex128"):
        rule = "lookback"
    elif n == 1 and B >= sms and T >= 128 * 16 // torch.empty((), dtype=getattr(torch, dtype)).element_size():
        rule = "rows"
    elif n % vec[dtype] == 0 and T > 128 and _tile_fits(B * n // vec[dtype], sms):
        rule = "tile"
    elif B * n <= 128 * sms and T > 128:
        rule = "chunk"
    elif B * n > 512 * sms and n % vec[dtype] == 0:
        rule = "seqv"
    else:
        rule = "seq1"
    d = K.diag_scan_describe(B, T, n, dtype)
    assert d.split(": ", 1)[1].startswith(rule), d
    if sms == 132:
        assert rule == want, (rule, want)


def _tile_fits(lanes, sms):
    """The tile rule's band: the widest row (16, 8, 4 or 2 lanes) still gives a tile to 15 of 16
    SMs, and at most 128 lanes per SM."""
    lr = next((r for r in (16, 8, 4) if lanes * 16 >= r * sms * 15), 2)
    return lr * sms * 15 <= lanes * 16 and lanes <= 128 * sms


def test_default_solver_rule_band():
    """The thresholds (float32, 4 channels per 16-byte lane): n aligned, tile from one 32-byte tile
    per 16/15 SMs to 512 channels per SM, seqv above; n not aligned: chunk up to 128 channels per
    SM, seq1 above."""
    sms = _sms()
    first = -(-2 * sms * 15 // 16)  # the fewest lanes with a 2-lane tile on 15 of 16 SMs
    def algo(n):
        return K.diag_scan_describe(1, 4096, n, "float32").split(": ", 1)[1]
    assert algo(4 * (first - 1)).startswith("chunk") and algo(4 * first).startswith("tile")
    assert algo(512 * sms).startswith("tile") and algo(512 * sms + 4).startswith("seqv")
    assert algo(128 * sms - 1).startswith("chunk") and algo(128 * sms + 3).startswith("seq1")


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64], ids=str)
@pytest.mark.parametrize("axis", [1, 2])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("a_shape", ["full", "time-invariant", "batch-shared"])
def test_public_layout_options(dtype, axis, reverse, a_shape):
    """strux.diag_scan's axis / reverse / broadcast a on CUDA tensors vs the formula."""
    import strux
    B, T, n = 3, 517, 12
    a, b = coeffs(B, T, n, dtype)
    if a_shape == "time-invariant":
        a = a[:1, :1].clone()
    elif a_shape == "batch-shared":
        a = a[:1].clone()
    a_full = a.expand(B, T, n)
    ref = ref_fwd(a_full.flip(1), b.flip(1)).flip(1) if reverse else ref_fwd(a_full, b)
    if axis == 2:
        a_in, b_in, ref = a.transpose(1, 2), b.transpose(1, 2), ref.transpose(1, 2)
    else:
        a_in, b_in = a, b
    h = strux.diag_scan(a_in, b_in, axis=axis, reverse=reverse)
    assert h.shape == b_in.shape
    assert rel(h, ref) < TOL[dtype]


# ---- circulant_scan: the fused kernels (forced) ----------------------------------------------------

def ref_circ(a, u, h0=None):
    """h_t = circ(a_t) h_{t-1} + u_t in float64 through numpy's rfft (circ(a) h = a (*) h, cyclic)."""
    import numpy as np
    a, u = a.double().cpu().numpy(), u.double().cpu().numpy()
    A, U = np.fft.rfft(a), np.fft.rfft(u)
    H = np.zeros_like(U[:, 0]) if h0 is None else np.fft.rfft(h0.double().cpu().numpy())
    out = np.empty_like(U)
    for t in range(a.shape[1]):
        H = A[:, t] * H + U[:, t]
        out[:, t] = H
    return torch.from_numpy(np.fft.irfft(out, a.shape[2]))


def circ_inputs(B, T, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = 0.9 * (2 * torch.rand(B, T, n, generator=g) - 1) / n  # |rfft(a_t)| <= 0.9: stable
    u = torch.randn(B, T, n, generator=g)
    h0 = torch.randn(B, n, generator=g)
    return a.to(DEV), u.to(DEV), h0.to(DEV)


def test_circulant_reference_is_the_dense_formula():
    """ref_circ against the explicit circulant matrices of DESIGN.md (small n)."""
    from ref_scan import circ_matrix, dense_scan
    a, u, h0 = circ_inputs(2, 5, 8)
    dense = dense_scan(circ_matrix(a.double().cpu().numpy()), u.double().cpu().numpy(), h0.double().cpu().numpy())
    assert float((ref_circ(a, u, h0) - torch.from_numpy(dense)).abs().max()) < 1e-12


@pytest.mark.parametrize("n", [64, 128, 256, 512, 1024])
@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (2, 300), (5, 1031)], ids=str)
@pytest.mark.parametrize("with_h0", [False, True])
def test_circulant_fused_forward(n, shape, with_h0):
    B, T = shape
    a, u, h0 = circ_inputs(B, T, n)
    h0 = h0 if with_h0 else None
    h = K.circulant_scan(a, u, h0=h0, options={"path": "fused"})
    ref = ref_circ(a, u, h0)
    assert h.dtype == torch.float32 and h.shape == (B, T, n)
    assert rel(h, ref) < 1e-5
    assert rel(K.circulant_scan(a, u, h0=h0, options={"path": "fft"}), ref) < 1e-5


def test_circulant_fused_edges():
    a, u, _ = circ_inputs(2, 9, 256)
    h, last = K.circulant_scan(a, u, options={"path": "fused"}, return_final=True)
    assert torch.equal(last, h[:, -1])
    # strided u (the adapter copies) and half inputs (cast to float32) take the same kernels
    assert rel(K.circulant_scan(a, u.transpose(1, 2).contiguous().transpose(1, 2), options={"path": "fused"}),
               ref_circ(a, u)) < 1e-5
    hb = K.circulant_scan(a.bfloat16(), u.bfloat16(), options={"path": "fused"})
    assert hb.dtype == torch.bfloat16 and rel(hb, ref_circ(a.bfloat16().float(), u.bfloat16().float())) < 3e-2
    with pytest.raises(ValueError):
        K.circulant_scan(*circ_inputs(1, 4, 100)[:2], options={"path": "fused"})
    with pytest.raises(ValueError):
        K.circulant_scan(a.double(), u.double(), options={"path": "fused"})
    with pytest.raises(ValueError):
        K.circulant_scan(a, u, options={"path": "nope"})
