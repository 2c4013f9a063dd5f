#!/usr/bin/env bash
# GPU part "fclong" (scripts/gpu_session.sh runs it with OUT set; finishes within 130 s): the four-step
# fftconv solver at long lengths. Tests first (tests/python/test_fftconv_fourstep_gpu.py), then
# bench/gpu_fftconv_long.py (fourstep, the default at these sizes, vs cuFFT vs the PyTorch recipe, % of the HBM
# floor), then compute-sanitizer memcheck / racecheck on small forced calls (forward and backward) in
# the time left.
# (bench/fftconv_fourstep_model.py, the float64 model of the index mapping, is CPU only: CI runs
# it through tests/python/test_fftconv_fourstep_model.py.) Logs and JSON under $OUT; a short
# summary on stdout.
set -uo pipefail
OUT=${OUT:-$PWD/out/fclong}
mkdir -p "$OUT"
export PYTHONPATH=python:tests/python${PYTHONPATH:+:$PYTHONPATH}
T0=$(date +%s)
left() { echo $(( 125 - ($(date +%s) - T0) )); }
rc=0
timeout 50 python3 -m pytest -q -x -p no:cacheprovider tests/python/test_fftconv_fourstep_gpu.py > "$OUT/pytest.log" 2>&1
r=$?
echo "pytest test_fftconv_fourstep_gpu.py rc=$r in $(( $(date +%s) - T0 )) s: $(tail -1 "$OUT/pytest.log")"
[ $r = 0 ] || { grep -E "^(E  |FAILED)" "$OUT/pytest.log" | head -12; rc=1; }
t0=$(date +%s)
# The table on stdout as it is made (and in bench.log); tracebacks only in bench.log.
timeout $(( $(left) - 25 )) python3 -u bench/gpu_fftconv_long.py "$OUT" 2>&1 | tee "$OUT/bench.log" |
  grep -v -E '^  File "|^Traceback|^    [^ ]' 
r=${PIPESTATUS[0]}
echo "bench rc=$r in $(( $(date +%s) - t0 )) s"
[ $r = 0 ] || rc=1
SMALL='
import sys, torch
from strux import _cuda_fftconv as F
F.fftconv_algo = 8
for mode, L, dt in (("causal", 20001, torch.float16), ("circular", 65536, torch.float32)):
    u = torch.randn(2, 2, L, device="cuda", dtype=dt)
    k = torch.randn(2, L // 3, device="cuda", dtype=dt) / L ** 0.5
    g = torch.randn_like(u)
    F.fftconv(u, k, mode, g, g, k[:, 0].contiguous())
    F.fftconv_vjp(g, u, k, mode, g, g, k[:, 0].contiguous())  # backward with the extra dK inverse
    F.fftconv_vjp(g, u, k, mode)  # dK inverse riding on the last row
torch.cuda.synchronize()
'
for tool in memcheck racecheck; do
  t=$(( $(left) / 2 ))
  [ $tool = racecheck ] && t=$(left)
  [ $t -ge 10 ] || { echo "$tool skipped (no time left)"; continue; }
  timeout $t compute-sanitizer --tool $tool --error-exitcode 9 python3 -c "$SMALL" > "$OUT/$tool.log" 2>&1
  m=$?
  echo "$tool rc=$m (124 = out of time): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool.log" | tail -1)"
  [ $m = 0 ] || [ $m = 124 ] || { tail -4 "$OUT/$tool.log"; rc=1; }
done
exit $rc
