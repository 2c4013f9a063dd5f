"""CirculantSSM (p = 1) against DiagonalSSM real01, forward, and the Fourier-form scan alone, on the
GPU (issue 14: circ >= 0.5x real01 at n = 64, B = 16, T = 2048).

1. The experiment's own measurement (experiments/circulant_ssm/run.py `throughput`: d = n,
   float32, no grad, perf_counter around a synchronized call, median of 5), run three times, and
   once with 50 reps: tokens/s and the ratio circ / real01 at n = 64 and 256.
2. Where a layer's forward goes: host time per call (strux.bench.timing.host_us: the Python and
   launch work) and GPU time per call (back_to_back_ms: calls queued behind a GPU sleep), for
   circ, real01 and two variants of circ in the same process: "circ-oldglue" (the previous glue:
   views, broadcast polar, index + contiguous, the registered op's dispatch; inside the op the
   new cheap checks and the default kernel) and "circ-fft" (the
   new glue with the forward_fourier cuFFT path forced).
3. The scan alone, Fourier form: the one-launch kernel ("onepass") vs the cuFFT path ("fft") and
   the default ("auto"), GPU ms and % of the byte floor (read â 8 (n/2+1) + u 4 n, write h 4 n
   bytes per step at the copy bandwidth of this run), n = 64..1024, B = 16, T = 2048, and the
   agreement of onepass with fft.
Writes OUTDIR/circulant_layer.json.   python bench/gpu_circulant_layer.py OUTDIR
"""
import json
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "experiments", "circulant_ssm"))

import run as experiment  # noqa: E402  (experiments/circulant_ssm/run.py)
import strux.torch as st  # noqa: E402
from strux import _cuda_scan as K  # noqa: E402
from strux.bench.timing import back_to_back_ms, copy_bandwidth, host_us  # noqa: E402
from strux.torch import _scan  # noqa: E402

B, T = 16, 2048


def ratio_rows(tp):
    out = {}
    for n in sorted({r["n"] for r in tp["rows"]}):
        rows = {(r["what"], r["model"]): r for r in tp["rows"] if r["n"] == n}
        lay = rows[("layer", "circ")]["tokens_per_s"] / rows[("layer", "real01")]["tokens_per_s"]
        scn = rows[("scan", "circ")]["tokens_per_s"] / rows[("scan", "real01")]["tokens_per_s"]
        out[n] = dict(layer=lay, scan=scn, circ_ms=1e3 * rows[("layer", "circ")]["seconds"],
                      real01_ms=1e3 * rows[("layer", "real01")]["seconds"])
    return out


def old_glue(layer, x):
    """CirculantSSM p = 1's forward before this change: views, broadcast polar, index, op dispatch."""
    Bx, Tx, _ = x.shape
    F = layer.nfreq
    u = layer.in_proj(x)
    r = torch.sigmoid(layer.r_proj(x)).view(Bx, Tx, 1, 1, F)
    theta = layer.theta_proj(x).view(Bx, Tx, 1, 1, F)
    a_hat = torch.polar(r.expand(Bx, Tx, 1, 1, F), theta)
    return layer.out_proj(_scan._circ_scan(a_hat[:, :, 0, 0].contiguous(), u, None, True))


def fft_forced(layer, x):
    u = layer.in_proj(x)
    return layer.out_proj(K.circ_fwd_torch(layer._spectra(x), u, None, True, u.get_device(), 0))


