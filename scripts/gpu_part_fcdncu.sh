#!/usr/bin/env bash
# GPU part "fcdncu" of scripts/gpu_session.sh (limit ~90 s): Nsight Compute on the dense fftconv
# kernels at B = 64, H = 768, float16, per case of FCDNCU_CASES (default causal L = 1024: the forward
# kernel against the filter gradient kernel, bench/NOTES-gpu-fftconv-dense.md round 6). Calls
# after a warm-up; sections: speed of light, occupancy, launch, warp stalls, compute pipes,
# shared-memory tables. Summary lines on stdout; the full report under $OUT.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export PYTHONPATH=${PYTHONPATH:-python:tests/python}
command -v ncu > /dev/null || { echo "ncu not found: part skipped"; exit 0; }
# FCDNCU_CASES: MODE:L:fwd|vjp, one ncu run each (default: causal 1024 vjp, the forward against the
# filter gradient)
for case in ${FCDNCU_CASES:-causal:1024:vjp}; do
  IFS=: read -r mode L what <<< "$case"
  rep="$OUT/ncu_dense_${mode}_${L}_${what}.txt"
  timeout 80 ncu --kernel-name regex:"forward_kernel|filter_grad_kernel" --launch-skip 4 --launch-count 2 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
    python3 -c "
import torch
from strux import _cuda_fftconv as F
F.fftconv_algo = 15
u = torch.randn(64, 768, $L, device='cuda', dtype=torch.float16)
k = torch.randn(768, $L, device='cuda', dtype=torch.float16) / $L ** 0.5
g = torch.randn_like(u)
for _ in range(6): F.fftconv_vjp(g, u, k, '$mode') if '$what' == 'vjp' else F.fftconv(u, k, '$mode')
torch.cuda.synchronize()" > "$rep" 2>&1
  echo "== ncu $case rc=$?"
  grep -E "forward_kernel|filter_grad_kernel|Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Stall|Issue Slots Busy|Executed Ipc|Bank|Tensor|Warp Cycles Per Issued|Waves Per SM" \
    "$rep" | head -60
done
