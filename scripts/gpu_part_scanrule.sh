#!/usr/bin/env bash
# GPU part "scanrule" of scripts/gpu_session.sh (~150 s): the diag_scan default rule with the tile
# kernel (bench/NOTES-gpu-ks-scan.md, "Outcome of diag_scan tile"): the solver tests (the rule
# test on the measured SM count, describe, every tile case), then every row of issue 14's table
# beside accelerated-scan: the default against chunk, seqv, seq1 and tile forced, so each row the
# rule moved to tile is measured against the kernel it had. Logs and gpu_scan_peer.json under $OUT.
set -uo pipefail
source scripts/gpu_step.sh
export OUT
export TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-/tmp/strux-peer-ext} TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
PEER=$PWD/.deps/peers/accelerated-scan
[ -d "$PEER" ] && (cd "$PEER" && timeout 140 python3 -c "import accelerated_scan.warp" > "$OUT/peer_build.log" 2>&1) &
step 70 "solver tests" bash -c 'python3 -m pytest -q -x -p no:cacheprovider tests/python/test_scan_gpu_solvers.py \
  -k "rule or describe or tile" > "$OUT/pytest.log" 2>&1'
grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -5
tail -1 "$OUT/pytest.log"
wait
step 110 "rule vs peer" bash -c 'python3 bench/gpu_scan_peer.py "$OUT" --quick --strux chunk seqv seq1 tile > "$OUT/peer.log" 2>&1'
grep -E "^(\||copy)" "$OUT/peer.log"
exit $rc
