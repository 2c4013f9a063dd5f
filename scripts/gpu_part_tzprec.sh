#!/usr/bin/env bash
# GPU part "tzprec" (about 200 s, after the session's build): the single-GPU toeplitz tests (every
# precision configuration, the own product kernels) and the precision front (time and error of
# every configuration, complex64 against 16-bit F̂) at the product-dominated shape of
# bench/NOTES-toeplitz-precision.md and at a square one. JSON under $OUT.
set -uo pipefail
OUT=${OUT:-out/tzprec}
mkdir -p "$OUT"
export PYTHONPATH=${PYTHONPATH:-$PWD/python:$PWD/tests/python}
t0=$(date +%s)
python3 -m pytest -q -p no:cacheprovider tests/python/test_cuda_toeplitz_precision.py tests/python/test_cuda_toeplitz.py \
  > "$OUT/pytest.log" 2>&1
echo "tzprec: pytest rc=$? in $(( $(date +%s) - t0 )) s: $(tail -1 "$OUT/pytest.log")"
grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -10
for shape in "1000 100 5000" "500 1024 1024"; do
  set -- $shape
  python3 -m strux.bench.toeplitz --precision --device cuda --Nt "$1" --Nd "$2" --Nm "$3" \
    --json "$OUT/front_$1_$2_$3.json" > "$OUT/front_$1_$2_$3.md" 2>&1
  echo "tzprec: front $shape rc=$? at $(( $(date +%s) - t0 )) s"
  grep -E "^\|" "$OUT/front_$1_$2_$3.md" | head -14
done
