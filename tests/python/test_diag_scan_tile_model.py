"""CPU check of the tile diag_scan kernel's schedule (bench/diag_scan_tile_model.py, a float64 model
of src/cuda/scan/diag_scan_tile.cuh indexed as the kernel indexes): forward and backward against the
direct recurrence, with and without h0, for 128-, 64- and 32-byte rows, 16-byte and one-element
lanes, T = 1, prime T, partial chunks, n not a multiple of the tile, 2 to 6 stages; and the model
fails when a step of the schedule is broken."""
import importlib.util
import pathlib

import pytest

_path = pathlib.Path(__file__).resolve().parents[2] / "bench" / "diag_scan_tile_model.py"
_spec = importlib.util.spec_from_file_location("diag_scan_tile_model", _path)
model = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(model)


@pytest.mark.parametrize("case", model.CASES, ids=str)
@pytest.mark.parametrize("with_h0", [False, True])
def test_schedule(case, with_h0):
    assert model.check(*case, with_h0=with_h0, scale=0.75, seed=sum(case)) < 1e-12


@pytest.mark.parametrize("bug", ["fold order", "refill early", "shuffle stride"])
def test_a_broken_schedule_is_caught(bug):
    """The warps' totals folded last warp first, a stage refilled one chunk early, the warp's
    segments scanned with lane stride 1 instead of LR: each breaks the model (the model can fail)."""
    assert model.check(2, 1009, 16, 4, 4, 4, 3, bug=bug) > 1e-3


def test_option_code():
    """{"path": "tile", "tile_bytes": ...} packs as python/src/cuda_binding.hpp unpacks it (the path in
    bits 0-3, the row bytes' code in bits 4-6); tile_bytes without path "tile" is refused."""
    spec = importlib.util.spec_from_file_location(
        "cuda_options", pathlib.Path(__file__).resolve().parents[2] / "python" / "strux" / "_cuda_options.py")
    O = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(O)
    assert O.diag_scan_code({"path": "tile"}) == 6
    assert [O.diag_scan_code({"path": "tile", "tile_bytes": b}) >> 4 for b in (0, 32, 64, 128, 256)] == [0, 1, 2, 3, 4]
    assert O.diag_scan_code({"path": "tile", "tile_bytes": 128}) & 15 == 6
    for bad in ({"path": "chunk", "tile_bytes": 32}, {"tile_bytes": 64}, {"path": "tile", "tile_bytes": 48}):
        with pytest.raises(ValueError):
            O.diag_scan_code(bad)
