#!/usr/bin/env bash
# FFTMatvec (issue 13, Deliver 5) built from source on the GPU machine beside strux, never
# committed: its sources lie in .deps/peers/FFTMatvec (git archive of the upstream mirror, with
# its HighFive submodule's pinned commit unpacked into HighFive/), parallel HDF5 (Debian
# bookworm's libhdf5-openmpi 1.10.8, with libaec0 / libsz2) as .deb files in .deps/peers/debs
# (apt-get download on a machine with apt). No internet is needed here: CUDA, CMake, OpenMPI
# (mpicxx) and torch's nvidia-nccl wheel are on the GPU machine.
#   scripts/gpu_fftmatvec.sh [NT ND NM]      default the strux benchmark's 1000 2499 2499
# Builds into build/fftmatvec (tests and Python bindings off, profiling on), then times
# matvec + rmatvec on 1 GPU and on 2 GPUs (grid 1 x 2), every phase in single precision
# (-prec SSSSS, strux's float32), output under $OUT. Checked on the CPU machine: it configures and
# builds there with CUDA 13 (FFT_mvec links none of MPI's include paths in its CUDA branch:
# they are passed as compiler flags here); not yet run on a GPU.
set -uo pipefail
ROOT=$PWD
OUT=${OUT:-$ROOT/out/fftmatvec}
mkdir -p "$OUT"
NT=${1:-1000} ND=${2:-2499} NM=${3:-2499}
P=$ROOT/.deps/peers
[ -f "$P/FFTMatvec/CMakeLists.txt" ] || { echo "== no FFTMatvec sources in $P/FFTMatvec"; exit 1; }
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
t0=$(date +%s)
if cmake -S "$P/FFTMatvec" -B build/fftmatvec -G Ninja -DENABLE_TESTING=OFF -DBUILD_PYTHON_BINDINGS=OFF \
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
echo "== 1 GPU"; timeout 120 "${MPIRUN[@]}" -np 1 build/fftmatvec/fft_matvec -pr 1 -pc 1 "${A[@]}" 2>&1 | tee "$OUT/np1.txt" | tail -30
if [ "$NGPU" -ge 2 ]; then
  echo "== 2 GPUs, 1 x 2"; timeout 120 "${MPIRUN[@]}" -np 2 build/fftmatvec/fft_matvec -pr 1 -pc 2 "${A[@]}" 2>&1 | tee "$OUT/np2.txt" | tail -30
  echo "== 2 GPUs, 2 x 1"; timeout 120 "${MPIRUN[@]}" -np 2 build/fftmatvec/fft_matvec -pr 2 -pc 1 "${A[@]}" 2>&1 | tee "$OUT/np2_2x1.txt" | tail -30
fi
