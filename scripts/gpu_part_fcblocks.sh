#!/usr/bin/env bash
# GPU part "fcblocks" (scripts/gpu_session.sh fcblocks:300): the blocks fftconv solver (short filters
# on long rows). Tests first (tests/python/test_fftconv_blocks_gpu.py, the CPU model's test, and the
# other solvers' automatic-rule tests, which the blocks rule must leave as they were), then
# compute-sanitizer memcheck on small forced calls (forward and every gradient, causal and
# circular, several blocks per row), then bench/gpu_fftconv_blocks.py --backward → $OUT/fftconv_blocks.json.
set -uo pipefail
OUT=${OUT:-$PWD/out/fcblocks}
mkdir -p "$OUT"
export PYTHONPATH=python:tests/python${PYTHONPATH:+:$PYTHONPATH}
T0=$(date +%s)
left() { echo $(( 290 - ($(date +%s) - T0) )); }
rc=0
timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/python/test_fftconv_blocks_gpu.py \
  tests/python/test_fftconv_blocks_model.py tests/python/test_fftconv_fourstep_gpu.py::test_default_rule \
  tests/python/test_fftconv_tensor_gpu.py::test_default_rule > "$OUT/pytest.log" 2>&1
r=$?
echo "pytest rc=$r in $(( $(date +%s) - T0 )) s: $(tail -1 "$OUT/pytest.log")"
[ $r = 0 ] || { grep -E "^(E  |FAILED)" "$OUT/pytest.log" | head -12; rc=1; }
SMALL='
import torch
from strux import _cuda_fftconv as F
o = {"solver": "blocks"}
for mode, L, Lk, dt in (("causal", 3001, 100, torch.float16), ("circular", 2500, 257, torch.float32),
                        ("causal", 500, 1000, torch.float64), ("circular", 1031, 1031, torch.bfloat16)):
    u = torch.randn(2, 2, L, device="cuda", dtype=dt)
    k = torch.randn(2, Lk, device="cuda", dtype=dt) / Lk ** 0.5
    g = torch.randn_like(u)
    s = k[:, 0].contiguous()
    F.fftconv(u, k, mode, g, g, s, options=o)
    F.fftconv_vjp(g, u, k, mode, g, g, s, options=o)
torch.cuda.synchronize()
'
t=$(( $(left) / 3 ))
if [ $t -ge 10 ]; then
  timeout $t compute-sanitizer --tool memcheck --error-exitcode 9 python3 -c "$SMALL" > "$OUT/memcheck.log" 2>&1
  m=$?
  echo "memcheck rc=$m (124 = out of time): $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1)"
  [ $m = 0 ] || [ $m = 124 ] || { tail -6 "$OUT/memcheck.log"; rc=1; }
fi
t0=$(date +%s)
timeout $(( $(left) > 20 ? $(left) : 20 )) python3 -u bench/gpu_fftconv_blocks.py --backward \
  --json "$OUT/fftconv_blocks.json" 2>&1 | tee "$OUT/bench.log" | grep -v -E '^  File "|^Traceback|^    [^ ]'
r=${PIPESTATUS[0]}
echo "bench rc=$r in $(( $(date +%s) - t0 )) s"
[ $r = 0 ] || rc=1
exit $rc
