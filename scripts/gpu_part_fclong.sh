#!/usr/bin/env bash
# GPU part "fclong" (scripts/gpu_session.sh runs it with OUT set, limit 150 s): the four-step
# fftconv solver at long lengths. Tests first (tests/python/test_fftconv_fourstep_gpu.py), then
# bench/gpu_fftconv_long.py (fourstep vs the cuFFT default vs the PyTorch recipe, % of the HBM
# floor). Full logs and JSON under $OUT; a short summary on stdout.
set -uo pipefail
OUT=${OUT:-$PWD/out/fclong}
mkdir -p "$OUT"
export PYTHONPATH=python:tests/python${PYTHONPATH:+:$PYTHONPATH}
rc=0
# (bench/fftconv_fourstep_model.py, the float64 model of the index mapping, is CPU only: not run here)
timeout 70 python3 -m pytest -q -x tests/python/test_fftconv_fourstep_gpu.py > "$OUT/pytest.log" 2>&1
r=$?
echo "pytest test_fftconv_fourstep_gpu.py rc=$r: $(tail -1 "$OUT/pytest.log")"
[ $r = 0 ] || { grep -E "^(E |FAILED)" "$OUT/pytest.log" | head -15; rc=1; }
timeout 70 python3 bench/gpu_fftconv_long.py "$OUT" > "$OUT/bench.log" 2>&1
r=$?
echo "bench rc=$r"
grep -v "^  File\|^    " "$OUT/bench.log" | tail -18
[ $r = 0 ] || rc=1
exit $rc
