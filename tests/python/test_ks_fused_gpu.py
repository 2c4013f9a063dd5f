"""The fused KS pair on the GPU (src/cuda/ks/ks_fused.cuh): a 2-factor chain in one kernel, forced
with options={"chain": "fused"}, both layouts, against the float64 formula (DESIGN.md ks) and
against the factor-by-factor chain.

Tolerances follow the arithmetic. float32 runs 3xTF32 (products to ~2^-21, float32 sums, a
float32 intermediate): the brief's bound, 1e-6 relative (norm-wise) to float64. Half types
round the intermediate and the output to the input type (unit roundoff u = 2^-11 float16,
2^-8 bfloat16), like two single-factor calls; each rounding is at most u/2 per element, so the
norm-wise error is about u/2 and the bound is 4u. Against the factor-by-factor chain (the same
roundings in halves, other summation orders; its own float32 error) the bound is twice that.
"""
import pytest

torch = pytest.importorskip("torch")
from ks_cuda_common import DEV, dense_autograd, needs_gpu, poisoned_pool, rel, rnd  # noqa: E402
from strux import _cuda_ks as K  # noqa: E402
from strux.patterns import monarch  # noqa: E402

pytestmark = needs_gpu

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
TOL = {torch.float32: 1e-6, torch.float16: 4 * 2.0**-11, torch.bfloat16: 4 * 2.0**-8}
FUSED = {"chain": "fused"}
FACTORS = {"chain": "factors"}

PAIRS = {
    "monarch1024": monarch(1024, 32),               # (1,32,32,32) + (32,32,32,1)
    "monarch4096": monarch(4096, 64),               # (1,64,64,64) + (64,64,64,1)
    "monarch256": monarch(256, 16),                 # (1,16,16,16) + (16,16,16,1)
    "nonsquare_first": [(1, 64, 32, 16), (16, 32, 64, 1)],   # 1024 -> 1024, factor 2 not square
    "nonsquare_both": [(2, 48, 32, 8), (4, 32, 48, 4)],      # 768 -> 768, both not square, d > 1
    "strided_both": [(4, 32, 32, 8), (8, 32, 32, 4)],        # d > 1 in both factors
    "few_groups": [(2, 96, 64, 1), (1, 128, 96, 1)],          # 96 -> 192 through 128: 1 and 2 groups
    "vit_fc1": [(1, 128, 32, 12), (12, 32, 32, 1)],          # 384 -> 1536 (bench/e2e_ks_mlp.py)
    "vit_fc2": [(1, 16, 64, 24), (24, 64, 64, 1)],           # 1536 -> 384
    "gpt2_proj": [(1, 16, 64, 64), (64, 64, 64, 1)],         # 4096 -> 1024
}


def _weights(ps, dtype):
    return [rnd(*p, dtype=dtype) / (p[2] ** 0.5) for p in ps]


def _ref(x, ws, ps, layout="bsf"):
    """y = x (K_1 ⋯ K_P)^T ("bsf") or K_1 ⋯ K_P x ("bsl") in float64 from the inputs as given
    (exact in float64)."""
    Kt = dense_autograd([w.double() for w in ws], ps)
    return x.double() @ Kt.T if layout == "bsf" else Kt @ x.double()


