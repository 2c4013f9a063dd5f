"""One batch-last float32 ks product, for profilers (scripts/gpu_focus.sh ks ncu): warm-up, then three
calls. An optional third argument forces a path (options path: kernels, blas, stream, tr).

Run: python bench/ks_one.py 6,64,64,1 [batch] [path]
"""
from __future__ import annotations

import sys


def main():
    import torch
    from strux import _cuda_ks as K
    p = tuple(int(v) for v in sys.argv[1].split(","))
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 25088
    opts = {"path": sys.argv[3]} if len(sys.argv) > 3 else None
    a, b, c, d = p
    w = torch.randn(*p, device="cuda")
    x = torch.randn(a * c * d, batch, device="cuda")
    for _ in range(4):
        y = K.ks_matmul(x, w, p, layout="bsl", options=opts)
    torch.cuda.synchronize()
    print(K.ks_describe(p, batch, layout="bsl", options=opts), float(y.abs().mean()))


if __name__ == "__main__":
    main()
