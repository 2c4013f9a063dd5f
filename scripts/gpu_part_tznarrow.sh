#!/usr/bin/env bash
# GPU part "tznarrow" of scripts/gpu_session.sh (limit ~150 s): issue 13's narrow shapes. The
# block Toeplitz GPU tests the fused C2R pre step touches (every fft 2 call with even nfft), cut
# to fit: test_cuda_toeplitz.py's float32 cases and the new even-nfft and NaN tests (both dtypes),
# test_cuda_toeplitz_precision.py's float32 bfloat16 cases, -x; then bench/gpu_toeplitz_narrow.py:
# complex64 against bfloat16 F̂ at the seven shapes of bench/NOTES-toeplitz-precision.md
# #narrow-shapes (narrow ones first), per-kernel times at the narrow three. JSON lines and logs
# under $OUT.
set -uo pipefail
source scripts/gpu_step.sh  # OUT, PYTHONPATH, rc and step()
step 60 "tests (test_cuda_toeplitz.py -k 'float32 or even or nan or large or dot')" python3 -m pytest -q -x -p no:cacheprovider \
  tests/python/test_cuda_toeplitz.py -k "float32 or even or nan or large or dot" > "$OUT/pytest.log" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest.log" | tail -6
step 25 "tests (test_cuda_toeplitz_precision.py -k 'float32 and bfloat16')" python3 -m pytest -q -x \
  -p no:cacheprovider tests/python/test_cuda_toeplitz_precision.py -k "float32 and bfloat16" \
  > "$OUT/pytest_prec.log" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest_prec.log" | tail -6
step 60 "bench (bench/gpu_toeplitz_narrow.py)" python3 bench/gpu_toeplitz_narrow.py "$OUT/narrow.jsonl"
exit $rc
