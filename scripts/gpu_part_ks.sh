#!/usr/bin/env bash
# GPU part "ks" of scripts/gpu_session.sh (limit 200 s): the small-batch path's tests, then ksmm's
# pattern sweep (bench/gpu_ks_sweep.py, sampled to fit --max-seconds) and the small-batch bench
# (bench/gpu_ks_small.py). JSON under $OUT; the summaries on stdout.
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
step 45 "tests (test_cuda_ks_small.py)" python3 -m pytest -q -x -p no:cacheprovider \
  tests/python/test_cuda_ks_small.py > "$OUT/pytest.log" 2>&1
tail -3 "$OUT/pytest.log"
step 105 "sweep" python3 bench/gpu_ks_sweep.py --out "$OUT" --max-seconds 80
step 35 "small-batch bench" python3 bench/gpu_ks_small.py --out "$OUT"
exit $rc
