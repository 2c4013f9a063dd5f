#!/usr/bin/env bash
# GPU part "ks" of scripts/gpu_session.sh (run as ks:240): the ks tests of the solver table's tr
# rule (test_cuda_ks_paths.py: the rule on both sides of it, forced tr on large segments, default
# results at batch 1024 against float64; the half and float32-dw tr tests), then ksmm's pattern
# sweep focused on the rows the large-segment tr rule decides (bench/gpu_ks_sweep.py --focus
# tr-large: batch-first d > 1, float32 segments over 48 KB, sampled to fit, plus a few others;
# each row also times the forced alternative path), then bench/ks_rule_check.py on it: new
# default vs the forced old path on every moved row (bench/NOTES-gpu-ks-scan.md "ks-path-rule").
# JSON and the full logs under $OUT; summaries on stdout.
#   KS_SWEEP_SECONDS (default 110; 0 leaves the sweep out), KS_SWEEP_ALL=1 (the whole list, both
#   layouts, sampled evenly, instead of the focus), KS_SMALL_BENCH=1 (the small-batch bench too),
#   KS_DENSE=1 (the forced dense path instead: tests/python/test_cuda_ks_dense.py, the sweep's
#   --focus dense (a*d <= 8, both layouts) and ks_rule_check.py --dense; NOTES "ks-dense").
set -uo pipefail
source scripts/gpu_step.sh  # OUT, PYTHONPATH, rc and step()
if [ "${KS_DENSE:-0}" = 1 ]; then
  step 120 "tests (test_cuda_ks_dense.py)" python3 -m pytest -q -p no:cacheprovider \
    tests/python/test_cuda_ks_dense.py > "$OUT/pytest_dense.log" 2>&1
  grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest_dense.log" | tail -8
  SWEEP=${KS_SWEEP_SECONDS:-110}
  if [ "$SWEEP" -gt 0 ]; then
    step $(( SWEEP + 30 )) "sweep (focus dense)" python3 bench/gpu_ks_sweep.py --out "$OUT" \
      --max-seconds "$SWEEP" --focus dense > "$OUT/sweep.log" 2>&1
    grep -E "^ks sweep|: n |ACCURACY|dense path|^    \(" "$OUT/sweep.log"
    [ -f "$OUT/ks_sweep.json" ] && step 15 "rule check (dense)" python3 bench/ks_rule_check.py \
      "$OUT/ks_sweep.json" --dense
  fi
  exit $rc
fi
step 75 "tests (test_cuda_ks_paths.py, test_cuda_ks_backward.py::test_half_tr_path, ::test_float32_dw_tr)" \
  python3 -m pytest -q -x -p no:cacheprovider tests/python/test_cuda_ks_paths.py \
  tests/python/test_cuda_ks_backward.py::test_half_tr_path tests/python/test_cuda_ks_backward.py::test_float32_dw_tr \
  > "$OUT/pytest.log" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest.log" | tail -4
SWEEP=${KS_SWEEP_SECONDS:-110}
if [ "$SWEEP" -gt 0 ]; then
  if [ "${KS_SWEEP_ALL:-0}" = 1 ]; then
    step $(( SWEEP + 30 )) "sweep" python3 bench/gpu_ks_sweep.py --out "$OUT" --max-seconds "$SWEEP" \
      > "$OUT/sweep.log" 2>&1
  else
    step $(( SWEEP + 30 )) "sweep (focus tr-large, bsf)" python3 bench/gpu_ks_sweep.py --out "$OUT" \
      --max-seconds "$SWEEP" --focus tr-large --rest 6 --layouts bsf > "$OUT/sweep.log" 2>&1
  fi
  grep -E "^ks sweep|bsf: n|ACCURACY|rule:" "$OUT/sweep.log"  # (the full summary: sweep.log)
  [ -f "$OUT/ks_sweep.json" ] && step 15 "rule check" python3 bench/ks_rule_check.py \
    "$OUT/ks_sweep.json" --table "$OUT/ks_rule_moved.txt"
fi
[ "${KS_SMALL_BENCH:-0}" = 1 ] && step 20 "small-batch bench" python3 bench/gpu_ks_small.py --out "$OUT"
exit $rc