def _case(name, batch, dtype, layout="bsf"):
    ps = PAIRS[name]
    a, _, c, d = ps[-1]
    x = rnd(*((batch, a * c * d) if layout == "bsf" else (a * c * d, batch)), dtype=dtype)
    return x, _weights(ps, dtype), ps


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: str(t).split(".")[-1])
@pytest.mark.parametrize("name", sorted(PAIRS))
@pytest.mark.parametrize("batch", [1, 7, 301])
@pytest.mark.parametrize("layout", ["bsf", "bsl"])
def test_fused_matches_float64(name, batch, dtype, layout):
    x, ws, ps = _case(name, batch, dtype, layout)
    dt = str(dtype).split(".")[-1]
    assert K.ks_chain_path(ps, batch, layout=layout, dtype=dt, options=FUSED)[0] == "fused"
    y = K.ks_chain(x, ws, ps, layout=layout, options=FUSED)
    M = ps[0][0] * ps[0][1] * ps[0][3]
    assert y.dtype == dtype and tuple(y.shape) == ((batch, M) if layout == "bsf" else (M, batch))
    ref = _ref(x, ws, ps, layout)
    assert torch.isfinite(y).all()
    assert rel(y, ref) <= TOL[dtype], (name, batch, dtype, rel(y, ref))
    y2 = K.ks_chain(x, ws, ps, layout=layout, options=FACTORS)
    assert rel(y, y2.double()) <= 2 * TOL[dtype]  # two results, each within TOL of float64


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: str(t).split(".")[-1])
@pytest.mark.parametrize("tb", [8, 16, 32, 64])
@pytest.mark.parametrize("name", ["monarch1024", "nonsquare_both"])
def test_every_block_shape(name, tb, dtype):
    """Each batch-rows-per-block instantiation, with a batch that leaves a partial last block."""
    x, ws, ps = _case(name, 3 * tb + 5, dtype)
    opts = dict(FUSED, fused_tb=tb)
    try:
        path = K.ks_chain_path(ps, x.shape[0], dtype=str(dtype).split(".")[-1], options=opts)
    except ValueError as e:  # this tb does not fit in one block's shared memory here
        assert "fused_tb" in str(e)
        pytest.skip(str(e))
    assert path[0] == "fused" and f"tb {tb}" in path[1] and "monarch" not in path[1]  # forced: pair_kernel
    y = K.ks_chain(x, ws, ps, options=opts)
    assert rel(y, _ref(x, ws, ps)) <= TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: str(t).split(".")[-1])
@pytest.mark.parametrize("layout", ["bsf", "bsl"])
@pytest.mark.parametrize("name", ["monarch1024", "monarch256"])
def test_large_batch_monarch(name, dtype, layout):
    """Many blocks (batch 25088, the benchmark's; the Monarch kernel's persistent blocks loop over
    several tiles each): every row written, the right values."""
    x, ws, ps = _case(name, 25088, dtype, layout)
    poisoned_pool(25088 * 1024 * x.element_size())
    y = K.ks_chain(x, ws, ps, layout=layout, options=FUSED)
    assert torch.isfinite(y).all()
    assert rel(y, _ref(x, ws, ps, layout)) <= TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: str(t).split(".")[-1])
@pytest.mark.parametrize("layout", ["bsf", "bsl"])
def test_unaligned_arrays(dtype, layout):
    """x not 16-byte aligned (storage offset of one element): the scalar copy paths."""
    ps = PAIRS["monarch1024"]
    batch = 32  # a multiple of the vector width: only the offset leaves the 16-byte path
    buf = rnd(batch * 1024 + 1, dtype=dtype)
    x = buf[1:].view((batch, 1024) if layout == "bsf" else (1024, batch))
    assert x.data_ptr() % 16 != 0
    ws = _weights(ps, dtype)
    y = K.ks_chain(x, ws, ps, layout=layout, options=FUSED)
    assert rel(y, _ref(x, ws, ps, layout)) <= TOL[dtype]


def test_nonfinite_inputs_stay_in_their_rows():
    """A NaN in one row of x reaches only that row of y (rows are independent; the padding and
    the partial last block hold no stale values)."""
    ps = PAIRS["monarch1024"]
    x, ws, _ = _case("monarch1024", 40, torch.float32)
    x[5, 17] = float("nan")
    y = K.ks_chain(x, ws, ps, options=FUSED)
    bad = ~torch.isfinite(y).all(dim=1)
    assert bad.nonzero().flatten().tolist() == [5]


def test_infinite_input_stays_infinite_float32():
    """3xTF32: an infinite x times weights exact in tf32 (their lo part 0) gives inf, not
    0 * inf = NaN from the lo(w) * hi(x) product. Positive weights: no inf - inf anywhere."""
    ps = monarch(256, 16)
    ws = [torch.full(p, 1.0 / 16, device=DEV) for p in ps]
    x = torch.rand(8, 256, device=DEV)
    x[2, 3] = float("inf")
    y = K.ks_chain(x, ws, ps, options=FUSED)
    assert (y[2] == float("inf")).all()
    assert torch.isfinite(y[torch.arange(8, device=DEV) != 2]).all()


