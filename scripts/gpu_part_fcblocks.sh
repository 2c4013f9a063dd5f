#!/usr/bin/env bash
# GPU part "fcblocks" (scripts/gpu_session.sh fcblocks:240): the blocks fftconv solver (short filters
# on long rows). Tests first (tests/python/test_fftconv_blocks_gpu.py with its 16-bit path and
# block-size probes, the CPU model's test, and the other solvers' automatic-rule tests, which the
# blocks rule must leave as they were), then compute-sanitizer memcheck on small forced calls
# (forward and every gradient with every gate, causal and circular, several blocks per row, float16 /
# bfloat16 / float32 / float64, the 16-bit path's inner direct kernels and a block-size probe), then
# bench/gpu_fftconv_blocks.py --backward --probes (causal and circular, float16 / bfloat16 /
# float32, Lk 64, 256 and 1024) → $OUT/fftconv_blocks.json. About 240 s in all.
set -uo pipefail
OUT=${OUT:-$PWD/out/fcblocks}
mkdir -p "$OUT"
export PYTHONPATH=python:tests/python${PYTHONPATH:+:$PYTHONPATH}
T0=$(date +%s)
left() { echo $(( ${FCB_SECONDS:-235} - ($(date +%s) - T0) )); }  # FCB_SECONDS: this part's budget
rc=0
timeout 110 python3 -m pytest -q -x -p no:cacheprovider tests/python/test_fftconv_blocks_gpu.py \
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
                        ("causal", 500, 1000, torch.float64), ("circular", 1031, 1031, torch.bfloat16),
                        ("circular", 2503, 65, torch.float16), ("causal", 2053, 2, torch.bfloat16)):
    u = torch.randn(2, 2, L, device="cuda", dtype=dt)
    k = torch.randn(2, Lk, device="cuda", dtype=dt) / Lk ** 0.5
    g = torch.randn_like(u)
    s = k[:, 0].contiguous()
    F.fftconv(u, k, mode, g, g, s, options=o)
    F.fftconv_vjp(g, u, k, mode, g, g, s, options=o)
    F.fftconv(u, k, mode, options=o)
    F.fftconv_vjp(g, u, k, mode, options=o)
u = torch.randn(1, 2, 3001, device="cuda", dtype=torch.float16)
k = torch.randn(2, 100, device="cuda", dtype=torch.float16) / 10
r = F._fast(u, k, "causal", u, u, k[:, 0].contiguous())
F.forward_torch(u, k, u, u, k[:, 0].contiguous(), r, 12)
F._vjp(u, u, k, u, u, k[:, 0].contiguous(), r, u.new_empty, 12)
torch.cuda.synchronize()
'
t=$(( $(left) / 4 ))
if [ $t -ge 10 ]; then
  timeout $t compute-sanitizer --tool memcheck --error-exitcode 9 python3 -c "$SMALL" > "$OUT/memcheck.log" 2>&1
  m=$?
  echo "memcheck rc=$m (124 = out of time): $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1)"
  [ $m = 0 ] || [ $m = 124 ] || { tail -6 "$OUT/memcheck.log"; rc=1; }
fi
t0=$(date +%s)
timeout $(( $(left) > 20 ? $(left) : 20 )) python3 -u bench/gpu_fftconv_blocks.py --backward --probes \
  --json "$OUT/fftconv_blocks.json" 2>&1 | tee "$OUT/bench.log" | grep -v -E '^  File "|^Traceback|^    [^ ]'
r=${PIPESTATUS[0]}
echo "bench rc=$r in $(( $(date +%s) - t0 )) s (124: out of time; the JSON keeps the cases done)"
[ $r = 0 ] || rc=1
exit $rc
