"""Small calls of the CUDA families for compute-sanitizer memcheck (scripts/gpu_check.sh,
scripts/gpu_focus.sh toeplitz):
    compute-sanitizer --tool memcheck --error-exitcode 9 python3 scripts/gpu_memcheck.py [SET]
SET: "small" (default: fftconv causal/circular float32/float16 forward and vjp, toeplitz both
layouts with R = 1 and 3) or "toeplitz" (every product algo 0/2/3 with fft 2, both dtypes and
layouts, odd, even and tiny shapes, R = 1 and 19).
"""
import sys

import torch

from strux import _cuda_fftconv, _cuda_toeplitz


def small():
    for mode in ("causal", "circular"):
        for dt in (torch.float32, torch.float16):
            u = torch.randn(2, 3, 37, device="cuda", dtype=dt)
            k = torch.randn(3, 37 if mode == "circular" else 50, device="cuda", dtype=dt)
            g = torch.randn_like(u)
            _cuda_fftconv.fftconv(u, k, mode, g, g, k[:, 0].contiguous())
            _cuda_fftconv.fftconv_vjp(g, u, k, mode, g, g, k[:, 0].contiguous())
    for layout in ("time-major", "space-major"):
        op = _cuda_toeplitz.BlockToeplitzCUDA(torch.randn(9, 3, 4, device="cuda"), layout)
        for R in (None, 3):
            shp = lambda n: ((9, n) if layout == "time-major" else (n, 9)) + ((R,) if R else ())  # noqa: E731
            op.matvec(torch.randn(*shp(4), device="cuda"))
            op.rmatvec(torch.randn(*shp(3), device="cuda"))


def toeplitz():
    for dt in (torch.float32, torch.float64):
        for (Nt, Nd, Nm) in ((5, 37, 131), (6, 100, 130), (2, 1, 1)):
            for algo in (0, 2, 3):
                for layout in ("time-major", "space-major"):
                    op = _cuda_toeplitz.BlockToeplitzCUDA(torch.randn(Nt, Nd, Nm, device="cuda", dtype=dt), layout,
                                                 algo=algo, fft=2)
                    for R in (None, 19):
                        e = () if R is None else (R,)
                        sh = (lambda n: (Nt, n) + e) if layout == "time-major" else (lambda n: (n, Nt) + e)
                        op.matvec(torch.randn(*sh(Nm), device="cuda", dtype=dt))
                        op.rmatvec(torch.randn(*sh(Nd), device="cuda", dtype=dt))


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "small"
    {"small": small, "toeplitz": toeplitz}[which]()
    torch.cuda.synchronize()
    print("memcheck script done")
