#!/usr/bin/env bash
# The whole Python test suite on the GPU machine (GPU tests included), for a merged tree:
# prints the failures and the summary line; the full log is $OUT/pytest.log.
set -uo pipefail
OUT=${OUT:-out}
t0=$(date +%s)
python3 -m pytest -q -rs -p no:cacheprovider tests/python > "$OUT/pytest.log" 2>&1
r=$?
grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -40
tail -2 "$OUT/pytest.log"
echo "full pytest rc=$r in $(( $(date +%s) - t0 )) s"
exit $r
