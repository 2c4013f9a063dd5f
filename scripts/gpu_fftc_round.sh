#!/usr/bin/env bash
# The tensor-core fftconv solver on the GPU machine, in one call (<= 6 min): build
# (scripts/gpu_build.sh, no C++ tests; the same CMake options as scripts/gpu_focus.sh, so a warm
# build/gpu only recompiles what changed), compute-sanitizer
# memcheck and racecheck on small calls of every size, the solver's tests
# (tests/python/test_fftconv_tensor_gpu.py), the existing fftconv GPU tests (the plan changed) and
# the fftconv tests of the other GPU suites,
# then bench/gpu_fftconv_tensor.py. Logs and JSON under $OUT (default ./out):
# gpu_fftc_round.log, build.log, pytest.log, pytest_other.log, {memcheck,racecheck}-algo{2,5,6,7}.log, fftconv_tensor.json.
#   scripts/gpu_fftc_round.sh [--quick]     (--quick: the benchmark at 5 sizes only)
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
# small calls of the forced tensor solver (algo 2; 5: two tiles per warp in flight; 6: and
# factored twiddles; 7: algo 2 with factored twiddles);
# racecheck (slow) on three sizes (both radix-16 pass counts, radix r = 1 and 8) and float16 only
SMALL='
import sys, torch
from strux import _cuda_fftconv as F
F.fftconv_algo = int(sys.argv[3])
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
for algo in 2 5 6 7; do
for tool in memcheck racecheck; do
  t0=$(date +%s)
  if [ $tool = memcheck ]; then args=(256,512,1024,2048,4096,8192,16384 all); else args=(256,2048,4096 f16); fi
  log="$OUT/$tool-algo$algo.log"
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 python3 -c "$SMALL" "${args[@]}" $algo > "$log" 2>&1
  m=$?
  echo "== $tool algo $algo rc=$m in $(( $(date +%s) - t0 )) s ($(grep -c -E 'Invalid|hazard|Race' "$log") reports)"
  tail -3 "$log"
  [ $m = 0 ] || rc=1
done
done

t0=$(date +%s)
timeout 120 python3 -m pytest -q -rs -p no:cacheprovider --maxfail=20 tests/python/test_fftconv_tensor_gpu.py \
  tests/python/test_cuda_fftconv.py tests/python/test_cuda_fftconv_fused.py > "$OUT/pytest.log" 2>&1
r=$?
grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -30
tail -3 "$OUT/pytest.log"
echo "== pytest rc=$r in $(( $(date +%s) - t0 )) s"
[ $r = 0 ] || rc=1
# the default now takes the tensor kernels at FFT 256/512 (half types): the other GPU suites'
# fftconv tests (torch autograd, fuzz, hostile inputs) go through it
t0=$(date +%s)
timeout 150 python3 -m pytest -q -rs -p no:cacheprovider --maxfail=20 -k "fftconv or FFTConv" \
  tests/python/test_torch_cuda.py tests/python/test_cuda_torch.py tests/python/test_cuda_fuzz.py \
  tests/python/test_cuda_hostile.py > "$OUT/pytest_other.log" 2>&1
r=$?
grep -E "^(FAILED|ERROR)" "$OUT/pytest_other.log" | head -30
tail -3 "$OUT/pytest_other.log"
echo "== pytest (other fftconv suites) rc=$r in $(( $(date +%s) - t0 )) s"
[ $r = 0 ] || [ $r = 5 ] || rc=1

t0=$(date +%s)
timeout 240 python3 bench/gpu_fftconv_tensor.py "$OUT" "$@" || { echo "== bench failed"; rc=1; }
echo "== bench in $(( $(date +%s) - t0 )) s"
exit $rc
