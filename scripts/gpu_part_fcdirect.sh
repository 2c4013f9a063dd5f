#!/usr/bin/env bash
# GPU part "fcdirect" (limit 110 s): the direct fftconv solver's tests and the automatic-rule tests
# in the tensor/fused test files, then its benchmark.
set -u
OUT=${OUT:-/tmp/fcdirect}
mkdir -p "$OUT"
timeout 60 python3 -m pytest -q -x -rs tests/python/test_fftconv_direct.py \
  tests/python/test_fftconv_tensor_gpu.py::test_default_rule \
  tests/python/test_cuda_fftconv_fused.py::test_plan_picks_fused > "$OUT/pytest.log" 2>&1
echo "pytest rc=$? (tail):"; tail -5 "$OUT/pytest.log"
if [ -f bench/gpu_fftconv_direct.py ]; then
  timeout 45 python3 bench/gpu_fftconv_direct.py --out "$OUT/bench.json" 2>&1 | tail -30
fi
