#!/usr/bin/env bash
# GPU part "ks" of scripts/gpu_session.sh (limit 200 s): the ks path tests (small-batch path, the
# solver table's rules, forced tr on large segments), then ksmm's pattern sweep
# (bench/gpu_ks_sweep.py, sampled to fit --max-seconds; batch-first d > 1 rows also time the
# forced alternative path) and the small-batch bench (bench/gpu_ks_small.py). JSON under $OUT; the
# summaries on stdout.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export PYTHONPATH=${PYTHONPATH:-python:tests/python}
rc=0
step() {  # step SECONDS NAME CMD...
  local limit=$1 name=$2 t0 r
  shift 2
  t0=$(date +%s)
  timeout -k 3 "$limit" "$@"
  r=$?
  echo "== $name rc=$r in $(( $(date +%s) - t0 )) s"
  [ $r = 0 ] || rc=1
}
step 60 "tests (test_cuda_ks_small.py, test_cuda_ks_paths.py, test_cuda_ks_backward.py::test_half_tr_path)" \
  python3 -m pytest -q -x -p no:cacheprovider tests/python/test_cuda_ks_small.py \
  tests/python/test_cuda_ks_paths.py "tests/python/test_cuda_ks_backward.py::test_half_tr_path" \
  > "$OUT/pytest.log" 2>&1
tail -3 "$OUT/pytest.log"
# KS_SWEEP_SECONDS=0 leaves the sweep out (a round that checks the rules and the small path only)
SWEEP=${KS_SWEEP_SECONDS:-90}
[ "$SWEEP" -gt 0 ] && step $(( SWEEP + 28 )) "sweep" python3 bench/gpu_ks_sweep.py --out "$OUT" --max-seconds "$SWEEP"
step 20 "small-batch bench" python3 bench/gpu_ks_small.py --out "$OUT"
exit $rc
