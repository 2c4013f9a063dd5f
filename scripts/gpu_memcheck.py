"""Small calls of the CUDA families for compute-sanitizer memcheck (scripts/gpu_check.sh,
scripts/gpu_focus.sh toeplitz):
    compute-sanitizer --tool memcheck --error-exitcode 9 python3 scripts/gpu_memcheck.py [SET]
SET: "small" (default: fftconv causal/circular float32/float16 forward and vjp, toeplitz both
layouts with R = 1 and 3), "toeplitz" (every product algo 0/2/3 with fft 2, both dtypes and
layouts, odd, even and tiny shapes, R = 1 and 19) or "families" (ks factors and chains in every
dtype and both layouts, the three scans forward and backward incl. a misaligned input, fftconv
float64 and bfloat16): also the set for `--tool racecheck`; "tile" (the diag_scan tile solver at every
row width, forward and backward with h0, partial chunks, dead lanes, one-element and misaligned
calls, in place; scripts/gpu_part_scantile.sh).
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


def families():
    import strux
    ks_cases = [((2, 3, 5, 1), 7), ((1, 16, 16, 4), 33), ((3, 4, 1, 1), 5)]
    for dt in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        for p, batch in ks_cases:
            a, b, c, d = p
            w = torch.randn(*p, device="cuda", dtype=dt)
            for layout in ("bsf", "bsl"):
                x = torch.randn(*((batch, a * c * d) if layout == "bsf" else (a * c * d, batch)), device="cuda", dtype=dt)
                y = strux.ks_matmul(x, w, p, layout=layout)
                strux.ks_matmul_vjp(torch.randn_like(y), x, w, p, layout=layout)
        ps = [(1, 4, 6, 2), (2, 6, 2, 1)]  # a*c*d of the first == a*b*d of the second (12)
        ws = [torch.randn(*q, device="cuda", dtype=dt) for q in ps]
        x = torch.randn(5, 4, device="cuda", dtype=dt)
        y = strux.ks_chain(x, ws, ps)
        strux.ks_chain_vjp(torch.randn_like(y), x, ws, ps)
    for dt in (torch.float32, torch.complex64, torch.float64, torch.bfloat16):
        a = (0.9 * torch.rand(2, 37, 5, device="cuda")).to(dt)
        b = torch.randn(2, 37, 5, device="cuda").to(dt)
        h = strux.diag_scan(a, b)
        strux.diag_scan_vjp(torch.randn_like(h), a, b)
    for dt in (torch.float32, torch.float64):
        a = torch.randn(2, 9, 8, device="cuda", dtype=dt) * 0.1
        u = torch.randn(2, 9, 8, device="cuda", dtype=dt)
        off = torch.empty(u.numel() + 1, device="cuda", dtype=dt)[1:].view(u.shape)  # misaligned
        off.copy_(u)
        for uu in (u, off):
            h = strux.circulant_scan(a, uu)
            strux.circulant_scan_vjp(torch.randn_like(h), a, uu)
        ab = torch.randn(2, 9, 3, 3, 4, device="cuda", dtype=dt) * 0.1
        ub = torch.randn(2, 9, 12, device="cuda", dtype=dt)
        h = strux.block_circulant_scan(ab, ub)
        strux.block_circulant_scan_vjp(torch.randn_like(h), ab, ub)
    for dt in (torch.float64, torch.bfloat16):
        u = torch.randn(2, 3, 41, device="cuda", dtype=dt)
        k = torch.randn(3, 41, device="cuda", dtype=dt)
        y = strux.fftconv(u, k)
        strux.fftconv_vjp(torch.randn_like(y), u, k)


def tile():
    from strux import _cuda_scan as K
    cases = [((2, 300, 40), torch.float32), ((1, 70, 12), torch.complex64), ((2, 100, 72), torch.bfloat16),
             ((3, 50, 5), torch.float32)]
    for (B, T, n), dt in cases:
        a = (0.9 * torch.rand(B, T, n, device="cuda")).to(dt)
        b, dh = torch.randn(B, T, n, device="cuda").to(dt), torch.randn(B, T, n, device="cuda").to(dt)
        h0 = torch.randn(B, n, device="cuda").to(dt)
        off = torch.empty(b.numel() + 1, device="cuda", dtype=dt)[1:].view(b.shape)  # misaligned
        off.copy_(b)
        for tb in (0, 32, 64, 128, 256):
            o = {"path": "tile", "tile_bytes": tb}
            for bb in (b, off):
                h = K.diag_scan(a, bb, h0=h0, options=o)
                K.diag_scan_vjp(dh, a, bb, h0=h0, h=h, options=o)
    a, b = torch.rand(3, 500, 64, device="cuda"), torch.randn(3, 500, 64, device="cuda")
    K._diag_fwd(a, b, None, 1.0, K._O.diag_scan_code({"path": "tile"}), out=b)  # in place


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "small"
    {"small": small, "toeplitz": toeplitz, "families": families, "tile": tile}[which]()
    torch.cuda.synchronize()
    print("memcheck script done")
