#!/usr/bin/env bash
# Profile one ks product kernel with Nsight Compute (hardware counters, clocks left alone):
# builds like gpu_perf_ks.sh, then runs python/strux/bench/ks_one.py under ncu for the kernels
# matching $KS_NCU_KERNEL (default: the streaming and the tensor-core kernels), and dumps the
# SASS of the streaming kernels. Files under $OUT.
#   KS_PATTERN="6,64,64,1" scripts/gpu_ncu_ks.sh
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
ROOT=$PWD
exec > >(tee -a "$OUT/gpu_ncu_ks.log") 2>&1
echo "== $(date -u) $(hostname)"
GPU_CMAKE_ARGS=(-DSTRUX_BUILD_TESTS=OFF)
source scripts/gpu_build.sh
gpu_build || exit 1
for path in stream kernels; do
  timeout 120 ncu --clock-control none --set detailed \
    --section WarpStateStats --section SourceCounters -k "regex:${KS_NCU_KERNEL:-stream_kernel|tf32x3}" --launch-skip 2 -c 1 \
    python3 -m strux.bench.ks_one "${KS_PATTERN:-6,64,64,1}" 25088 "$path" > "$OUT/ncu_$path.txt" 2>&1
  echo "== ncu $path rc=$?"
  grep -E "Duration|Memory Throughput|DRAM Throughput|Compute \(SM\)|Registers|Achieved Occupancy|Block Limit|Warp Cycles Per Issued|Issue Slots Busy|Stall|stall" "$OUT/ncu_$path.txt" | head -40
done
obj=$(find build/gpu -name 'ks_stream_k1.cu.o' | head -1)
cuobjdump -sass "$obj" > "$OUT/sass_stream_k1.txt" 2>&1
echo "== sass lines $(wc -l < "$OUT/sass_stream_k1.txt")"
