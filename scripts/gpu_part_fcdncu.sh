#!/usr/bin/env bash
# GPU part "fcdncu" of scripts/gpu_session.sh (limit ~90 s): Nsight Compute on the dense fftconv
# kernels at B = 64, H = 768, causal L = 1024, float16: the forward kernel against the filter
# gradient kernel (same mma count, ~4× the time: bench/NOTES-gpu-fftconv-dense.md round 6). One
# vjp after a warm-up; sections: speed of light, occupancy, launch, warp stalls, compute pipes,
# shared-memory tables. Summary lines on stdout; the full report under $OUT.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export PYTHONPATH=${PYTHONPATH:-python:tests/python}
command -v ncu > /dev/null || { echo "ncu not found: part skipped"; exit 0; }
timeout 80 ncu --kernel-name regex:"forward_kernel|filter_grad_kernel" --launch-skip 4 --launch-count 2 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
  python3 -c "
import torch
from strux import _cuda_fftconv as F
F.fftconv_algo = 15
u = torch.randn(64, 768, 1024, device='cuda', dtype=torch.float16)
k = torch.randn(768, 1024, device='cuda', dtype=torch.float16) / 32
g = torch.randn_like(u)
for _ in range(3): F.fftconv_vjp(g, u, k, 'causal')
torch.cuda.synchronize()" > "$OUT/ncu_dense.txt" 2>&1
echo "== ncu rc=$?"
grep -E "forward_kernel|filter_grad_kernel|Duration|Compute \(SM\) Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Shared Memory Configuration Size|Dynamic Shared Memory Per|Block Limit|Stall|Issue Slots Busy|Executed Ipc|Bank|Tensor|Warp Cycles Per Issued" \
  "$OUT/ncu_dense.txt" | head -80
