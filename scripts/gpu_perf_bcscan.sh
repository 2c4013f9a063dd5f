#!/usr/bin/env bash
# Focused GPU run for block_circulant_scan (< 4 min): build the extension for this chip (no C++
# tests), run its GPU tests (tests/python/test_cuda_block_scan.py and the block/torch-op tests of
# test_cuda_scan.py), then time forward and backward against the PyTorch time loop
# (python -m strux.bench.gpu_block_scan). FFTW/BLAS .debs from $DEPS (see scripts/gpu_build.sh).
# Writes build.log, pytest.log, gpu_block_scan.json under $OUT (default ./out).
set -uo pipefail
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
ROOT=$PWD
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader || true
GPU_CMAKE_ARGS=(-DSTRUX_BUILD_TESTS=OFF)
source scripts/gpu_build.sh
gpu_build || exit 1
grep -A2 "bscan" "$OUT/build.log" | grep -E "registers|spill" | sort | uniq -c | head -20 || true
t0=$(date +%s)
if [ "${SKIP_TESTS:-0}" = 1 ]; then timeout 60 python3 -m strux.bench.gpu_block_scan --out "$OUT"; exit $?; fi
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/python/test_cuda_block_scan.py \
  tests/python/test_cuda_scan.py -k "block or torch_ops" > "$OUT/pytest.log" 2>&1
rc=$?
grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -30
tail -3 "$OUT/pytest.log"; echo "== pytest rc=$rc in $(( $(date +%s) - t0 )) s"
timeout 60 python3 -m strux.bench.gpu_block_scan --out "$OUT"
exit $rc
