"""Quick check that the built extension runs on the GPU and that a C++ error message survives
(a statically linked libstdc++ that is not isolated crashes in std::ostream here)."""
import torch

from strux import _ext, _cuda_fftconv

try:
    _ext.cuda.FFTConvPlan(1, 1, 4, 9, "circular", "float32", False)
except ValueError as e:
    print("error path ok:", e)
u = torch.randn(2, 3, 16, device="cuda")
k = torch.randn(3, 5, device="cuda")
y = _cuda_fftconv.fftconv(u, k)
ref = torch.stack([torch.stack([torch.nn.functional.conv1d(
    torch.nn.functional.pad(u[b, h][None, None], (4, 0)), k[h].flip(0)[None, None])[0, 0]
    for h in range(3)]) for b in range(2)])
torch.cuda.synchronize()
print("smoke ok, rel err", float((y - ref).norm() / ref.norm()))
