#!/usr/bin/env bash
# GPU part "tznarrow" of scripts/gpu_session.sh (limit ~150 s): issue 13's narrow shapes. The
# block Toeplitz GPU tests the fused C2R pre step touches (every fft 2 call with even nfft:
# test_cuda_toeplitz.py whole, the float32 half of test_cuda_toeplitz_precision.py, -x), then
# bench/gpu_toeplitz_narrow.py: complex64 against bfloat16 F̂ at the seven shapes of
# bench/NOTES-toeplitz-precision.md#narrow-shapes, and per-kernel times at the narrow three.
# JSON and logs under $OUT.
set -uo pipefail
source scripts/gpu_step.sh  # OUT, PYTHONPATH, rc and step()
step 50 "tests (test_cuda_toeplitz.py)" python3 -m pytest -q -x -p no:cacheprovider \
  tests/python/test_cuda_toeplitz.py > "$OUT/pytest.log" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest.log" | tail -6
step 35 "tests (test_cuda_toeplitz_precision.py -k float32)" python3 -m pytest -q -x -p no:cacheprovider \
  tests/python/test_cuda_toeplitz_precision.py -k float32 > "$OUT/pytest_prec.log" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest_prec.log" | tail -6
step 60 "bench (bench/gpu_toeplitz_narrow.py)" python3 bench/gpu_toeplitz_narrow.py "$OUT/narrow.json"
exit $rc
