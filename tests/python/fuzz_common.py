"""Shared pieces of the fuzz/property suite (test_fuzz_*.py): hypothesis settings, array layouts
and dtypes, the one outcome check, and the tally behind bench/NOTES-hostile.md's table.

Every case ends in one of: a correct result (against a float64 reference of the DESIGN.md
formula, tolerance following the arithmetic), or a ValueError / TypeError / MemoryError whose
message names the argument (FileNotFoundError for a path that does not exist). Anything else
fails the test. Set STRUX_FUZZ_TABLE=<path> to write
the per-category tally as JSON when the session ends (tests only; the library reads nothing).
"""
from __future__ import annotations

import atexit
import collections
import json
import os
import time

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# Deterministic: derandomized, no example database; small budgets keep the suite < 90 s.
FUZZ = settings(derandomize=True, database=None, deadline=None, max_examples=250, print_blob=False,
                suppress_health_check=list(HealthCheck))
FUZZ_SMALL = settings(FUZZ, max_examples=100)

# Cases slower than this count as a hang in the tally (and fail).
HANG_S = 20.0

TALLY: dict = collections.defaultdict(collections.Counter)


def _dump():
    path = os.environ.get("STRUX_FUZZ_TABLE")
    if path:
        with open(path, "w") as f:
            json.dump({k: dict(v) for k, v in TALLY.items()}, f, indent=1, sort_keys=True)


atexit.register(_dump)

# ---- inputs ----------------------------------------------------------------------------------
DTYPES = ["float64", "float32", "float16", ">f8", ">f4"]
LAYOUTS = ["c", "f", "slice", "neg", "unaligned", "swapped-order"]
SIZES = st.sampled_from([1, 2, 3, 5, 7, 13])


def tol(dt) -> float:
    """Norm-wise relative tolerance of a result in dtype `dt` (compute in >= float32)."""
    dt = np.dtype(dt)
    size = dt.itemsize // 2 if dt.kind == "c" else dt.itemsize  # complex: its real part's precision
    return {8: 1e-10, 4: 2e-5, 2: 4e-3}[size]


def make(rng, shape, dtype, layout="c", scale=1.0):
    """Random values of `shape` rounded to `dtype`, in memory laid out as `layout`."""
    a = (rng.standard_normal(shape) * scale).astype(np.dtype(dtype))
    return lay_out(a, layout)


def lay_out(a, layout):
    if layout == "c":
        return np.ascontiguousarray(a)
    if layout == "f":
        return np.asfortranarray(a)
    if layout == "slice":  # every other element of a larger array
        big = np.zeros(tuple(2 * s for s in a.shape), a.dtype)
        idx = tuple(slice(None, None, 2) for _ in a.shape)
        big[idx] = a
        return big[idx]
    if layout == "neg":  # negative strides
        idx = tuple(slice(None, None, -1) for _ in a.shape)
        return np.ascontiguousarray(a[idx])[idx]
    if layout == "unaligned":  # data pointer one byte past an aligned address
        buf = np.zeros(a.nbytes + 1, np.uint8)[1:]
        v = buf.view(a.dtype).reshape(a.shape)
        v[...] = a
        return v
    if layout == "swapped-order":  # byte-swapped dtype, same values
        return a.astype(a.dtype.newbyteorder())
    raise AssertionError(layout)


def f64(a):
    return None if a is None else np.asarray(a, dtype=np.complex128 if np.iscomplexobj(a) else np.float64)


def relerr(out, ref) -> float:
    out, ref = f64(out), f64(ref)
    den = np.linalg.norm(ref.ravel())
    return float(np.linalg.norm((out - ref).ravel()) / (den if den > 0 else 1.0))


# ---- outcomes --------------------------------------------------------------------------------
def names_argument(e: BaseException, names) -> bool:
    """The message names one of `names` ('x', or an element 'x[1]'); names=None: any argument."""
    m = str(e)
    if names is None:
        return "argument '" in m
    return any(f"'{n}'" in m or f"'{n}[" in m for n in names)


def run(category: str, call, names, check=None, expect_error: bool = False):
    """Runs call(); returns its result. A ValueError/TypeError/MemoryError must name one of
    `names`; a result is passed to check(result) (raises on a wrong result)."""
    t0 = time.perf_counter()
    try:
        out = call()
    except (ValueError, TypeError, MemoryError, FileNotFoundError) as e:  # a missing file: FileNotFoundError
        if time.perf_counter() - t0 > HANG_S:
            TALLY[category]["hang"] += 1
            raise AssertionError(f"{category}: took {time.perf_counter() - t0:.1f} s to raise")
        if not names_argument(e, names):
            TALLY[category]["wrong"] += 1
            raise AssertionError(f"{category}: {type(e).__name__} does not name {names}: {e}") from e
        TALLY[category]["clear error"] += 1
        return None
    except Exception as e:
        TALLY[category]["wrong"] += 1
        raise AssertionError(f"{category}: unexpected {type(e).__name__}: {e}") from e
    if time.perf_counter() - t0 > HANG_S:
        TALLY[category]["hang"] += 1
        raise AssertionError(f"{category}: took {time.perf_counter() - t0:.1f} s")
    if expect_error:
        TALLY[category]["wrong"] += 1
        raise AssertionError(f"{category}: expected an error naming {names}, got a result")
    try:
        if check is not None:
            check(out)
    except AssertionError:
        TALLY[category]["wrong"] += 1
        raise
    TALLY[category]["correct"] += 1
    return out


def expect_close(out, ref, dt, *, scale: float = 1.0, what: str = "result"):
    """out ~ ref (norm-wise), out of the native form of dtype dt; non-finite refs stay non-finite."""
    want_dt = np.dtype(dt).newbyteorder("=")
    assert np.dtype(out.dtype) == want_dt, f"{what}: dtype {out.dtype}, expected {want_dt}"
    assert out.shape == np.shape(ref), f"{what}: shape {out.shape}, expected {np.shape(ref)}"
    ref = f64(ref)
    bad = ~np.isfinite(ref)
    if bad.any():
        assert not np.any(bad & np.isfinite(f64(out))), f"{what}: a non-finite reference came out finite"
        return
    e = relerr(out, ref)
    assert e <= tol(dt) * scale, f"{what}: relative error {e:.3g} > {tol(dt) * scale:.3g} ({dt})"
