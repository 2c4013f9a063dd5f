#!/usr/bin/env bash
# The whole Python test suite on the GPU machine (GPU tests included), for a merged tree:
# prints the failures and the summary line; the full log is $OUT/pytest.log.
# FULL_FROM=NAME runs only the test files whose names sort at or after NAME (the rest of a suite
# that an earlier run cut short); FULL_IGNORE="FILE ..." leaves files out (a file whose CUDA error
# would make every later test fail).
set -uo pipefail
OUT=${OUT:-out}
t0=$(date +%s)
FILES=()
for f in tests/python/test_*.py; do
  [ -n "${FULL_FROM:-}" ] && [[ "$(basename "$f")" < "$FULL_FROM" ]] && continue
  [[ " ${FULL_IGNORE:-} " == *" $f "* ]] && continue
  FILES+=("$f")
done
python3 -m pytest -q -rs -p no:cacheprovider "${FILES[@]}" > "$OUT/pytest.log" 2>&1
r=$?
grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -40
tail -2 "$OUT/pytest.log"
echo "full pytest (${#FILES[@]} paths from '${FULL_FROM:-}', ignoring '${FULL_IGNORE:-}') rc=$r in $(( $(date +%s) - t0 )) s"
exit $r
