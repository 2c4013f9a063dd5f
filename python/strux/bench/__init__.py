"""Benchmark harness: every family's cases, verified and timed against named baselines in one run.

Each family module here exposes `cases(quick=False) -> list[Case]` (`quick`: small sizes, a smoke
run, on every device). `run()` verifies each case against its float64 reference, then times
strux and every baseline of the case alternately in the same process (one call of each per
round, so a change of machine load hits all of them alike) and keeps min / median / max per
side. `table()` prints the rows; `report.py` writes the JSON, the markdown report and the plot.
"""
from __future__ import annotations

import importlib
import inspect
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .case import Case

FAMILIES = ("fftconv", "toeplitz", "ks", "scan")
SCHEMA_VERSION = 2


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


def _stats(ts) -> dict:
    ts = np.asarray(ts) * 1e3
    return {"min_ms": float(ts.min()), "median_ms": float(np.median(ts)), "max_ms": float(ts.max()),
            "reps": int(ts.size)}


def time_alternately(fns, device: str = "cpu", min_time: float = 0.3, min_reps: int = 5,
                     max_reps: int = 200) -> list:
    """Seconds per call of each function, timed in rounds (one call of each per round, after
    one warm-up call each); returns one _stats dict per function."""
    for fn in fns:
        fn()
    _sync(device)
    times = [[] for _ in fns]
    start = time.perf_counter()
    while len(times[0]) < max_reps and (len(times[0]) < min_reps or time.perf_counter() - start < min_time):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            _sync(device)
            times[i].append(time.perf_counter() - t0)
    return [_stats(t) for t in times]


def time_fn(fn, device: str = "cpu", min_time: float = 0.3, min_reps: int = 5, max_reps: int = 200) -> float:
    """Median seconds of one call (after a warm-up call)."""
    return time_alternately([fn], device, min_time, min_reps, max_reps)[0]["median_ms"] / 1e3


def copy_bandwidth(threads: int = 1) -> float:
    """Host memory copy bandwidth in bytes/s (bytes read + written) with `threads` threads each
    copying its own part of a 128 MiB array (numpy releases the GIL while it copies): the
    memory-speed ceiling of a CPU case."""
    src = np.ones(1 << 25, np.float32)
    dst = np.empty_like(src)
    threads = max(1, int(threads))
    parts = np.array_split(np.arange(src.size), threads)
    bounds = [(int(p[0]), int(p[-1]) + 1) for p in parts if p.size]
    if threads == 1:
        fn = lambda: np.copyto(dst, src)  # noqa: E731
    else:
        pool = ThreadPoolExecutor(threads)

        def fn():
            list(pool.map(lambda b: np.copyto(dst[b[0]:b[1]], src[b[0]:b[1]]), bounds))
    t = time_fn(fn, min_reps=5, max_reps=20)
    if threads > 1:
        pool.shutdown()
    return 2 * src.nbytes / t


def collect(families=FAMILIES, quick: bool = False) -> list[Case]:
    out = []
    for fam in families:
        mod = importlib.import_module(f"{__name__}.{fam}")
        takes_quick = "quick" in inspect.signature(mod.cases).parameters
        out.extend(mod.cases(quick=quick) if takes_quick else mod.cases())
    return out


def run(cases: list[Case], progress=True, quick: bool = False, threads: int = 1) -> list[dict]:
    bw = copy_bandwidth(threads)
    if progress:
        print(f"host copy bandwidth {bw / 1e9:.1f} GB/s (read + write, {threads} threads)", file=sys.stderr, flush=True)
    min_time = 0.05 if quick else 0.3
    rows = []
    for i, c in enumerate(cases):
        if progress:
            print(f"[{i + 1}/{len(cases)}] {c.family}: {c.name} ...", file=sys.stderr, flush=True)
        out = c.strux()
        ref = c.reference() if c.reference is not None else c.baseline()
        err = rel_error(out, ref)
        bases = c.baselines()
        stats = time_alternately([c.strux] + [fn for _, fn in bases], c.device, min_time=min_time)
        s, bstats = stats[0], stats[1:]
        baselines = [{"name": name, **st, "speedup": st["median_ms"] / s["median_ms"]}
                     for (name, _), st in zip(bases, bstats)]
        best = min(baselines, key=lambda b: b["median_ms"])
        t = s["median_ms"] / 1e3
        rows.append({
            "family": c.family, "case": c.name, "device": c.device,
            "strux": s, "baselines": baselines, "best_baseline": best["name"],
            "speedup_vs_best": best["median_ms"] / s["median_ms"],
            # flat fields of schema 1, kept for readers of older files
            "strux_ms": s["median_ms"], "baseline_ms": baselines[0]["median_ms"], "baseline": baselines[0]["name"],
            "speedup": baselines[0]["speedup"],
            "bytes": c.bytes, "gbps": c.bytes / t / 1e9, "copy_gbps": bw / 1e9, "floor_fraction": c.bytes / t / bw,
            "gflops": c.flops / t / 1e9 if c.flops else None,
            "rel_error": err, "tol": c.tol, "verified": bool(err <= c.tol), **c.extra,
        })
    return rows


def table(rows: list[dict]) -> str:
    """Plain-text table: one line per case, then one indented line per baseline."""
    head = (f"{'family':9} {'case':66} {'strux ms (min/med/max)':>24} {'GB/s':>7} {'%copy':>6} "
            f"{'rel err':>8}  ok")
    lines = [head, "-" * len(head)]
    for r in rows:
        s = r["strux"]
        t = f"{s['min_ms']:.3f}/{s['median_ms']:.3f}/{s['max_ms']:.3f}"
        case = r["case"]  # never cut: a long name widens its row
        lines.append(f"{r['family']:9} {case:66} {t:>24} {r['gbps']:7.2f} {100 * r['floor_fraction']:5.0f}% "
                     f"{r['rel_error']:8.1e}  {'yes' if r['verified'] else 'NO'}")
        for b in r["baselines"]:
            bt = f"{b['min_ms']:.3f}/{b['median_ms']:.3f}/{b['max_ms']:.3f}"
            lines.append(f"{'':9}   vs {b['name']:62} {bt:>24}  speedup {b['speedup']:.2f}x")
    lines.append("%copy: achieved GB/s over the measured DRAM copy bandwidth with the same threads; cases whose "
                 "data fits in cache can pass 100%.")
    return "\n".join(lines)
