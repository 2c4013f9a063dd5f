#!/usr/bin/env bash
# GPU part "gpuall" of scripts/gpu_session.sh: every GPU test file, one pytest run per file (each
# prints its own summary, so a time limit cuts the list, not a file's report), in the order given by
# GPUALL_FIRST (default: the fftconv, torch and hostile-input files) and then the rest, until
# GPUALL_SECONDS (default 200) are spent. Failures listed on stdout; logs under $OUT.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export PYTHONPATH=${PYTHONPATH:-python:tests/python}
T0=$(date +%s)
BUDGET=${GPUALL_SECONDS:-200}
FIRST=${GPUALL_FIRST:-"test_cuda_fftconv test_cuda_fftconv_fused test_fftconv_tensor_gpu test_cuda_fftconv_spectral test_cuda_torch test_torch_cuda test_cuda_hostile test_cuda_fuzz test_cuda_dispatch"}
files=()
for f in $FIRST; do files+=("tests/python/$f.py"); done
for f in tests/python/test_cuda_*.py tests/python/*_gpu*.py; do
  case " ${files[*]} " in *" $f "*) ;; *) files+=("$f") ;; esac
done
rc=0
for f in "${files[@]}"; do
  left=$(( BUDGET - ($(date +%s) - T0) ))
  [ $left -ge 10 ] || { echo "== not run (no time left): $f"; continue; }
  n=$(basename "$f" .py)
  timeout -k 3 $left python3 -m pytest -q -p no:cacheprovider "$f" > "$OUT/$n.log" 2>&1
  r=$?
  echo "== $n rc=$r: $(tail -1 "$OUT/$n.log")"
  [ $r = 0 ] || [ $r = 5 ] || { grep -E "^(FAILED|ERROR)" "$OUT/$n.log" | head -8; rc=1; }
done
exit $rc
