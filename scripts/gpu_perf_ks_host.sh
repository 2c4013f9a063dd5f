#!/usr/bin/env bash
# Host overhead of the GPU ks products: build strux's Python extension with CUDA (as
# scripts/gpu_perf_ks.sh, no C++ tests), run the ks / torch-op GPU tests, then time the entries
# per call, back to back and host-only (python -m strux.bench.gpu_ks_host). Logs under $OUT.
#   scripts/gpu_perf_ks_host.sh
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
ROOT=$PWD
exec > >(tee -a "$OUT/gpu_perf_ks_host.log") 2>&1
echo "== $(date -u) $(hostname) $(git rev-parse --short HEAD 2>/dev/null)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv || true
GPU_CMAKE_ARGS=(-DSTRUX_BUILD_TESTS=OFF)
source scripts/gpu_build.sh
gpu_build || exit 1
t0=$(date +%s)
timeout 200 python3 -m pytest -q -rs -p no:cacheprovider tests/python/test_cuda_ks_host.py \
  tests/python/test_cuda_ks.py tests/python/test_cuda_torch.py > "$OUT/pytest.log" 2>&1
rc=$?
grep -E "FAILED|Error|error" "$OUT/pytest.log" | head -40
tail -5 "$OUT/pytest.log"
echo "== pytest rc=$rc in $(( $(date +%s) - t0 )) s"
timeout 120 python3 -m strux.bench.gpu_ks_host --out "$OUT" || { echo "== bench failed"; rc=1; }
exit $rc
