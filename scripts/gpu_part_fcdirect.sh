#!/usr/bin/env bash
# GPU part "fcdirect" (limit 120 s): the direct fftconv solver's tests, then its benchmark.
set -u
OUT=${OUT:-/tmp/fcdirect}
mkdir -p "$OUT"
timeout 60 python3 -m pytest -q -x tests/python/test_fftconv_direct.py > "$OUT/pytest.log" 2>&1
echo "pytest rc=$? (tail):"; tail -5 "$OUT/pytest.log"
if [ -f bench/gpu_fftconv_direct.py ]; then
  timeout 55 python3 bench/gpu_fftconv_direct.py --out "$OUT/bench.json" 2>&1 | tail -30
fi
