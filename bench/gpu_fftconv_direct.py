"""Direct fftconv solver vs the default (fused FFT) vs torch F.conv1d (groups=H, left padding), causal,
ms (device events, medians) + ratios + % of the HBM floor (read u once, write y once; copy bandwidth
measured in the same run). Usage: python3 bench/gpu_fftconv_direct.py [--out file.json]"""
import json
import sys

import torch
import torch.nn.functional as F

import strux


def timeit(f, n=20):
    f()
    torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        f()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
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
                for name, o in (("direct", {"solver": "direct"}), ("default", None)):
                    r[name] = timeit(lambda: strux.fftconv(u, k, options=o))
                    r[name + "_fb"] = timeit(lambda: (strux.fftconv(u, k, options=o),
                                                      strux.fftconv_vjp(dy, u, k, options=o)))
                w = k.flip(-1)[:, None, :].contiguous()
                r["torch"] = timeit(lambda: F.conv1d(F.pad(u, (Lk - 1, 0)), w, groups=H))
                rows.append(r)
                print(f"B={B} H={H} L={L} Lk={Lk} {r['dtype']}: direct {r['direct']:.3f} ms "
                      f"({100 * floor / r['direct']:.0f}% floor), default {r['default']:.3f} "
                      f"({r['default'] / r['direct']:.2f}x), torch {r['torch']:.3f} ({r['torch'] / r['direct']:.2f}x); "
                      f"fwd+bwd direct {r['direct_fb']:.3f} default {r['default_fb']:.3f} "
                      f"({r['default_fb'] / r['direct_fb']:.2f}x)", flush=True)
                del u, dy
    if out:
        with open(out, "w") as f:
            json.dump({"copy_bw": bw, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
