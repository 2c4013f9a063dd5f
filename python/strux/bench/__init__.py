"""Benchmark harness: every family's cases, verified and timed against a baseline in one run.

Each family module here exposes `cases() -> list[Case]`; `run()` verifies each case against
its reference, times strux and the baseline alternately in the same process (medians), and
returns rows that `table()` prints and the CLI writes as JSON.
"""
from __future__ import annotations

import importlib
import sys
import time

import numpy as np

from .case import Case

FAMILIES = ("fftconv", "toeplitz", "ks", "scan")


def _to_host(x):
    if hasattr(x, "detach"):  # torch
        x = x.detach().cpu().numpy()
    elif hasattr(x, "get") and not isinstance(x, np.ndarray):  # cupy
        x = x.get()
    return np.asarray(x)


def rel_error(out, ref) -> float:
    out = _to_host(out).astype(np.complex128 if np.iscomplexobj(out) else np.float64)
    ref = _to_host(ref).astype(np.complex128 if np.iscomplexobj(ref) else np.float64)
    if out.shape != ref.shape:
        return float("inf")
    denom = np.linalg.norm(ref.ravel())
    err = np.linalg.norm((out - ref).ravel())
    return float(err / denom) if denom > 0 else float(err)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch
        torch.cuda.synchronize()


def time_fn(fn, device: str = "cpu", min_time: float = 0.3, min_reps: int = 5, max_reps: int = 200) -> float:
    """Median seconds of one call (after a warm-up call)."""
    fn()
    _sync(device)
    times = []
    start = time.perf_counter()
    while len(times) < max_reps and (len(times) < min_reps or time.perf_counter() - start < min_time):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def copy_bandwidth() -> float:
    """Measured host memory copy bandwidth in bytes/s (bytes read + written), the CPU ceiling."""
    src = np.ones(1 << 25, np.float32)  # 128 MiB, far larger than the caches
    dst = np.empty_like(src)
    t = time_fn(lambda: np.copyto(dst, src), min_reps=5, max_reps=20)
    return 2 * src.nbytes / t


def collect(families=FAMILIES) -> list[Case]:
    out = []
    for fam in families:
        mod = importlib.import_module(f"{__name__}.{fam}")
        out.extend(mod.cases())
    return out


def run(cases: list[Case], progress=True) -> list[dict]:
    bw = copy_bandwidth()
    if progress:
        print(f"host copy bandwidth {bw / 1e9:.1f} GB/s (read + write)", file=sys.stderr, flush=True)
    rows = []
    for i, c in enumerate(cases):
        if progress:
            print(f"[{i + 1}/{len(cases)}] {c.family}: {c.name} ...", file=sys.stderr, flush=True)
        out = c.strux()
        ref = c.reference() if c.reference is not None else c.baseline()
        err = rel_error(out, ref)
        t_strux = time_fn(c.strux, c.device)
        t_base = time_fn(c.baseline, c.device)
        rows.append({
            "family": c.family, "case": c.name, "device": c.device,
            "strux_ms": t_strux * 1e3, "baseline_ms": t_base * 1e3, "baseline": c.baseline_name,
            "speedup": t_base / t_strux, "bytes": c.bytes, "gbps": c.bytes / t_strux / 1e9,
            "copy_gbps": bw / 1e9, "floor_fraction": c.bytes / t_strux / bw,
            "gflops": c.flops / t_strux / 1e9 if c.flops else None,
            "rel_error": err, "tol": c.tol, "verified": bool(err <= c.tol), **c.extra,
        })
    return rows


def table(rows: list[dict]) -> str:
    head = (f"{'family':9} {'case':44} {'strux ms':>9} {'base ms':>9} {'speedup':>8} {'GB/s':>7} "
            f"{'%copy':>6} {'rel err':>8}  ok")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['family']:9} {r['case'][:44]:44} {r['strux_ms']:9.3f} {r['baseline_ms']:9.3f} "
                     f"{r['speedup']:7.2f}x {r['gbps']:7.2f} {100 * r['floor_fraction']:5.1f}% {r['rel_error']:8.1e}  {'yes' if r['verified'] else 'NO'}")
    return "\n".join(lines)