def main(out):
    torch.manual_seed(0)
    res = dict(device=torch.cuda.get_device_name(), B=B, T=T)
    print(f"{res['device']}", flush=True)
    with torch.no_grad():
        # 1. the experiment's measurement
        runs = []
        for i in range(3):
            runs.append(ratio_rows(experiment.throughput("cuda", B=B, T=T, ns=(64, 256), reps=5, names=("circ", "real01"))))
        runs.append(ratio_rows(experiment.throughput("cuda", B=B, T=T, ns=(64, 256), reps=50, names=("circ", "real01"))))
        res["experiment"] = runs
        for n in (64, 256):
            print(f"EXPERIMENT n={n}: layer circ/real01 = " +
                  ", ".join(f"{r[n]['layer']:.2f}x" for r in runs) + " (3 x reps 5, reps 50); ms circ " +
                  ", ".join(f"{r[n]['circ_ms']:.3f}" for r in runs) + " real01 " +
                  ", ".join(f"{r[n]['real01_ms']:.3f}" for r in runs) + "; scan circ/real01 " +
                  ", ".join(f"{r[n]['scan']:.2f}x" for r in runs), flush=True)

        # 2. host and GPU time per layer forward
        from models import MIXERS
        res["layers"] = []
        for n in (64, 256):
            x = torch.randn(B, T, n, device="cuda")
            circ = MIXERS["circ"][1](n, n).cuda()
            real = MIXERS["real01"][1](n, n).cuda()
            K_desc = K.circulant_scan_describe(B, T, n)
            print(f"n={n}: {K_desc}", flush=True)
            cases = {"circ": lambda: circ(x), "real01": lambda: real(x), "circ-oldglue": lambda: old_glue(circ, x),
                     "circ-fft": lambda: fft_forced(circ, x)}
            ref = circ(x)
            for name, fn in cases.items():
                diff = float((fn() - ref).abs().max() / ref.abs().max()) if name.startswith("circ") else None
                row = dict(n=n, model=name, host_us=host_us(fn, n=50), gpu_ms=back_to_back_ms(fn, n=10, reps=5),
                           wall_ms=1e3 * experiment._time(fn, "cuda", 50), diff=diff)
                res["layers"].append(row)
                print(f"LAYER n={n} {name:>13}: wall {row['wall_ms']:.3f} ms  host {row['host_us']:.0f} us  "
                      f"gpu {row['gpu_ms']:.3f} ms" + ("" if diff is None else f"  diff {diff:.1e}"), flush=True)

        # 3. the scan alone, Fourier form
        bw = copy_bandwidth(1 << 28, reps=10)
        res["copy_bw"], res["scan"] = bw, []
        print(f"copy {bw / 1e12:.2f} TB/s", flush=True)
        for n in (64, 128, 256, 512, 1024):
            F = n // 2 + 1
            ah = torch.polar(0.2 + 0.75 * torch.rand(B, T, F, device="cuda"), 6.3 * torch.rand(B, T, F, device="cuda"))
            u = torch.randn(B, T, n, device="cuda")
            floor_ms = (8 * F + 8 * n) * B * T / bw * 1e3
            row = dict(n=n, floor_ms=floor_ms, ms={}, frac={})
            href = K.circulant_scan(ah, u, fourier=True, options={"path": "fft"})
            row["diff_onepass"] = float((K.circulant_scan(ah, u, fourier=True, options={"path": "onepass"}) - href)
                                        .abs().max() / href.abs().max())
            for p in ("auto", "fft", "onepass"):
                opts = None if p == "auto" else {"path": p}
                ms = back_to_back_ms(lambda: K.circulant_scan(ah, u, fourier=True, options=opts), n=20, reps=5)
                row["ms"][p], row["frac"][p] = ms, floor_ms / ms
            res["scan"].append(row)
            print(f"SCAN fourier n={n:5d} floor {1e3 * floor_ms:6.1f} us: " +
                  "  ".join(f"{p} {row['ms'][p]:.4f} ms ({100 * row['frac'][p]:.0f}%)" for p in row["ms"]) +
                  f"  fft/onepass {row['ms']['fft'] / row['ms']['onepass']:.2f}x  diff {row['diff_onepass']:.1e}",
                  flush=True)
    with open(os.path.join(out, "circulant_layer.json"), "w") as f:
        json.dump(res, f, indent=1, default=str)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
