#!/usr/bin/env bash
# GPU part "fctc" (issue 12, tensor-core fftconv): the tensor solver's tests, then the short
# benchmark (B=64, H=768, float16, FFT 256/512/1K causal and circular: forced tensor and its
# variants, default, no_tensor (algo 4), torch recipe, % of the HBM floor), then, if time is left,
# one ncu profile of the tensor forward kernel (algo 2) at causal FFT 512. Limit 120 s.
set -uo pipefail
OUT=${OUT:-out/fctc}
mkdir -p "$OUT"
export PYTHONPATH=${PYTHONPATH:-python:tests/python}
timeout 50 python3 -m pytest -q -x tests/python/test_fftconv_tensor_gpu.py > "$OUT/pytest.log" 2>&1
rc=$?
tail -3 "$OUT/pytest.log"
timeout 42 python3 bench/gpu_fftconv_tensor.py "$OUT" --quick --part > "$OUT/bench.log" 2>&1
rb=$?
tail -8 "$OUT/bench.log"
left=$((115 - SECONDS))
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ] && [ "$left" -gt 15 ]; then
  timeout "$left" "$NCU" --section SpeedOfLight --section Occupancy --section WarpStateStats \
    -k regex:'^forward_kernel' --launch-count 1 python3 -c "
import torch
from strux import _cuda_fftconv as f
f.fftconv_algo = 2
u = torch.randn(64, 768, 256, device='cuda').half()
k = (torch.randn(768, 256, device='cuda') / 16).half()
f.fftconv(u, k, 'causal')
torch.cuda.synchronize()" > "$OUT/ncu.log" 2>&1
  echo "ncu rc=$? (causal FFT 512, algo 2):"
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Warp Cycles Per Issued|Issued Warp|Stall|stall" "$OUT/ncu.log" | head -16
else
  echo "ncu skipped (ncu: '${NCU}', ${left} s left)"
fi
echo "fctc: pytest rc=$rc bench rc=$rb"
[ $rc = 0 ] && [ $rb = 0 ]
