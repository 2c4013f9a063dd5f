"""The dense fftconv solver (plan algo 15: Toeplitz blocks on tensor cores)
against the automatic choice without it (plan algo 16: what algo 0 took before it) and the
tensor-core FFT solver (algo 2, where it applies), the wgmma kernel (algo 17: the ungated forward on
wgmma, sm_90a; its FLOP count taken as the mma.sync kernel's) and the automatic rule (algo 0: its
cost model's choice, ratio to the fastest of dense, wgmma and algo 16), same process,
float16 and bfloat16: issue 12's shapes (B = 64, H = 768, FFT size 256 … 8K, causal L = N/2 and
circular L = N, Lk = L), their neighbours (B = 8 and 1, odd L, short filters) and the kernel alone
(FFTConvCUDA: spectrum/taps cached). Per case: GPU ms per call back to back, dense / auto, the HBM
floor fraction (read u and write y once at the measured copy bandwidth) and the tensor rate
reached (2 FLOPs per tap used per output, the causal triangle counted as computed: the tiles of
one block row run all taps up to it). Writes OUTDIR/fftconv_dense.json; prints one line per case.
    python bench/gpu_fftconv_dense.py OUTDIR [--quick]
"""
import json
import sys

import torch

from strux import _cuda_fftconv as _fc
from strux.bench.gpu import copy_bandwidth, fftconv_algo, free, rel, with_algo
from strux.bench.timing import back_to_back_ms

out = sys.argv[1] if len(sys.argv) > 1 else "."
quick = "--quick" in sys.argv
# (B, H, L, Lk, mode[, "gated": pregate, postgate and skip])
ISSUE = [(64, 768, 128, 128, "causal"), (64, 768, 256, 256, "circular"), (64, 768, 512, 512, "causal"),
         (64, 768, 1024, 1024, "circular"), (64, 768, 2048, 2048, "causal"), (64, 768, 4096, 4096, "causal")]
NEAR = [(8, 768, 256, 256, "causal"), (8, 768, 1024, 1024, "causal"), (64, 768, 1024, 1024, "causal"),
        (1, 768, 1024, 1024, "causal"), (1, 768, 2048, 2048, "causal"), (2, 768, 512, 512, "circular"),
        (1, 64, 512, 512, "causal"), (64, 768, 3000, 3000, "causal"), (16, 768, 5000, 5000, "causal"),
        (64, 768, 200, 200, "causal"), (8, 768, 8192, 128, "causal"), (8, 768, 8192, 64, "causal"),
        (4, 1536, 16384, 256, "causal"), (2, 768, 32768, 300, "causal"), (64, 768, 512, 512, "circular"),
        (64, 768, 512, 512, "causal", "gated"), (64, 768, 1024, 1024, "causal", "gated"),
        (64, 768, 512, 512, "circular", "gated"), (64, 768, 128, 128, "causal", "gated")]
# the automatic rule's cost model near its edges (dense.hpp): taps per output 768–1500, gated 2048
RULE = [(64, 768, 1025, 1025, "causal"), (64, 768, 4096, 1024, "causal"), (64, 768, 768, 768, "circular"),
        (64, 768, 3000, 3000, "causal"), (64, 768, 2048, 2048, "causal", "gated"), (64, 768, 8192, 2048, "causal")]
CASES = ISSUE + RULE + ([] if quick else NEAR)
dtypes = [torch.float16] if quick else [torch.float16, torch.bfloat16]
bw = copy_bandwidth()
res = dict(device=torch.cuda.get_device_name(), copy_TBps=bw / 1e12, cases=[])
print(f"{res['device']}: copy bandwidth {bw / 1e12:.3f} TB/s", flush=True)


def ref64(u, k, mode):
    L = u.shape[-1]
    n = L if mode == "circular" else 2 * L
    return torch.fft.irfft(torch.fft.rfft(u.double(), n=n) * torch.fft.rfft(k.double(), n=n), n=n)[..., :L]