@pytest.mark.parametrize("ps,layout,match", [
    ([(1, 8, 8, 4), (4, 8, 8, 1)], "bsl", "multiple of 16"),
    ([(1, 8, 8, 4), (4, 8, 8, 1)], "bsf", "multiple of 16"),
    ([(1, 16, 16, 1)] * 3, "bsf", "chains of 2 factors"),
])
def test_forced_fused_that_cannot_run_says_why(ps, layout, match):
    with pytest.raises(ValueError, match=match):
        K.ks_chain_path(ps, 64, layout=layout, options=FUSED)
    a, _, c, d = ps[-1]
    x = rnd(*((64, a * c * d) if layout == "bsf" else (a * c * d, 64)))
    with pytest.raises(ValueError, match=match):
        K.ks_chain(x, _weights(ps, torch.float32), ps, layout=layout, options=FUSED)


def test_default_and_factors_paths_unchanged():
    """Without a forced choice the rule decides: the Monarch kernel for monarch(1024, 32) halves,
    batch-first, from 16 rows per SM; factor by factor for float32, batch-last and small batches;
    "factors" forces the old path; both agree with float64."""
    ps = PAIRS["monarch1024"]
    big = 16 * torch.cuda.get_device_properties(0).multi_processor_count
    for dt in ("bfloat16", "float16"):
        assert K.ks_chain_path(ps, big, dtype=dt)[0] == "fused", dt
        assert K.ks_chain_path(ps, big - 1, dtype=dt)[0] == "factors", dt
        assert K.ks_chain_path(ps, big, layout="bsl", dtype=dt)[0] == "factors", dt
    assert K.ks_chain_path(ps, big, dtype="float32")[0] == "factors"
    assert K.ks_chain_path(ps, big, dtype="bfloat16", options=FACTORS)[0] == "factors"
    x, ws, _ = _case("monarch1024", big + 3, torch.bfloat16)
    assert rel(K.ks_chain(x, ws, ps), _ref(x, ws, ps)) <= 4 * 2.0 ** -8
    x, ws, _ = _case("monarch1024", 129, torch.float32)
    for opts in (None, FACTORS):
        assert rel(K.ks_chain(x, ws, ps, options=opts), _ref(x, ws, ps)) <= 2e-6


def test_ks_linear_fused_option():
    """KSLinear(options={"chain": "fused"}) forward equals the default KSLinear's; the backward
    (factor by factor) runs and matches float64."""
    st = pytest.importorskip("strux.torch")
    ps = monarch(1024, 32)
    torch.manual_seed(0)
    lin = st.KSLinear(ps, device=DEV)
    fused = st.KSLinear(ps, device=DEV, weights=[w.detach() for w in lin.weights], options=FUSED)
    with torch.no_grad():
        fused.bias.copy_(torch.randn_like(fused.bias))
        lin.bias.copy_(fused.bias)
    x = rnd(3, 5, 1024).requires_grad_(True)
    y = fused(x)
    assert rel(y, lin(x).double()) <= 2e-6
    y.square().sum().backward()
    assert x.grad is not None and all(w.grad is not None for w in fused.weights)
    with pytest.raises(ValueError, match="chain"):
        st.KSLinear(ps, options={"chain": "bogus"})


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: str(t).split(".")[-1])
@pytest.mark.parametrize("name", ["monarch1024", "strided_both", "vit_fc1"])
@pytest.mark.parametrize("layout", ["bsf", "bsl"])
def test_forced_fused_from_every_entry(name, dtype, layout):
    """The forced fused forward runs from every entry that takes options: strux._cuda_ks.ks_chain
    (the torch per-call checks, and the full checks for a non-contiguous x), KSLinear (eager, with
    and without autograd, leading batch dimensions); each with the scratch the plan asks for
    (the weight copies of the factors with d > 1, not the intermediates). strux.ks_chain takes
    no options: it runs the same launcher under the rule."""
    x, ws, ps = _case(name, 77, dtype, layout)
    ref = _ref(x, ws, ps, layout)
    tol = TOL[dtype]
    y = K.ks_chain(x, ws, ps, layout=layout, options=FUSED)
    assert rel(y, ref) <= tol
    xt = x.t().contiguous().t()  # same values, not C-contiguous: the full checks
    assert not xt.is_contiguous()
    assert rel(K.ks_chain(xt, ws, ps, layout=layout, options=FUSED), ref) <= tol
    import strux
    assert rel(strux.ks_chain(x, ws, ps, layout=layout), ref) <= 2 * tol  # the rule's path
    if layout == "bsf":
        st = pytest.importorskip("strux.torch")
        lin = st.KSLinear(ps, bias=False, device=DEV, dtype=dtype, weights=ws, options=FUSED)
        x3 = x.reshape(7, 11, -1)
        with torch.no_grad():
            assert rel(lin(x3).reshape(77, -1), ref) <= tol
        xg = x3.clone().requires_grad_(True)
        out = lin(xg)
        assert rel(out.detach().reshape(77, -1), ref) <= tol
        out.float().square().sum().backward()
        assert xg.grad is not None and all(w.grad is not None for w in lin.weights)


