#!/usr/bin/env bash
# One device call for a whole round of work: builds strux once (scripts/gpu_build.sh, no C++
# tests), then runs each part script scripts/gpu_part_<name>.sh (tests first, then its
# benchmarks) with its own output folder $OUT/<name> and a time limit, and prints a one-line
# result per part. Parts are the families' GPU rounds; each must keep its own output small
# (summaries on stdout, JSON under its folder).
#   scripts/gpu_session.sh [NAME[:SECONDS] ...]    default: every part, 150 s each
set -uo pipefail
ROOT=$PWD
OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu_session.log") 2>&1
echo "== $(date -u) $(hostname) $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null) gpu_session $*"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv || true
GPU_CMAKE_ARGS=(-DSTRUX_BUILD_TESTS=OFF)
source scripts/gpu_build.sh
gpu_build || exit 1
PARTS=("$@")
if [ ${#PARTS[@]} = 0 ]; then
  for f in scripts/gpu_part_*.sh; do n=${f#scripts/gpu_part_}; PARTS+=("${n%.sh}"); done
fi
rc=0
# FlashFFTConv's extension takes ~3 minutes of CPU to build: when the part "flash" is asked for,
# its build starts now in the background and the part waits for it.
FLASH_PID=
if [[ " ${PARTS[*]} " == *" flash"* ]]; then
  mkdir -p "$OUT/flash"
  (OUT="$OUT/flash" FLASH_BUILD_ONLY=1 bash scripts/gpu_part_flash.sh > "$OUT/flash/early_build.log" 2>&1) &
  FLASH_PID=$!
fi
for spec in "${PARTS[@]}"; do
  name=${spec%%:*}
  [ "$name" = flash ] && [ -n "$FLASH_PID" ] && { wait "$FLASH_PID"; tail -3 "$OUT/flash/early_build.log"; }
  limit=150
  [ "$spec" != "$name" ] && limit=${spec#*:}
  t0=$(date +%s)
  mkdir -p "$OUT/$name"
  OUT="$OUT/$name" timeout -k 5 "$limit" bash "scripts/gpu_part_$name.sh" > "$OUT/$name/part.log" 2>&1
  r=$?
  tail -40 "$OUT/$name/part.log"
  echo "== part $name rc=$r in $(( $(date +%s) - t0 )) s (limit $limit)"
  [ $r = 0 ] || rc=1
done
exit $rc
