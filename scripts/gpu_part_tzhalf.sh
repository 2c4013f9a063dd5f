#!/usr/bin/env bash
# GPU part "tzhalf" (about 90 s; needs nvcc only, no strux build): the one-right-hand-side F̂ product
# kernels side by side (bench/gpu_toeplitz_half.cu): complex64 F̂ against bfloat16 pairs, each
# kernel's variants, with the copy bandwidth of the same run. JSON lines in $OUT/tzhalf.jsonl.
# TZ_SHAPES (environment): "NFREQ ND NM ..." instead of the default shapes.
set -uo pipefail
OUT=${OUT:-out/tzhalf}
mkdir -p "$OUT" build
t0=$(date +%s)
nvcc -O3 -std=c++17 --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a -Isrc -Iinclude \
  bench/gpu_toeplitz_half.cu src/cuda/device.cu -o build/gpu_toeplitz_half > "$OUT/nvcc.log" 2>&1 \
  || { echo "tzhalf: nvcc FAILED"; tail -20 "$OUT/nvcc.log"; exit 1; }
echo "tzhalf: built in $(( $(date +%s) - t0 )) s"
SHAPES=(${TZ_SHAPES:-1001 1767 1767 501 2499 2499 1001 100 4999 1001 1024 1022 1001 2499 64 1001 2499 128 1001 2499 256 1001 100 5000})
CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0} build/gpu_toeplitz_half "${SHAPES[@]}" | tee "$OUT/tzhalf.jsonl"
echo "tzhalf: done in $(( $(date +%s) - t0 )) s"