def test_chain_scratch_is_the_plans():
    """The plan reports the bytes each path needs (cuda_ks_chain_workspace); a smaller scratch is a
    ValueError naming it."""
    ext, dev = K._ext, torch.cuda.current_device()
    flat = [v for p in PAIRS["strided_both"] for v in p]
    code_f, code_s = K._O.ks_code(FUSED), K._O.ks_code(FACTORS)
    fused = ext.cuda_ks_chain_workspace(flat, 64, False, 0, dev, code_f, False)
    assert fused >= 4 * (4 * 32 * 32 * 8 + 8 * 32 * 32 * 4)  # both factors' weight copies, float32
    assert ext.cuda_ks_chain_workspace(flat, 64, False, 0, dev, code_s, False) >= 4 * 64 * 8 * 32 * 4
    mon = [v for p in PAIRS["monarch1024"] for v in p]
    assert ext.cuda_ks_chain_workspace(mon, 64, False, 0, dev, code_f, True) >= 4 * 64 * 1024
    x, ws, ps = _case("strided_both", 64, torch.float32)
    y = torch.empty(64, 1024, device=DEV)
    s = torch.empty(fused, dtype=torch.uint8, device=DEV)
    with pytest.raises(ValueError, match="scratch"):
        ext.cuda_ks_chain_forward(x.data_ptr(), [w.data_ptr() for w in ws], y.data_ptr(), s.data_ptr(), fused - 1,
                                  flat, 64, False, 0, dev, code_f, 0)


# ---- the persistent Monarch kernel (src/cuda/ks/ks_fused_mon.cuh) ----------------------------
HALVES = [torch.float16, torch.bfloat16]
MON = ["monarch1024", "monarch256"]  # S = 32 (16-row tiles, one block per SM), S = 16 (32-row tiles)


def _path(name, batch, dtype, layout="bsf", opts=FUSED):
    return K.ks_chain_path(PAIRS[name], batch, layout=layout, dtype=str(dtype).split(".")[-1], options=opts)


def test_monarch_kernel_is_picked_where_it_applies():
    """Batch-first halves with K_2 = (S,S,S,1), K_1 = (1,S,S,S), S = 16, 32, no forced tb; pair_kernel
    everywhere else (float32, batch-last, S = 64, other pairs, a forced fused_tb)."""
    for name in MON:
        for dt in HALVES:
            assert "monarch kernel" in _path(name, 4096, dt)[1]
            assert "monarch kernel" not in _path(name, 4096, dt, "bsl")[1]
            assert "monarch kernel" not in _path(name, 4096, dt, opts=dict(FUSED, fused_tb=16))[1]
        assert "monarch kernel" not in _path(name, 4096, torch.float32)[1]
    for name in ("monarch4096", "strided_both", "nonsquare_first"):
        assert "monarch kernel" not in _path(name, 4096, torch.bfloat16)[1]


