#!/usr/bin/env bash
# GPU part "ssm" of scripts/gpu_session.sh (limit 180 s): issue 14, the circulant SSM layer's
# forward at n = 64. The GPU tests of the Fourier-form scan and the layer (-x: the new one-launch
# Fourier-form kernel and the eager torch path first, then circulant_scan's forced-path tests, the
# torch ops' circulant tests and the layer's CUDA test), then bench/gpu_circulant_layer.py: the
# experiment's throughput measurement (circ vs real01, n = 64 and 256, B = 16, T = 2048), host and
# GPU time per layer forward, and the Fourier-form scan alone (onepass vs fft, % of the byte floor).
# Summary lines: "== ... rc=", "EXPERIMENT", "LAYER", "SCAN". JSON and logs under $OUT.
set -uo pipefail
source scripts/gpu_step.sh  # OUT, PYTHONPATH, rc and step()
step 75 "tests (circulant Fourier form, fused paths)" python3 -m pytest -q -x -p no:cacheprovider \
  tests/python/test_cuda_circulant_fourier.py tests/python/test_cuda_circulant_fused.py > "$OUT/pytest.log" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed|error" "$OUT/pytest.log" | tail -8
step 35 "tests (torch ops' circulant tests, the layer on CUDA)" python3 -m pytest -q -x -p no:cacheprovider \
  tests/python/test_torch_cuda.py tests/python/test_ssm_layer.py -k "circulant or cuda_matches_cpu" > "$OUT/pytest_torch.log" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed|error" "$OUT/pytest_torch.log" | tail -8
step 70 "bench (bench/gpu_circulant_layer.py)" python3 bench/gpu_circulant_layer.py "$OUT"
exit $rc
