"""GPU ks small-batch path (options path "small", src/cuda/ks/ks_small.cu) against float64:
forward and dx at batch 1, 2, 7, 64, 256, float32 / bfloat16 / float16, both layouts, on the
Monarch pairs of the ViT-S/16 and GPT-2-medium MLPs (bench/e2e_ks_mlp.py mlp_pair) and on
patterns with tails (c not a multiple of the warp or of the sum split, d > 1, tiny blocks)."""
import functools

import pytest

from ks_cuda_common import needs_gpu, K, TOL, dense, force, ks_path, poisoned_pool, rel, rnd, torch

pytestmark = needs_gpu

# mlp_pair(n_in, n_out, s) = [(1, n_out / nb, s, nb), (nb, s, s, 1)], nb = n_in / s
MONARCH = [(12, 32, 32, 1), (1, 128, 32, 12),     # ViT-S/16 fc1 384 -> 1536
           (24, 64, 64, 1), (1, 16, 64, 24),      # ViT-S/16 fc2 1536 -> 384
           (32, 32, 32, 1), (1, 128, 32, 32),     # GPT-2 medium fc1 1024 -> 4096
           (64, 64, 64, 1), (1, 16, 64, 64)]      # GPT-2 medium fc2 4096 -> 1024
TAILS = [(2, 40, 33, 1), (1, 70, 100, 1), (3, 5, 37, 2), (2, 9, 3, 5), (1, 7, 3, 1), (4, 2, 2, 8)]
BATCHES = (1, 2, 7, 64, 256)


@functools.lru_cache(maxsize=4)
def _weights(p):
    w = rnd(*p)
    return w, dense(w, p)


@pytest.mark.parametrize("p", MONARCH + TAILS)
@pytest.mark.parametrize("layout", ["bsf", "bsl"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_small_path_accuracy(p, layout, dtype, monkeypatch):
    force(monkeypatch, path="small")
    a, b, c, d = p
    N, M = a * c * d, a * b * d
    w32, _ = _weights(p)
    w = w32.to(dtype)
    Kd = dense(w, p)  # of the rounded weights: the error left is the kernel's
    for batch in BATCHES:
        assert ks_path(p, batch, layout, str(dtype).split(".")[1]) == ("small", "small")
        x = rnd(batch, N, dtype=dtype) if layout == "bsf" else rnd(N, batch, dtype=dtype)
        es = x.element_size()
        poisoned_pool(es * batch * M)
        y = K.ks_matmul(x, w, p, layout=layout)
        xd = x.double()
        ref = xd @ Kd.T if layout == "bsf" else Kd @ xd
        sc = xd.abs() @ Kd.abs().T if layout == "bsf" else Kd.abs() @ xd.abs()
        assert y.dtype == dtype and y.shape == ref.shape
        assert not torch.isnan(y).any(), batch
        assert rel(y, ref, sc) < TOL[dtype], (batch, rel(y, ref, sc))
        dy = rnd(*y.shape, dtype=dtype)
        poisoned_pool(es * batch * N)
        dx, _ = K.ks_matmul_vjp(dy, x, w, p, layout=layout)
        dyd = dy.double()
        rx = dyd @ Kd if layout == "bsf" else Kd.T @ dyd
        sx = dyd.abs() @ Kd.abs() if layout == "bsf" else Kd.abs().T @ dyd.abs()
        assert not torch.isnan(dx).any(), batch
        assert rel(dx, rx, sx) < TOL[dtype], (batch, rel(dx, rx, sx))


def test_small_path_chain_and_default_rule():
    """A Monarch chain factor by factor through the forced small path equals the forced kernels'
    result; the default rule takes the small path only where it measured faster (batch-first
    forwards: float32 up to batch 8, up to 64 where d > 1; halves at batch 1 except a d == 1 factor
    of over 2^17 weights), never for dx or batch-last."""
    ps = [(1, 128, 32, 12), (12, 32, 32, 1)]
    ws = [rnd(*p) for p in ps]
    x = rnd(7, 384)
    y0 = K.ks_chain(x, ws, ps, options={"path": "kernels", "chain": "factors"})
    for p in ps:
        f32_limit = 64 if p[3] > 1 else 8
        for batch in (1, 7, 8, 9, 64, 65):
            fwd, bx = K.ks_paths(p, batch)[:2]
            assert (fwd == "small") == (batch <= f32_limit) and bx != "small", (p, batch)
            assert "small" not in K.ks_paths(p, batch, layout="bsl")[:2], (p, batch)
            for half in ("bfloat16", "float16"):
                fwd, bx = K.ks_paths(p, batch, dtype=half)[:2]
                assert (fwd == "small") == (batch == 1) and bx != "small", (p, batch, half)
    big = (64, 64, 64, 1)  # a d == 1 factor of 2^18 weights: cuBLAS stays for halves
    assert K.ks_paths(big, 1)[0] == "small"
    assert K.ks_paths(big, 1, dtype="bfloat16")[0] != "small"
    assert K.ks_paths((1, 16, 64, 64), 1, dtype="bfloat16")[0] == "small"
    y1 = K.ks_chain(x, ws, ps, options={"path": "small", "chain": "factors"})
    assert rel(y1, y0.double()) < 1e-5


def test_small_path_batch_limit():
    """Past its batch limit the forced small path applies to no operation: a ValueError that
    names the path."""
    with pytest.raises(ValueError, match="small"):
        K.ks_paths((2, 16, 16, 1), 5000, options={"path": "small"})
