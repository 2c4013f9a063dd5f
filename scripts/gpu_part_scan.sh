#!/usr/bin/env bash
# The scan part of a GPU round (run by scripts/gpu_session.sh after the build, PYTHONPATH set,
# OUT = this part's folder; limit 150 s): the diag_scan solver tests (every forced solver, pipe
# and rows included), then accelerated-scan (the peer) against strux: strux's default in its
# (B, T, n) layout and the rows solver in the peer's own time-last layout (B, C, T) (forward and
# backward, % of copy bandwidth); the peer's CUDA kernel is compiled at import (~30-60 s, in the
# background during the tests). The variant table of bench/gpu_scan_bw.py (chunk / pipe, measured
# last round) is left out for time. Logs and JSON under $OUT; stdout ends with the table.
set -uo pipefail
ROOT=$PWD
OUT=${OUT:-$ROOT/out/scan}
mkdir -p "$OUT"
export PYTHONPATH=${PYTHONPATH:-$ROOT/python:$ROOT/tests/python}
T0=$(date +%s)
left() { echo $(( 145 - ($(date +%s) - T0) )); }
rc=0
# the peer's build caches: off the output folder (not sent back); its CUDA extension compiles in
# the background during the tests (the bench's import waits on torch's build lock if need be)
export TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-/tmp/strux-peer-ext} TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
PEER=$ROOT/.deps/peers/accelerated-scan
if [ -d "$PEER" ]; then
  (cd "$PEER" && timeout 140 python3 -c "import accelerated_scan.warp" > "$OUT/peer_build.log" 2>&1) &
fi

t0=$(date +%s)
# (the tile solver's cases run in part scantile: kept out of this part's 70 s)
timeout 70 python3 -m pytest -q -x -p no:cacheprovider tests/python/test_scan_gpu_solvers.py \
  tests/python/test_scan_gpu_rows.py -k "not tile" > "$OUT/pytest.log" 2>&1
r=$?
grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -5
echo "== scan tests rc=$r in $(( $(date +%s) - t0 )) s: $(tail -1 "$OUT/pytest.log")"
[ $r = 0 ] || rc=1

t0=$(date +%s)
lim=$(left)
if [ "$lim" -gt 20 ]; then
  timeout "$lim" python3 bench/gpu_scan_peer.py "$OUT" --quick --strux rows > "$OUT/peer.log" 2>&1 || { echo "== peer bench failed or cut at ${lim} s"; rc=1; }
  grep -E "^(\||copy|== peer|== rows)" "$OUT/peer.log"
else
  echo "== peer bench skipped: ${lim} s left"
fi
echo "== peer in $(( $(date +%s) - t0 )) s; part total $(( $(date +%s) - T0 )) s"
exit $rc
