#!/usr/bin/env bash
# GPU part "fcncu" of scripts/gpu_session.sh (limit ~90 s): Nsight Compute on the four-step fftconv
# passes at B = 1, H = 64, L = 2^20 causal, float16 against float32 (bench/NOTES-gpu-fftconv-long.md:
# float16 pass A ran slower than float32 although it reads half the bytes). One cached call per
# dtype after a warm-up; sections: speed of light, memory workload, occupancy, warp stalls.
# Summary lines on stdout; the full reports under $OUT.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export PYTHONPATH=${PYTHONPATH:-python:tests/python}
command -v ncu > /dev/null || { echo "ncu not found: part skipped"; exit 0; }
for dt in float16 float32; do
  timeout 40 ncu --kernel-name regex:"cols_forward|cols_inverse|rows_kernel" --launch-skip 6 --launch-count 3 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
    python3 -c "
import torch
from strux import _cuda_fftconv as _cuda
u = torch.randn(1, 64, 1 << 20, device='cuda', dtype=torch.$dt)
k = torch.randn(64, 1 << 20, device='cuda', dtype=torch.$dt) / 1024
conv = _cuda.FFTConvCUDA(k, 1, 1 << 20)
for _ in range(3): conv(u)
torch.cuda.synchronize()" > "$OUT/ncu_$dt.txt" 2>&1
  echo "== $dt rc=$?"
  grep -E "cols_forward|cols_inverse|rows_kernel|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Stall Long Scoreboard|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth" \
    "$OUT/ncu_$dt.txt" | head -40
done
