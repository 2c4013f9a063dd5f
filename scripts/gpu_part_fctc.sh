#!/usr/bin/env bash
# GPU part "fctc" (issue 12, tensor-core fftconv): the tensor solver's tests, then the short
# benchmark (B=64, H=768, float16, FFT 256/512/1K causal and circular: forced tensor, default,
# no_tensor (algo 4), torch recipe, % of the HBM floor). Limit 120 s.
set -uo pipefail
OUT=${OUT:-out/fctc}
mkdir -p "$OUT"
export PYTHONPATH=${PYTHONPATH:-python:tests/python}
timeout 70 python3 -m pytest -q -x tests/python/test_fftconv_tensor_gpu.py > "$OUT/pytest.log" 2>&1
rc=$?
tail -5 "$OUT/pytest.log"
timeout 42 python3 bench/gpu_fftconv_tensor.py "$OUT" --quick --part > "$OUT/bench.log" 2>&1
rb=$?
tail -30 "$OUT/bench.log"
echo "fctc: pytest rc=$rc bench rc=$rb"
[ $rc = 0 ] && [ $rb = 0 ]