@pytest.mark.parametrize("dtype", HALVES, ids=lambda t: str(t).split(".")[-1])
@pytest.mark.parametrize("name", MON)
@pytest.mark.parametrize("batch", [1, 7, 17, 33, 301, 4111])
def test_monarch_kernel_matches_float64(name, batch, dtype):
    """Fresh inputs, batches that leave partial tiles (17, 33, 301) and that give blocks more than
    one tile (4111 at S = 32: 132 blocks x 16 rows per sweep on an H100/H200); against float64
    and against pair_kernel forced in the same process."""
    x, ws, ps = _case(name, batch, dtype)
    assert "monarch kernel" in _path(name, batch, dtype)[1]
    y = K.ks_chain(x, ws, ps, options=FUSED)
    ref = _ref(x, ws, ps)
    assert torch.isfinite(y).all()
    assert rel(y, ref) <= TOL[dtype], (name, batch, dtype, rel(y, ref))
    y_old = K.ks_chain(x, ws, ps, options=dict(FUSED, fused_tb=16))
    assert rel(y, y_old.double()) <= 2 * TOL[dtype]


@pytest.mark.parametrize("dtype", HALVES, ids=lambda t: str(t).split(".")[-1])
def test_monarch_kernel_unaligned(dtype):
    """Weights one element off 4-byte alignment (the 2-byte staging loads) and x one element off
    16 bytes (falls back to pair_kernel): both right."""
    ps = PAIRS["monarch1024"]
    x, ws, _ = _case("monarch1024", 45, dtype)
    wsu = []
    for w in ws:
        buf = torch.empty(w.numel() + 1, dtype=dtype, device=DEV)
        v = buf[1:].view(w.shape)
        v.copy_(w)
        assert v.data_ptr() % 4 != 0
        wsu.append(v)
    ref = _ref(x, ws, ps)
    assert rel(K.ks_chain(x, wsu, ps, options=FUSED), ref) <= TOL[dtype]
    buf = torch.empty(x.numel() + 1, dtype=dtype, device=DEV)
    xu = buf[1:].view(x.shape)
    xu.copy_(x)
    assert rel(K.ks_chain(xu, ws, ps, options=FUSED), ref) <= TOL[dtype]


@pytest.mark.parametrize("dtype", HALVES, ids=lambda t: str(t).split(".")[-1])
@pytest.mark.parametrize("name", MON)
def test_monarch_kernel_nan_stays_in_its_row(name, dtype):
    """Every output of a Monarch row depends on every input of that row (the ks contract), and on
    nothing else: a NaN in x reaches exactly its row's outputs, in the first and in a later tile,
    and the zero-filled rows of the partial last tile leave no trace."""
    batch = 4111
    x, ws, ps = _case(name, batch, dtype)
    bad_rows = [5, 2500, batch - 1]
    for r in bad_rows:
        x[r, (r * 37) % x.shape[1]] = float("nan")
    y = K.ks_chain(x, ws, ps, options=FUSED)
    nonfinite = ~torch.isfinite(y)
    assert nonfinite.any(dim=1).nonzero().flatten().tolist() == bad_rows
    assert nonfinite[bad_rows].all()
    good = torch.ones(batch, dtype=torch.bool, device=DEV)
    good[bad_rows] = False
    assert rel(y[good], _ref(x[good], ws, ps)) <= TOL[dtype]


def test_monarch_kernel_back_to_back_calls_and_streams():
    """Two calls on different streams and a call right after a pair_kernel call: the kernel keeps
    no state between calls (its shared-memory attribute and occupancy are read once per device)."""
    x, ws, ps = _case("monarch1024", 999, torch.bfloat16)
    ref = _ref(x, ws, ps)
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(s1):
        y1 = K.ks_chain(x, ws, ps, options=FUSED)
    with torch.cuda.stream(s2):
        y2 = K.ks_chain(x, ws, ps, options=dict(FUSED, fused_tb=32))
        y3 = K.ks_chain(x, ws, ps, options=FUSED)
    torch.cuda.synchronize()
    for y in (y1, y2, y3):
        assert rel(y, ref) <= TOL[torch.bfloat16]
