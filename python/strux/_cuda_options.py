"""Explicit kernel choices for the GPU plans (tests, benchmarks): the ``options=`` dict of the GPU
functions, checked here and packed into the small ints the bindings take (python/src/
cuda_options.hpp). ``None`` (or ``{}``) leaves every choice to the plans' solver tables;
what a plan chose is in its ``describe()`` string. The measurements behind the tables:
bench/NOTES-gpu-ks-scan.md.
"""
from __future__ import annotations

import numbers

_KS_PATHS = {"auto": 0, "kernels": 1, "blas": 2, "stream": 3, "tr": 4, "small": 5, "dense": 6}
_KS_TN = {0: 0, 32: 1, 64: 2, 128: 3}
_KS_CHAIN = {"auto": 0, "factors": 1, "fused": 2}
_KS_FUSED_TB = {0: 0, 8: 1, 16: 2, 32: 3, 64: 4}
_DIAG_PATHS = {"auto": -1, "lookback": 0, "seq1": 1, "seqv": 2, "chunk": 3, "pipe": 4, "rows": 5, "tile": 6}
_DIAG_TILE_BYTES = {0: 0, 32: 1, 64: 2, 128: 3, 256: 4}
_BLOCK_PATHS = {"auto": -1, "generic": 0, "registers": 1}
_CIRC_PATHS = {"auto": -1, "fft": 0, "fused": 1, "onepass": 2}


def _items(options, family, keys):
    if not isinstance(options, dict):
        raise TypeError(f"argument 'options': expected a dict or None, got {type(options).__name__}")
    bad = sorted(map(repr, set(options) - set(keys)))  # repr: keys of any type sort
    if bad:
        raise ValueError(f"argument 'options': unknown {family} option(s) {', '.join(bad)}; "
                         f"expected some of {', '.join(keys)}")
    return options


def _pick(options, key, table, default, what):
    v = options.get(key, default)
    try:
        ok = not isinstance(v, bool) and v in table
    except TypeError:  # unhashable (a list, a dict): no table entry
        ok = False
    if not ok:
        raise ValueError(f"argument 'options': {key!r} expected {what}, got {v!r}")
    return table[v]


# The sizes strux indexes (strux._arrays.integer's bound): a larger count would not fit the
# bindings' int64 (nanobind's signature dump instead of a message).
_MAX_INT = 2**62


def _count(options, key, what):
    """A non-negative int option (0: automatic) up to _MAX_INT, as int."""
    v = options.get(key, 0)
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or not 0 <= int(v) <= _MAX_INT:
        raise ValueError(f"argument 'options': {key!r} expected {what} (an int in [0, 2^62]), got {v!r}")
    return int(v)


def ks_code(options) -> int:
    """ks: {"path": "auto" | "kernels" | "blas" | "stream" | "tr" | "small" | "dense", "stream_tn": 0 | 32 | 64 | 128,
    "stream_mt": 0 | 1 | 2, "dw_ptrs": bool, "tc_variant": -1 | 0 | 1, "chain": "auto" | "factors" |
    "fused", "fused_tb": 0 | 8 | 16 | 32 | 64}. A forced path runs every operation it applies to
    (stream: forward and dx only; small, the small-batch kernels: forward and dx, batch <= 4096; dense, W expanded
    into the dense K and one cuBLAS GEMM: forward and dx, K of at most 2^28 elements, else ValueError naming the
    limit) and the table's choice elsewhere; one that applies to no
    operation of the plan raises ValueError (from the plan). "chain" picks how a chain's forward
    runs (a 2-factor chain in one kernel, or factor by factor; a forced "fused" that cannot run
    raises ValueError saying why); "fused_tb" the fused kernel's batch rows per block."""
    if options is None:
        return 0
    o = _items(options, "ks", ("path", "stream_tn", "stream_mt", "dw_ptrs", "tc_variant", "chain", "fused_tb"))
    code = _pick(o, "path", _KS_PATHS, "auto", "one of " + ", ".join(map(repr, _KS_PATHS)))
    code |= _pick(o, "stream_tn", _KS_TN, 0, "0 (automatic), 32, 64 or 128") << 3
    code |= _pick(o, "stream_mt", {0: 0, 1: 1, 2: 2}, 0, "0 (automatic), 1 or 2") << 5
    dw_ptrs = o.get("dw_ptrs", True)
    if not isinstance(dw_ptrs, bool):
        raise ValueError(f"argument 'options': 'dw_ptrs' expected a bool, got {dw_ptrs!r}")
    code |= (0 if dw_ptrs else 1) << 7
    code |= _pick(o, "tc_variant", {-1: 0, 0: 1, 1: 2}, -1, "-1 (automatic), 0 or 1") << 8
    code |= _pick(o, "chain", _KS_CHAIN, "auto", "one of " + ", ".join(map(repr, _KS_CHAIN))) << 10
    code |= _pick(o, "fused_tb", _KS_FUSED_TB, 0, "0 (automatic), 8, 16, 32 or 64") << 12
    return code


