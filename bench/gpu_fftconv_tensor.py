"""fftconv forward, B=64, H=768: the tensor-core solver (forced, fftconv_algo = 2) against the
default solver (fftconv_algo = 0, which takes the tensor cores at FFT 256 and 512 for the half
types), the default without the tensor cores (fftconv_algo = 4: fused kernels where they apply, else
cuFFT; the rule's comparison) and the PyTorch rfft recipe (float32 rfft/irfft, in the same process), at FFT sizes
256 … 16384, float16 and bfloat16, causal (L = N/2) and circular (L = N). Per case: GPU ms per call
(back to back, so host overhead is not counted), the call's ms one at a time, the operator with a
cached filter spectrum (FFTConvCUDA), relative error against float64 on two batch rows, and the
fraction of the HBM floor (read u + write y at the copy bandwidth measured here). Also the
one-product probe (fftconv_algo = 3: no hi/lo splits), to show what the splits cost, and the
kernel variants: short mma chains (fftconv_algo = 5), short chains with the radix-r passes'
indices out of their loops (6) and algo 2's kernels with factored twiddles (7), to decide whether
one replaces algo 2's kernels.
Writes OUTDIR/fftconv_tensor.json.
    python bench/gpu_fftconv_tensor.py OUTDIR [--quick]
"""
import json
import sys
import traceback

import torch

from strux import _cuda_fftconv as _fc
from strux.bench.gpu import copy_bandwidth, fftconv_algo, free, rel, with_algo
from strux.bench.timing import back_to_back_ms, time_ms

out = sys.argv[1] if len(sys.argv) > 1 else "."
quick = "--quick" in sys.argv
B, H = 64, 768
SIZES = [256, 512, 1024, 4096, 16384] if quick else [256, 512, 1024, 2048, 4096, 8192, 16384]
if "--part" in sys.argv:  # scripts/gpu_part_fctc.sh: the default rule's sizes, float16 only
    SIZES, DTYPES_PART = [256, 512, 1024], ["float16"]
else:
    DTYPES_PART = None
DTYPES = ["float16", "bfloat16"]
MODES = ["causal", "circular"]
if DTYPES_PART:
    DTYPES = DTYPES_PART

bw = copy_bandwidth()
res = dict(device=torch.cuda.get_device_name(), copy_TBps=bw / 1e12, B=B, H=H, cases={})
print(f"{res['device']}: copy bandwidth {bw / 1e12:.3f} TB/s", flush=True)


def recipe(u, k, mode):
    L = u.shape[-1]
    n = L if mode == "circular" else 2 * L
    y = torch.fft.irfft(torch.fft.rfft(u.float(), n=n) * torch.fft.rfft(k.float(), n=n), n=n)
    return y[..., :L].to(u.dtype)


def ref64(u, k, mode):
    L = u.shape[-1]
    n = L if mode == "circular" else 2 * L
    return torch.fft.irfft(torch.fft.rfft(u.double(), n=n) * torch.fft.rfft(k.double(), n=n), n=n)[..., :L]


for N in SIZES:
    for mode in MODES:
        for dt in DTYPES:
            L = N if mode == "circular" else N // 2
            key = f"{dt}_{mode}_fft{N}"
            tdt = getattr(torch, dt)
            free()
            u = torch.randn(B, H, L, device="cuda").to(tdt)
            k = (torch.randn(H, L, device="cuda") / L ** 0.5).to(tdt)
            floor_ms = 2 * B * H * L * u.element_size() / bw * 1e3
            ref = ref64(u[:2], k, mode)
            case = dict(N=N, L=L, mode=mode, dtype=dt, floor_ms=floor_ms)
            runs = dict(tensor=with_algo(2, lambda: _fc.fftconv(u, k, mode)),
                        tensor_1product=with_algo(3, lambda: _fc.fftconv(u, k, mode)),
                        tensor_sc=with_algo(5, lambda: _fc.fftconv(u, k, mode)),
                        tensor_sc_rx=with_algo(6, lambda: _fc.fftconv(u, k, mode)),
                        tensor_ftw=with_algo(7, lambda: _fc.fftconv(u, k, mode)),
                        default=with_algo(0, lambda: _fc.fftconv(u, k, mode)),
                        no_tensor=with_algo(4, lambda: _fc.fftconv(u, k, mode)),
                        torch=lambda: recipe(u, k, mode))
            for name, fn in runs.items():
                try:
                    err = rel(fn()[:2], ref)
                    gpu = back_to_back_ms(fn, n=10, reps=5, warm=2)
                    call = time_ms(fn, warm=1, reps=7)[0]
                    case[name] = dict(gpu_ms=gpu, call_ms=call, err=err, floor_frac=floor_ms / gpu)
                except Exception as e:  # a failing solver is recorded, the others still run
                    case[name] = dict(error=f"{type(e).__name__}: {e}")
                    traceback.print_exc()
                free()
            try:  # the operator with its filter spectrum cached (no spectrum kernel per call)
                with fftconv_algo(2):
                    op = _fc.FFTConvCUDA(k, B=B, L=L, mode=mode)
                gpu = back_to_back_ms(lambda: op(u), n=10, reps=5, warm=2)
                case["tensor_cached"] = dict(gpu_ms=gpu, floor_frac=floor_ms / gpu, err=rel(op(u)[:2], ref))
                del op
            except Exception as e:
                case["tensor_cached"] = dict(error=f"{type(e).__name__}: {e}")
                traceback.print_exc()
            res["cases"][key] = case
            t, t1, t5, t6, t7, d, d4, r = (case[n].get("gpu_ms", float("nan")) for n in
                                           ("tensor", "tensor_1product", "tensor_sc", "tensor_sc_rx",
                                            "tensor_ftw", "default", "no_tensor", "torch"))
            print(f"{key:28s} floor {floor_ms:7.3f} | tensor {t:7.3f} ms ({floor_ms / t:5.1%}, "
                  f"err {case['tensor'].get('err', float('nan')):.1e}) cached "
                  f"{case['tensor_cached'].get('gpu_ms', float('nan')):7.3f} 1-product {t1:7.3f} "
                  f"(err {case['tensor_1product'].get('err', float('nan')):.1e}) sc {t5:7.3f} "
                  f"(err {case['tensor_sc'].get('err', float('nan')):.1e}) sc+rx {t6:7.3f} "
                  f"(err {case['tensor_sc_rx'].get('err', float('nan')):.1e}) ftw {t7:7.3f} "
                  f"(err {case['tensor_ftw'].get('err', float('nan')):.1e}) | default {d:7.3f} "
                  f"(err {case['default'].get('err', float('nan')):.1e}) no-tensor {d4:7.3f} | torch {r:7.3f} | "
                  f"tensor vs no-tensor {d4 / t:4.2f}x, default vs no-tensor {d4 / d:4.2f}x, "
                  f"tensor vs torch {r / t:4.2f}x", flush=True)
            del u, k, ref
            with open(f"{out}/fftconv_tensor.json", "w") as f:
                json.dump(res, f, indent=1)
print(f"wrote {out}/fftconv_tensor.json")
