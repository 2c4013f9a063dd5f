#!/usr/bin/env bash
# GPU part "rows" (limit 120 s): the diag_scan `rows` solver's tests (every case, failures with
# their assertion lines), then bench/gpu_scan_rows_rule.py (n = 1 problems from 33 to 8448 rows:
# the automatic choice vs rows vs chunk vs seq1, forward and backward, % of copy bandwidth), the
# measurement behind the solver table's rule for rows. Logs and JSON under $OUT.
set -uo pipefail
OUT=${OUT:-$PWD/out/rows}
mkdir -p "$OUT"
export PYTHONPATH=${PYTHONPATH:-python:tests/python}
timeout 60 python3 -m pytest -q -p no:cacheprovider --tb=short tests/python/test_scan_gpu_rows.py > "$OUT/pytest.log" 2>&1
r=$?
grep -E "^(FAILED|ERROR|E  )" "$OUT/pytest.log" | head -30
echo "== rows tests rc=$r: $(tail -1 "$OUT/pytest.log")"
if [ $r != 0 ] && command -v compute-sanitizer > /dev/null; then
  # the first failing kernel, by name and source line
  timeout 40 compute-sanitizer --tool memcheck --show-backtrace device python3 -c "
import torch
from strux import _cuda_scan as K
for dt in (torch.float16, torch.float32):
    a = torch.full((3, 5, 1), 0.5, device='cuda', dtype=dt); b = torch.ones_like(a)
    h = K.diag_scan(a, b, options={'path': 'rows'})
    K.diag_scan_vjp(torch.ones_like(a), a, b, h=h, options={'path': 'rows'})
    torch.cuda.synchronize()
    print(dt, 'ok', flush=True)" > "$OUT/memcheck.log" 2>&1
  grep -E "ok$|Invalid|at 0x|by thread|Address|ERROR SUMMARY|diag_scan" "$OUT/memcheck.log" | head -24
fi
timeout 55 python3 bench/gpu_scan_rows_rule.py "$OUT/rows_rule.json"
b=$?
echo "== rows rule bench rc=$b"
[ $r = 0 ] && [ $b = 0 ]
