"""CPU check of the persistent Monarch kernel's index mapping (bench/ks_fused_mon_model.py, the
float64 model of src/cuda/ks/ks_fused_mon.cuh lane by lane): the pair's output against the dense
Monarch product for S = 16 (two m16 row tiles) and 32, partial last tiles, a batch of 1, and a
persistent grid looping over several tiles; and the layout's claims: every fragment load hits
32 distinct banks, stage 2's packed stores at most 2 per bank."""

import pytest

from bench_module import bench_module

model = bench_module("ks_fused_mon_model")


@pytest.mark.parametrize("S, RT, batch, grid", model.CASES)
def test_index_mapping(S, RT, batch, grid):
    err, worst = model.check(S, RT, batch, grid, seed=S + batch)
    assert err < 1e-13, err
    for kind in ("stage 2 A", "stage 2 B", "stage 1 A", "stage 1 B", "stage 1 C", "copy-out"):
        assert worst[kind] == 1, (kind, worst)
    assert worst["stage 2 C"] <= 2 and worst["w1 staging"] <= 2, worst


def test_shared_memory_fits_one_block():
    """S = 32 (monarch(1024, 32)): weights, two x tiles and the intermediate in exactly the 227 KB
    H100/H200 opt-in per block (228 KB per SM less the 1 KB the system keeps per block)."""
    assert 4 * model.geo(32, 1)["WORDS"] == 232448
    assert 4 * model.geo(16, 2)["WORDS"] + 1024 <= 233472 // 3  # S = 16: three blocks per SM


def test_a_wrong_swizzle_is_caught():
    """Without the weight rows' swizzle the B-fragment loads conflict (the check has teeth)."""
    keep = model.swz
    model.swz = lambda S, r, w: w
    try:
        _, worst = model.check(32, 1, 16, 1)
    finally:
        model.swz = keep
    assert worst["stage 2 B"] > 1
