#!/usr/bin/env bash
# FFTMatvec (issue 13, Deliver 5) built from source on the GPU machine beside strux, never
# committed: its sources lie in .deps/peers/FFTMatvec (git archive of the upstream mirror, with
# its HighFive submodule's pinned commit unpacked into HighFive/), parallel HDF5 (Debian
# bookworm's libhdf5-openmpi 1.10.8, with libaec0 / libsz2) as .deb files in .deps/peers/debs
# (apt-get download on a machine with apt). No internet is needed here: CUDA, CMake, OpenMPI
# (mpicxx) and torch's nvidia-nccl wheel are on the GPU machine.
#   scripts/gpu_fftmatvec.sh [NT ND NM]      default 1000 1767 1767 (25 GB of complex64 F̂: FFTMatvec
#   runs out of memory on one H200 at the 50 GB shape 1000 2499 2499)
# Builds into build/fftmatvec (tests and Python bindings off, profiling on), then times
# matvec + rmatvec on 1 GPU and on 2 GPUs (grids 1 x 2 and 2 x 1), every phase in single precision
# (-prec SSSSS, strux's float32), each beside strux_dist_bench on the same problem; output under
# $OUT. Its CUDA branch links none of MPI's include paths and its .cpp files need the toolkit's:
# both are passed as compiler flags here. Run on nvidia-h200-x2 on 2026-11-27 (bench/NOTES-dist.md).
set -uo pipefail
ROOT=$PWD
OUT=${OUT:-$ROOT/out/fftmatvec}
mkdir -p "$OUT"
NT=${1:-1000} ND=${2:-1767} NM=${3:-1767}
P=$ROOT/.deps/peers
[ -f "$P/FFTMatvec/CMakeLists.txt" ] || { echo "== no FFTMatvec sources in $P/FFTMatvec"; exit 1; }
# Its per-phase timers accumulate over the 10 warm-up calls and the first call's NCCL set-up, then
# divide by the timed calls only (main.cpp, utils.cpp: seconds / reps): a copy of the sources has
# the timers cleared after the warm-up, so each phase is the mean of the timed calls alone.
SRC=$ROOT/build/fftmatvec-src
rm -rf "$SRC"; cp -r "$P/FFTMatvec" "$SRC"
python3 - "$SRC/src/main.cpp" <<'PY'
import sys
p = sys.argv[1]; s = open(p).read()
loop = "for (int i = 0; i < reps + WARMUP; i++)\n        {\n"
assert loop in s, "FFTMatvec main.cpp changed: its timing loop was not found"
s = s.replace(loop, loop + "            if (i == WARMUP) { for (auto& t : t_list_f) t.clear(); for (auto& t : t_list_fs) t.clear();"
              " cudaDeviceSynchronize(); MPI_Barrier(MPI_COMM_WORLD); t_list[ProfilerTimesFull::FULL].clear();"
              " t_list[ProfilerTimesFull::FULL].start(); }\n", 1)
open(p, "w").write(s)
PY
mkdir -p "$P/root"
for f in "$P"/debs/*.deb; do dpkg -x "$f" "$P/root"; done
H=$P/root/usr/lib/x86_64-linux-gnu/hdf5/openmpi   # include/ and lib/ as links: an HDF5_ROOT
export LD_LIBRARY_PATH=$P/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
# NCCL from torch's wheel: FFTMatvec links "nccl" by name, the wheel has libnccl.so.2 only.
W=$(python3 -c "import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])")
N=$P/nccl; mkdir -p "$N/lib"; ln -sfn "$W/include" "$N/include"
ln -sf "$W/lib/libnccl.so.2" "$N/lib/libnccl.so"; ln -sf "$W/lib/libnccl.so.2" "$N/lib/libnccl.so.2"
export LD_LIBRARY_PATH=$N/lib:$LD_LIBRARY_PATH
MPI_INC=$(mpicxx --showme:compile 2>/dev/null || echo "")
# Its .cpp files include cuda_runtime.h through g++ without the toolkit's include path there.
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(readlink -f "$(which nvcc)")")")}
MPI_INC="$MPI_INC -I$CUDA_HOME/include -I$CUDA_HOME/targets/x86_64-linux/include"
t0=$(date +%s)
if cmake -S "$SRC" -B build/fftmatvec -G Ninja -DENABLE_TESTING=OFF -DBUILD_PYTHON_BINDINGS=OFF \
    -DENABLE_PROFILING=ON -DCUDA_ARCH=90 -DNCCL_ROOT="$N" -DHDF5_ROOT="$H" -DHDF5_NO_FIND_PACKAGE_CONFIG_FILE=ON \
    -DHDF5_C_COMPILER_EXECUTABLE=/bin/false -DHDF5_PREFER_PARALLEL=ON -DHIGHFIVE_UNIT_TESTS=OFF \
    -DHIGHFIVE_EXAMPLES=OFF -DHIGHFIVE_BUILD_DOCS=OFF -DHIGHFIVE_USE_BOOST=OFF \
    -DCMAKE_CXX_FLAGS="$MPI_INC" -DCMAKE_CUDA_FLAGS="$MPI_INC" > "$OUT/build.log" 2>&1 &&
   cmake --build build/fftmatvec --target fft_matvec >> "$OUT/build.log" 2>&1; then
  echo "== FFTMatvec built in $(( $(date +%s) - t0 )) s"
else
  echo "== FFTMatvec build FAILED"; grep -E "error|Error|FAILED" -A3 "$OUT/build.log" | tail -20; exit 1
fi
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -x LD_LIBRARY_PATH ${MPIRUN_ARGS:-})
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU" || true)
A=(-g -Nt "$NT" -Nd "$ND" -Nm "$NM" -prec SSSSS -N 20)
# strux on the same problem and grid right after each FFTMatvec run (float32, space-major like
# FFTMatvec's SOTI vectors, distributed vectors), where the dist benchmark is built.
SB=build/gpu/strux_dist_bench
run_pair() {  # np r c
  echo "== FFTMatvec $1 GPU(s), grid $2 x $3"
  timeout 150 "${MPIRUN[@]}" -np "$1" build/fftmatvec/fft_matvec -pr "$2" -pc "$3" "${A[@]}" > "$OUT/fftmatvec_np$1_$2x$3.txt" 2>&1
  sed 's/\x1b\[[0-9;]*m//g' "$OUT/fftmatvec_np$1_$2x$3.txt" | grep -E "Matvec|Mean Time|GPUassert|rror" | head -12
  if [ -x "$SB" ]; then
    echo "== strux $1 GPU(s), grid $2 x $3"
    timeout 120 "${MPIRUN[@]}" -np "$1" -x PYTHONPATH "$SB" "$NT" "$ND" "$NM" --cuda --grid "$2" "$3" --reps 20 \
      2>&1 | tee "$OUT/strux_np$1_$2x$3.json" | cut -c1-400
  fi
}
if [ -n "${FM_PAIRS:-}" ]; then  # FM_PAIRS="np r c ...": only these runs (a short round)
  set -- $FM_PAIRS
  while [ $# -ge 3 ]; do run_pair "$1" "$2" "$3"; shift 3; done
else
  run_pair 1 1 1
  if [ "$NGPU" -ge 2 ]; then run_pair 2 1 2; run_pair 2 2 1; fi
  if [ "$NGPU" -ge 4 ] && [ -z "${FM_NO4:-}" ]; then run_pair 4 2 2; fi  # FM_NO4: leave the 4-GPU grid out
fi
