#!/usr/bin/env bash
# The tensor-core fftconv solver on the GPU machine, in one call (<= 6 min): build
# (scripts/gpu_build.sh, no C++ tests; the same CMake options as scripts/gpu_focus.sh, so a warm
# build/gpu only recompiles what changed), compute-sanitizer
# memcheck and racecheck on small calls of every size, the solver's tests
# (tests/python/test_fftconv_tensor_gpu.py) and the existing fftconv GPU tests (the plan changed),
# then bench/gpu_fftconv_tensor.py. Logs and JSON under $OUT (default ./out):
# gpu_fftc_round.log, build.log, pytest.log, memcheck.log, racecheck.log, fftconv_tensor.json.
#   scripts/gpu_fftc_round.sh [--quick]     (--quick: the benchmark at 4 sizes only)
set -uo pipefail
ROOT=$PWD
OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu_fftc_round.log") 2>&1
echo "== $(date -u) $(hostname) $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null) fftc round"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv || true
GPU_CMAKE_ARGS=(-DSTRUX_BUILD_TESTS=OFF)
source scripts/gpu_build.sh
gpu_build || exit 1

rc=0
# small calls of the forced tensor solver; racecheck (slow) on three sizes (both radix-16 pass
# counts, radix r = 1 and 8) and float16 only
SMALL='
import sys, torch
from strux import _cuda_fftconv as F
F.fftconv_algo = 2
sizes = [int(n) for n in sys.argv[1].split(",")]
dts = (torch.float16,) if sys.argv[2] == "f16" else (torch.float16, torch.bfloat16)
for N in sizes:
    for mode in ("causal", "circular"):
        for dt in dts:
            L = N if mode == "circular" else N // 2 - 3
            u = torch.randn(3, 2, L, device="cuda", dtype=dt)
            k = torch.randn(2, L, device="cuda", dtype=dt) / L ** 0.5
            g = torch.randn_like(u)
            F.fftconv(u, k, mode, g, g, k[:, 0].contiguous())
torch.cuda.synchronize()
print("ok")
'
for tool in memcheck racecheck; do
  t0=$(date +%s)
  if [ $tool = memcheck ]; then args=(256,512,1024,2048,4096,8192,16384 all); else args=(256,2048,4096 f16); fi
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 python3 -c "$SMALL" "${args[@]}" > "$OUT/$tool.log" 2>&1
  m=$?
  echo "== $tool rc=$m in $(( $(date +%s) - t0 )) s ($(grep -c -E 'Invalid|hazard|Race' "$OUT/$tool.log") reports)"
  tail -3 "$OUT/$tool.log"
  [ $m = 0 ] || rc=1
done

t0=$(date +%s)
timeout 120 python3 -m pytest -q -rs -p no:cacheprovider --maxfail=20 tests/python/test_fftconv_tensor_gpu.py \
  tests/python/test_cuda_fftconv.py tests/python/test_cuda_fftconv_fused.py > "$OUT/pytest.log" 2>&1
r=$?
grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -30
tail -3 "$OUT/pytest.log"
echo "== pytest rc=$r in $(( $(date +%s) - t0 )) s"
[ $r = 0 ] || rc=1

t0=$(date +%s)
timeout 150 python3 bench/gpu_fftconv_tensor.py "$OUT" "$@" || { echo "== bench failed"; rc=1; }
echo "== bench in $(( $(date +%s) - t0 )) s"
exit $rc
