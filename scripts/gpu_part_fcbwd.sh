#!/usr/bin/env bash
# GPU part "fcbwd" of scripts/gpu_session.sh (limit ~200 s): the four-step fftconv backward
# (bench/NOTES-gpu-fftconv-long.md "Backward (four-step)"). The fftconv GPU test files that its
# change touches (the four-step file, the blocks file: pass C's shared column kernel; the generic
# CUDA fftconv file: the plan), then bench/gpu_fftconv_long_bwd.py (cached forward, backward alone,
# the vjp on the four-step solver against the cuFFT path) and bench/gpu_fftconv_percall.py (the
# per-call spectrum's cost at FFT 256 / 1K). Logs and JSON under $OUT.
set -uo pipefail
source scripts/gpu_step.sh  # OUT, PYTHONPATH, rc and step()
step 150 "tests (four-step, blocks, cuda fftconv)" python3 -m pytest -q -p no:cacheprovider \
  tests/python/test_fftconv_fourstep_gpu.py tests/python/test_fftconv_blocks_gpu.py \
  tests/python/test_cuda_fftconv.py > "$OUT/pytest.log" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest.log" | tail -12
step 45 "bench (bench/gpu_fftconv_long_bwd.py)" python3 bench/gpu_fftconv_long_bwd.py "$OUT"
step 40 "bench (bench/gpu_fftconv_percall.py: the per-call spectrum at FFT 256 / 1K)" \
  python3 bench/gpu_fftconv_percall.py "$OUT"
exit $rc
