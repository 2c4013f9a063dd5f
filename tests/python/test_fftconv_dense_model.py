"""CPU check of the dense fftconv kernels' index mapping (bench/fftconv_dense_model.py, the float64
model of src/cuda/fftconv/dense.cuh lane by lane): forward, the reversed du pass and the filter
gradient against direct sums, causal and circular, odd rows counts and lengths, partial blocks;
and the shared-memory layout's claim: ldmatrix phases conflict-free when the rows per CTA are a
power of two from 8 (the plan's choice whenever B >= 16 and L <= 2K); 2 or 4 rows (long rows) and
other counts at most two-way."""

import pytest

from bench_module import bench_module

model = bench_module("fftconv_dense_model")


@pytest.mark.parametrize("R, L, m, circular", model.CASES)
def test_index_mapping(R, L, m, circular):
    e_fwd, e_rev, e_dk, worst = model.check(R, L, m, circular, seed=R + L)
    assert max(e_fwd, e_rev, e_dk) < 1e-13, (e_fwd, e_rev, e_dk)
    if R >= 8 and R & (R - 1) == 0:
        assert worst == 1
    assert worst <= 2


def test_a_wrong_layout_is_caught():
    """The model fails when the kernel's layout is broken (here: the swizzle dropped)."""
    keep = model.unit_offset
    model.unit_offset = lambda X, c: X * 4 + c
    try:
        model.CONFLICTS["worst"] = 1
        *_, worst = model.check(16, 64, 64, False)
        assert worst > 1
    finally:
        model.unit_offset = keep


@pytest.mark.parametrize("D, R, NI, circular", [(1, 4, 2, False), (3, 1, 5, False), (11, 4, 11, False),
                                                (129, 4, 128, False), (33, 16, 32, True)])
def test_warp_ranges_cover_every_tap_block_once(D, R, NI, circular):
    """The filter gradient's warp ranges (dense.cuh warp_range) are contiguous, in order, and cover
    [0, D) exactly; causal ranges are balanced by work to within a few tap blocks' work."""
    M = R * NI
    chunks = -(-M // 16)
    ranges = [model.warp_range(w, D, M, R, chunks, circular) for w in range(4)]
    covered = [d for lo, hi in ranges for d in range(lo, hi)]
    assert covered == list(range(D))
    work = [sum(model.live_chunks(d, M, R, chunks, circular) + 2 for d in range(lo, hi)) for lo, hi in ranges]
    if D >= 8:
        assert max(work) - min(work) <= 2 * (chunks + 2), work
