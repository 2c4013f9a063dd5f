#!/usr/bin/env bash
# The tile part of a GPU round (issue 14, "scans at bandwidth"; run by scripts/gpu_session.sh after
# the build, PYTHONPATH and OUT set; ~170 s): the tile solver's tests (the float64 model of its
# schedule on the CPU, then every tile case of test_scan_gpu_solvers.py: forward and vjp against
# float64 on every shape and dtype, T = 1, prime T, n = 1, odd n, non-contiguous and misaligned
# inputs, NaN, h0, repeated calls on two streams, in place, chunk and tile boundaries at each row
# width against seq1, describe), then issue 14's three float32 rows against accelerated-scan (the
# peer, its warp kernel in its own (B, C, T) layout): strux default, tile (the plan's width and
# 32- to 256-byte rows forced) in (B, T, n), rows in the peer's layout, forward and backward,
# copy bandwidth measured in the same run; then compute-sanitizer memcheck and racecheck on small
# tile calls with the time left. Predictions: bench/NOTES-gpu-ks-scan.md, "diag_scan
# tile". Logs, the table and gpu_scan_peer.json under $OUT.
set -uo pipefail
source scripts/gpu_step.sh
export OUT  # read by the steps' shells
T0=$(date +%s)
left() { echo $(( 165 - ($(date +%s) - T0) )); }

# the peer's CUDA extension compiles in the background during the tests (its build caches off $OUT)
export TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-/tmp/strux-peer-ext} TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
PEER=$PWD/.deps/peers/accelerated-scan
if [ -d "$PEER" ]; then
  (cd "$PEER" && timeout 140 python3 -c "import accelerated_scan.warp" > "$OUT/peer_build.log" 2>&1) &
fi

# (the commands' own output to logs, step's "== NAME rc" line to stdout)
step 85 "tile tests" bash -c 'python3 -m pytest -q -x -p no:cacheprovider tests/python/test_diag_scan_tile_model.py \
  tests/python/test_scan_gpu_solvers.py -k tile > "$OUT/pytest.log" 2>&1'
grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -5
tail -1 "$OUT/pytest.log"

lim=$(left)
if [ "$lim" -gt 20 ]; then
  step "$lim" "tile vs peer" bash -c 'python3 bench/gpu_scan_peer.py "$OUT" --quick --strux tile tile:32 tile:64 tile:128 tile:256 rows \
    --rows "f32 (8,8192,1024)" "f32 (4,65536,256)" "f32 (1,4096,16384)" > "$OUT/peer.log" 2>&1'
  grep -E "^(\||copy|== peer|== rows|== tile)" "$OUT/peer.log"
else
  echo "== tile vs peer skipped: ${lim} s left"
fi
# compute-sanitizer on small tile calls, with the time left (memcheck, then racecheck: the stage
# ring and the warp totals' parity buffers)
for tool in memcheck racecheck; do
  lim=$(left)
  if [ "$lim" -gt 15 ] && command -v compute-sanitizer > /dev/null; then
    step "$lim" "tile $tool" bash -c 'compute-sanitizer --tool "$0" --error-exitcode 9 python3 scripts/gpu_memcheck.py tile \
      > "$OUT/$0.log" 2>&1' "$tool"
    grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" "$OUT/$tool.log"
  else
    echo "== tile $tool skipped: ${lim} s left"
  fi
done
echo "== part total $(( $(date +%s) - T0 )) s"
exit $rc
