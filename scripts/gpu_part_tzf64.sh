#!/usr/bin/env bash
# GPU part "tzf64" of scripts/gpu_session.sh (limit ~90 s): issue 13's float64 goal. The block
# Toeplitz GPU tests in float64 (tests/python/test_cuda_toeplitz.py -k float64), then
# bench/gpu_toeplitz_f64.py (float64 matvec / rmatvec, one right-hand side, % of copy bandwidth
# over F̂'s bytes, error against the PyTorch recipe). JSON and logs under $OUT.
set -uo pipefail
source scripts/gpu_step.sh  # OUT, PYTHONPATH, rc and step()
step 40 "tests (test_cuda_toeplitz.py -k float64)" python3 -m pytest -q -p no:cacheprovider \
  tests/python/test_cuda_toeplitz.py -k float64 > "$OUT/pytest.log" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest.log" | tail -6
step 45 "bench (bench/gpu_toeplitz_f64.py)" python3 bench/gpu_toeplitz_f64.py "$OUT"
exit $rc
