"""Direct fftconv solver vs the FFT solver (algo 4: fused kernels where they apply, else cuFFT) vs torch F.conv1d (groups=H, left padding), causal, ms
(device events, medians) + ratios + % of the HBM floor (read u once, write y once; copy bandwidth
measured in the same run). Each sample times REPS calls enqueued back to back, so the host's
per-call Python cost overlaps the device work as in a training step (one call between two events
would add it in full: `direct_1call` times that). The automatic choice (options=None, timed as
`auto`) is checked to take the direct kernels exactly up to AUTO_TAPS taps
(= src/cuda/fftconv/direct.hpp kAutoTaps). Each row checks the direct result
against the FFT one (relative error, forward and gradients) and prints ERROR past TOL.
Usage: python3 bench/gpu_fftconv_direct.py [--out file.json]"""
import json
import sys

import torch
import torch.nn.functional as F

import strux
import strux._cuda_fftconv


REPS = 5
AUTO_TAPS = 32
TOL = {torch.float16: 5e-3, torch.float32: 1e-4}  # relative norm; gradients sum up to 65536 terms


def rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30)).item()


def timeit(f, n=9, reps=REPS):
    """Median over n samples of the mean time of `reps` calls enqueued back to back, ms."""
    f()
    torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            f()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) / reps)
    ts.sort()
    return ts[len(ts) // 2]


def main():
    out = sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv else None
    x = torch.empty(2**28, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    bw = 2 * x.numel() / (timeit(lambda: y.copy_(x)) * 1e-3)  # bytes/s
    print(f"copy bandwidth {bw / 1e12:.2f} TB/s")
    rows = []
    for B, H, L in ((8, 768, 4096), (1, 1536, 65536)):
        for dt in (torch.float16, torch.float32):
            for Lk in (2, 4, 16, 64):
                u = torch.randn(B, H, L, device="cuda", dtype=dt)
                k = torch.randn(H, Lk, device="cuda", dtype=dt)
                dy = torch.randn_like(u)
                floor = 2 * u.numel() * u.element_size() / bw * 1e3
                r = {"B": B, "H": H, "L": L, "Lk": Lk, "dtype": str(dt)[6:], "floor_ms": floor}
                r["auto_direct"] = "direct" in strux._cuda_fftconv.FFTConvCUDA(k, B=B, L=L).describe()
                if r["auto_direct"] != (Lk <= AUTO_TAPS):
                    print(f"RULE MISMATCH: the automatic choice at Lk={Lk} is direct={r['auto_direct']}")
                od, of = {"solver": "direct"}, {"solver": "fused"}
                r["err"] = max(rel(strux.fftconv(u, k, options=od), strux.fftconv(u, k, options=of)),
                               *(rel(a, b) for a, b in zip(strux.fftconv_vjp(dy, u, k, options=od),
                                                           strux.fftconv_vjp(dy, u, k, options=of))
                                 if b is not None))  # no gates, no skip: their slots are None
                if not r["err"] <= TOL[dt]:
                    print(f"ERROR: direct vs fft relative error {r['err']:.2e} > {TOL[dt]:.0e} at Lk={Lk} {dt}")
                r["auto"] = timeit(lambda: strux.fftconv(u, k))  # the no-options fast path
                r["direct_1call"] = timeit(lambda: strux.fftconv(u, k, options={"solver": "direct"}), reps=1)
                for name, o in (("direct", {"solver": "direct"}), ("fft", {"solver": "fused"})):
                    r[name] = timeit(lambda: strux.fftconv(u, k, options=o))
                    r[name + "_fb"] = timeit(lambda: (strux.fftconv(u, k, options=o),
                                                      strux.fftconv_vjp(dy, u, k, options=o)))
                w = k.flip(-1)[:, None, :].contiguous()
                r["torch"] = timeit(lambda: F.conv1d(F.pad(u, (Lk - 1, 0)), w, groups=H))
                rows.append(r)
                print(f"B={B} H={H} L={L} Lk={Lk} {r['dtype']}: direct {r['direct']:.3f} ms "
                      f"({100 * floor / r['direct']:.0f}% floor; 1 call {r['direct_1call']:.3f}, auto {r['auto']:.3f}), fft {r['fft']:.3f} "
                      f"({r['fft'] / r['direct']:.2f}x), torch {r['torch']:.3f} ({r['torch'] / r['direct']:.2f}x); "
                      f"fwd+bwd direct {r['direct_fb']:.3f} fft {r['fft_fb']:.3f} "
                      f"({r['fft_fb'] / r['direct_fb']:.2f}x)", flush=True)
                del u, dy
    if out:
        with open(out, "w") as f:
            json.dump({"copy_bw": bw, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
