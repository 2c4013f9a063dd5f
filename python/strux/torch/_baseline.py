"""The block-circulant scan as a PyTorch time loop: the PyTorch baseline that the GPU benchmark
(strux.bench.gpu_block_scan) measures strux against. No strux.torch op runs it; the ops call
strux's backends.
"""
import torch


def _ref_block_spectra(a, u, h0):
    """rfft over k: A (B, T, kf, p, p), U (B, T, kf, p), H0 (B, kf, p) or None; complex128 for
    float64 inputs, else complex64."""
    B, T, p, _, k = a.shape
    cd = torch.float64 if a.dtype == torch.float64 else torch.float32
    A = torch.fft.rfft(a.to(cd), dim=-1).permute(0, 1, 4, 2, 3)
    U = torch.fft.rfft(u.to(cd).reshape(B, T, p, k), dim=-1).transpose(-1, -2)
    H0 = None if h0 is None else torch.fft.rfft(h0.to(cd).reshape(B, p, k), dim=-1).transpose(-1, -2)
    return A, U, H0


def _ref_block_states(A, U, H0):
    """Per frequency H_t = A_t H_{t-1} + U_t as a time loop; (B, T, kf, p)."""
    H = torch.zeros_like(U[:, 0]) if H0 is None else H0
    hs = []
    for t in range(A.shape[1]):
        H = (A[:, t] @ H.unsqueeze(-1)).squeeze(-1) + U[:, t]
        hs.append(H)
    return torch.stack(hs, 1)


def ref_block_scan(a, u, h0):
    B, T, p, _, k = a.shape
    A, U, H0 = _ref_block_spectra(a, u, h0)
    H = _ref_block_states(A, U, H0).transpose(-1, -2)
    return torch.fft.irfft(H, n=k, dim=-1).reshape(B, T, p * k).to(u.dtype)
