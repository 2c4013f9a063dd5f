"""The one timer of the GPU benchmarks: CUDA events on the current stream, warm-up calls first,
medians. Every GPU benchmark driver times through these functions.

- time_ms: each call between two events (host work before the launch counts too);
- back_to_back_ms: n calls between two events, queued behind a GPU sleep (the GPU's time);
- host_us: host time per call while the GPU is kept busy (the host's own cost);
- copy_bandwidth: device-to-device copy rate, the ceiling the tables compare against;
- kernel_us: the CUDA kernels of a call and their device time (torch.profiler): what costs what.
"""
from __future__ import annotations

import statistics
import time


def _torch():
    import torch
    return torch


def _warmed(fn, warm):
    """torch, after `warm` calls of fn and a synchronize (so no warm-up work is timed)."""
    torch = _torch()
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    return torch


def _event_ms(torch, body):
    """CUDA-event ms of body() on the current stream (waits for the end event)."""
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    body()
    b.record()
    b.synchronize()
    return a.elapsed_time(b)


def time_ms(fn, warm=3, reps=15):
    """(median, min, max) of `reps` CUDA-event timings of fn() in ms, after `warm` calls."""
    torch = _warmed(fn, warm)
    times = [_event_ms(torch, fn) for _ in range(reps)]
    return statistics.median(times), min(times), max(times)


def median_ms(fn, reps=20, warm=3):
    """Median CUDA-event ms of fn() (time_ms's median alone)."""
    return time_ms(fn, warm=warm, reps=reps)[0]


def back_to_back_ms(fn, n=20, reps=5, warm=3):
    """ms per call of n calls between two events, median of `reps`: the GPU time (time_ms also
    counts host overhead that leaves the GPU idle). A ~2 ms GPU sleep before the first event lets
    the host queue all n calls first, so the figure is GPU time even where a call's host work
    takes longer than its kernels."""
    torch = _warmed(fn, warm)

    def calls():
        for _ in range(n):
            fn()

    ts = []
    for _ in range(reps):
        torch.cuda._sleep(4_000_000)
        ts.append(_event_ms(torch, calls) / n)
    return statistics.median(ts)


def host_us(fn, n=100, reps=9, warm=3):
    """Median host microseconds per call, the GPU kept busy by a sleep queued first (nothing waits
    on the GPU, so this is the host's own cost per call)."""
    torch = _warmed(fn, warm)
    ts = []
    for _ in range(reps):
        torch.cuda._sleep(int(n * 250e3))  # ~125 us of GPU time per call: the queue never drains
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        ts.append((time.perf_counter() - t0) / n * 1e6)
        torch.cuda.synchronize()
    return statistics.median(ts)


def copy_bandwidth(n=1 << 28, reps=20, warm=3):
    """Bytes per second of a device-to-device copy of n float32 (read + write counted)."""
    torch = _torch()
    x = torch.empty(n, device="cuda").uniform_()
    y = torch.empty_like(x)
    t = time_ms(lambda: y.copy_(x), warm=warm, reps=reps)[0]
    del x, y
    return 2 * 4 * n / (t * 1e-3)


def kernel_us(fn, calls=10, width=70):
    """[(kernel name cut to `width`, launches per call, device us per call)] of fn()'s CUDA kernels,
    slowest first: torch.profiler's CUDA activity over `calls` calls after one warm-up call."""
    from torch.profiler import ProfilerActivity, profile
    torch = _warmed(fn, 1)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    rows = []
    for ev in prof.key_averages():
        t = getattr(ev, "device_time_total", None)
        if t is None:
            t = getattr(ev, "cuda_time_total", 0.0)
        if t > 0:
            rows.append((ev.key[:width], ev.count / calls, t / calls))
    return sorted(rows, key=lambda r: -r[2])