def flops(B, H, L, m, mode):
    """2 per tap per output, as the kernel runs them: blocks of 32, D tap blocks, causal rows stop
    at their block."""
    NI, D = -(-L // 32), (m + 30) // 32 + 1
    blocks = sum(min(i, D - 1) + 1 for i in range(NI)) if mode == "causal" else NI * D
    return 2.0 * B * H * blocks * 32 * 32


for dt in dtypes:
    for B, H, L, Lk, mode, *gated in CASES:
        r = dict(dtype=str(dt).replace("torch.", ""), B=B, H=H, L=L, Lk=Lk, mode=mode, gated=bool(gated))
        try:
            g = torch.Generator(device="cuda").manual_seed(L + Lk)
            u = torch.randn(B, H, L, device="cuda", generator=g).to(dt)
            k = (torch.randn(H, Lk, device="cuda", generator=g) / min(Lk, L) ** 0.5).to(dt)
            n = B * H * L
            fast = n <= (1 << 25)
            t = (lambda f: back_to_back_ms(f, n=20, reps=5, warm=3)) if fast else \
                (lambda f: back_to_back_ms(f, n=5, reps=3, warm=2))
            gates = ((torch.rand_like(u) + 0.5, torch.rand_like(u) + 0.5, torch.randn(H, device="cuda").to(dt))
                     if gated else (None, None, None))
            call = lambda: _fc.fftconv(u, k, mode, *gates)  # noqa: E731
            v = u[:2] if not gated else (u[:2].double() * gates[0][:2].double())
            want = ref64(v, k, mode)
            if gated:
                want = (want + gates[2].double()[:, None] * v) * gates[1][:2].double()
            for name, algo in (("auto", 16), ("dense", 15), ("tensor", 2), ("rule", 0), ("wgmma", 17)):
                try:
                    f = with_algo(algo, call)
                    y = f()
                    r[f"err_{name}"] = rel(y[:2], want)
                    del y
                    r[f"{name}_ms"] = t(f)
                    with fftconv_algo(algo):
                        r[f"{name}_solver"] = _fc.FFTConvCUDA(k, B, L, mode).describe()
                except ValueError as e:  # the solver does not apply here
                    r[f"{name}_skipped"] = str(e)[:160]
            free()
            if "dense_ms" in r:  # gradients (vjp: du, dk and the gates'), dense against the automatic choice
                dy = torch.randn_like(u)
                vjp = lambda: _fc.fftconv_vjp(dy, u, k, mode, *gates)  # noqa: E731
                ga, gd = with_algo(16, vjp)(), with_algo(15, vjp)()
                r["err_vjp_dense_vs_auto"] = max(rel(a, b) for a, b in zip(gd, ga) if b is not None)
                del ga, gd
                r["auto_vjp_ms"] = t(with_algo(16, vjp))
                r["dense_vjp_ms"] = t(with_algo(15, vjp))
                r["dense_vjp_over_auto"] = r["dense_vjp_ms"] / r["auto_vjp_ms"]
                dy = None
                free()
            if "dense_ms" in r:  # the kernel alone: the taps kept in the plan
                with fftconv_algo(15):
                    op = _fc.FFTConvCUDA(k, B, L, mode)
                r["dense_cached_ms"] = t(lambda: op(u, *gates))
                del op
            floor = 2 * n * u.element_size() / bw * 1e3
            r["floor_ms"] = floor
            m = Lk if mode == "circular" else min(Lk, L)
            r["dense_flops"] = flops(B, H, L, m, mode)
            if "dense_ms" in r:
                r["dense_floor_frac"] = floor / r["dense_ms"]
                r["dense_TFLOPs"] = r["dense_flops"] / r["dense_ms"] / 1e9
                r["dense_over_auto"] = r["dense_ms"] / r["auto_ms"]
            r["auto_floor_frac"] = floor / r["auto_ms"]
            u = k = None
            free()
        except Exception as e:  # one case's failure is reported, the rest run
            r["error"] = repr(e)[:300]
            free()
        res["cases"].append(r)
        if "error" in r:
            print(f"{r['dtype']} B={B} H={H} L={L} Lk={Lk} {mode}: ERROR {r['error']}", flush=True)
        else:
            d = (f"dense {r['dense_ms']:.4f} ms (cached {r['dense_cached_ms']:.4f}; {r['dense_floor_frac']:.0%} floor, {r['dense_TFLOPs']:.0f} TFLOP/s, "
                 f"err {r['err_dense']:.1e}) / auto {r['auto_ms']:.4f} ({r['auto_floor_frac']:.0%}) = "
                 f"{r['dense_over_auto']:.2f}") if "dense_ms" in r else f"dense skipped: {r.get('dense_skipped')}"
            tc = f"; tensor {r['tensor_ms']:.4f}" if "tensor_ms" in r else ""
            if "wgmma_ms" in r and "dense_ms" in r and not gated:
                r["wgmma_over_dense"] = r["wgmma_ms"] / r["dense_ms"]
                tc += (f"; wgmma {r['wgmma_ms']:.4f} ({r['dense_flops'] / r['wgmma_ms'] / 1e9:.0f} TFLOP/s, err "
                       f"{r['err_wgmma']:.1e}) = {r['wgmma_over_dense']:.2f} of dense")
            if "rule_ms" in r and "dense_ms" in r:
                r["rule_over_best"] = r["rule_ms"] / min(r["dense_ms"], r["auto_ms"], r.get("wgmma_ms", float("inf")))
                tc += f"; rule {r['rule_ms']:.4f} ({r['rule_solver'].split(': ')[-1][:20]}) = {r['rule_over_best']:.2f} of the best"
            if "dense_vjp_ms" in r:
                tc += (f"; vjp dense {r['dense_vjp_ms']:.4f} / auto {r['auto_vjp_ms']:.4f} = "
                       f"{r['dense_vjp_over_auto']:.2f} (grads apart {r['err_vjp_dense_vs_auto']:.1e})")
            print(f"{r['dtype']} B={B} H={H} L={L} Lk={Lk} {mode}{' gated' if gated else ''}: {d}{tc}", flush=True)
        with open(f"{out}/fftconv_dense.json", "w") as fh:
            json.dump(res, fh, indent=1)
