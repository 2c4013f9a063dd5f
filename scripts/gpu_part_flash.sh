#!/usr/bin/env bash
# GPU part "flash" (issue 12, Deliver 5): FlashFFTConv built from source on the GPU machine beside
# strux, never committed, then bench/gpu_fftconv_peer.py (issue 12's table: strux, FlashFFTConv and
# the PyTorch recipe in one process). Run as `scripts/gpu_session.sh flash:SECONDS` (strux is built
# by gpu_session first).
# Its sources lie in .deps/peers/flash-fft-conv (git archive of the upstream mirror: csrc/flashfftconv
# and the flashfftconv Python package; commit in NOTES-gpu-fftconv-peer.md), its one Python
# dependency (einops) as a wheel in .deps/peers/wheels. The CUDA extension `monarch_cuda` is built
# with torch.utils.cpp_extension from the same source list as its setup.py, for this machine's chip
# only (its setup.py asks for compute_80 PTX, which the driver would JIT at first use), into
# build/flashfftconv; a build already there (same machine, warm) is reused. (CC is the host
# compiler to cpp_extension: the capability goes in CAP.)
#   FLASH_ARGS: extra arguments of the bench (default --quick: float16 only)
#   FLASH_BUILD_ONLY=1: build (or find) the extension and stop (gpu_session.sh starts it early, in
#   the background, while the other parts use the GPU)
set -uo pipefail
ROOT=$PWD
OUT=${OUT:-$ROOT/out/flash}
mkdir -p "$OUT"
P=$ROOT/.deps/peers
FF=$P/flash-fft-conv
BUILD=$ROOT/build/flashfftconv
[ -d "$FF/csrc/flashfftconv" ] || { echo "== no FlashFFTConv sources in $FF"; exit 1; }
mkdir -p "$BUILD/pylib"
python3 -c "import einops" 2> /dev/null || python3 -m zipfile -e "$(ls "$P"/wheels/einops-*.whl | head -1)" "$BUILD/pylib"
export PYTHONPATH=$BUILD:$BUILD/pylib:$FF:${PYTHONPATH:-$ROOT/python:$ROOT/tests/python}
CAP=$(python3 -c "import torch; print('.'.join(map(str, torch.cuda.get_device_capability())))")
t0=$(date +%s)
if ! ls "$BUILD"/monarch_cuda*.so > /dev/null 2>&1; then
  MAX_JOBS=${MAX_JOBS:-$(nproc)} TORCH_CUDA_ARCH_LIST=$CAP python3 - "$FF/csrc/flashfftconv" "$BUILD" \
    > "$OUT/build.log" 2>&1 <<'PY'
import glob, sys
from torch.utils.cpp_extension import load
src, build = sys.argv[1], sys.argv[2]
sources = [src + "/monarch.cpp"] + sorted(glob.glob(src + "/monarch_cuda/*.cu") + glob.glob(src + "/butterfly/*.cu")
                                         + glob.glob(src + "/conv1d/*.cu"))
load("monarch_cuda", sources, extra_cflags=["-O3"], extra_cuda_cflags=["-O3", "-lineinfo", "--use_fast_math", "-std=c++17"],
     build_directory=build, verbose=True)
PY
  r=$?
  echo "== FlashFFTConv build rc=$r in $(( $(date +%s) - t0 )) s (sm ${CAP})"
  [ $r = 0 ] || { grep -E "error|Error" -A3 "$OUT/build.log" | tail -20; exit 1; }
fi
ls -la "$BUILD"/monarch_cuda*.so
[ "${FLASH_BUILD_ONLY:-0}" = 1 ] && exit 0
t0=$(date +%s)
python3 -u bench/gpu_fftconv_peer.py "$OUT/fftconv_peer.json" ${FLASH_ARGS:---quick} 2>&1 | tee "$OUT/bench.log" \
  | grep -v -E '^  File "|^Traceback|^    [^ ]'
r=${PIPESTATUS[0]}
echo "== bench rc=$r in $(( $(date +%s) - t0 )) s"
exit $r
