"""One batch-last float32 ks product, for profilers (scripts/gpu_focus.sh ks ncu): warm-up, then three
calls. The path follows STRUX_KS_PATH as usual.

Run: python bench/ks_one.py 6,64,64,1 [batch]
"""
from __future__ import annotations

import sys


def main():
    import torch
    from strux import _cuda_ks_scan as K
    p = tuple(int(v) for v in sys.argv[1].split(","))
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 25088
    a, b, c, d = p
    w = torch.randn(*p, device="cuda")
    x = torch.randn(a * c * d, batch, device="cuda")
    for _ in range(4):
        y = K.ks_matmul(x, w, p, layout="bsl")
    torch.cuda.synchronize()
    print(p, batch, K._ext.cuda_ks_path(list(p), batch, True, 0), float(y.abs().mean()))


if __name__ == "__main__":
    main()