def diag_scan_code(options) -> int:
    """diag_scan: {"path": "auto" | "lookback" | "seq1" | "seqv" | "chunk" | "pipe" | "rows" | "tile",
    "tile_bytes": 0 | 32 | 64 | 128 | 256}: the look-back kernel, the streaming one with one channel
    (seq1) or 16 bytes of channels (seqv) per thread, the chunked kernel with a windowed look-back
    in a plan-owned workspace (chunk), or the same decomposition on a persistent grid that copies
    the next chunks into shared memory during the look-back of the current one (pipe), or, for
    n = 1 only (the time-last layout (B, n, T) viewed as (B * n, T, 1)), one block per contiguous
    row of time steps (rows), or one block per tile of channels for the whole sequence, chunks of
    time copied into shared memory ahead (tile; "tile_bytes": the bytes of each time step a block
    owns, 0 lets the plan pick). Streaming, chunk, pipe, rows and tile kernels for float64 /
    complex128, rows with n != 1, and seqv with n not a multiple of the vector width, raise
    ValueError; a forced seqv runs seq1 on calls whose arrays are not 16-byte aligned. The code:
    -1 auto, else the path in bits 0-3 and tile_bytes in bits 4-6 (python/src/cuda_binding.hpp)."""
    if options is None:
        return -1
    o = _items(options, "diag_scan", ("path", "tile_bytes"))
    code = _pick(o, "path", _DIAG_PATHS, "auto", "one of " + ", ".join(map(repr, _DIAG_PATHS)))
    tb = _pick(o, "tile_bytes", _DIAG_TILE_BYTES, 0, "0 (automatic), 32, 64, 128 or 256")
    if tb and code != _DIAG_PATHS["tile"]:
        raise ValueError("argument 'options': 'tile_bytes' needs path 'tile', got path "
                         f"{o.get('path', 'auto')!r}")
    return code | tb << 4 if tb else code


def circulant_scan_code(options) -> int:
    """circulant_scan: {"path": "auto" | "fft" | "fused" | "onepass"}: cuFFT transforms around the
    complex diagonal scan, or (forward with spatial a; float32 with n a power of two in [64, 1024],
    else ValueError) the fused kernels, which keep the spectra out of device memory: "fused" in
    three launches (a, u read twice), "onepass" in one (a, u read once, a look-back over chunks).
    "auto": "onepass" where measured faster (spatial-a forward, float32, n = 256, 512 or 1024,
    B <= 65535), else "fft". The Fourier form (fourier=True) has a one-launch kernel too (â and u
    read once): "onepass" forces it, "auto" takes it for float32 with n = 64 … 1024, "fft" and
    "fused" (no three-launch Fourier form) keep cuFFT."""
    if options is None:
        return -1
    o = _items(options, "circulant_scan", ("path",))
    return _pick(o, "path", _CIRC_PATHS, "auto", "one of " + ", ".join(map(repr, _CIRC_PATHS)))


def block_scan_code(options) -> tuple:
    """block_circulant_scan: {"path": "auto" | "generic" | "registers", "chunk": L}: the any-p
    shared-memory kernels, or the chunked kernels (p <= 4, 8, 16, else ValueError) in one chunk of
    time or, with "chunk", in chunks of L steps. Returns (registers code, chunk)."""
    if options is None:
        return -1, 0
    o = _items(options, "block_circulant_scan", ("path", "chunk"))
    reg = _pick(o, "path", _BLOCK_PATHS, "auto", "one of " + ", ".join(map(repr, _BLOCK_PATHS)))
    chunk = _count(o, "chunk", "a number of time steps >= 1 or 0 (automatic)")
    if chunk and reg == 0:
        raise ValueError("argument 'options': 'chunk' needs the register kernels, got path 'generic'")
    return (1 if chunk else reg), chunk
