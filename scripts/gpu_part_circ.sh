#!/usr/bin/env bash
# GPU part "circ" of scripts/gpu_session.sh (limit 120 s): circulant_scan's forced-path tests
# (tests/python/test_cuda_circulant_fused.py, -x), then bench/gpu_circulant.py (B = 16, T = 2048,
# n = 64..1024, B = 64 at n = 256: default vs fft / fused / onepass, ms and % of the byte floor), then, if ncu
# is there and time is left, one single-pass kernel (n = 256) under ncu. Logs and JSON under $OUT.
set -uo pipefail
T0=$(date +%s)
source scripts/gpu_step.sh  # OUT, PYTHONPATH, rc and step()
step 55 "tests (test_cuda_circulant_fused.py)" python3 -m pytest -q -x -p no:cacheprovider \
  tests/python/test_cuda_circulant_fused.py > "$OUT/pytest.log" 2>&1
grep -E "passed|failed|error|Error" "$OUT/pytest.log" | tail -12
step 35 "bench" python3 bench/gpu_circulant.py "$OUT"
left=$(( 112 - ($(date +%s) - T0) ))
if command -v ncu > /dev/null && [ $left -gt 20 ]; then
  step $(( left - 5 )) "ncu circ_onepass n=256" ncu --kernel-name regex:circ_onepass --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats --section SourceCounters \
    python3 -c "
import torch
from strux import _cuda_scan as K
a = (2 * torch.rand(16, 2048, 256, device='cuda') - 1) * (0.9 / 256); u = torch.randn_like(a)
for _ in range(4): K.circulant_scan(a, u, options={'path': 'onepass'})
torch.cuda.synchronize()" > "$OUT/ncu.txt" 2>&1
  grep -E "Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Shared Memory Config|Warp Cycles Per Issued|Stall|L1/TEX Hit|Bank" "$OUT/ncu.txt" | head -20
fi
exit $rc
