# Sourced (not run) by the GPU scripts, from the repository root, on a GPU machine with the CUDA
# toolkit, CMake, Ninja and Python but no FFTW/BLAS and no internet:
#   - unpacks FFTW and the netlib BLAS from the Debian packages in $DEPS (default .deps/,
#     fetched beforehand by scripts/fetch_gpu_deps.sh) and exports their library path;
#   - exports PYTHONPATH for the developer build (python/ and tests/python/);
#   - builds strux with CUDA for this machine's chip into build/gpu (developer build: _ext lands
#     in python/strux), with any extra CMake arguments in the array GPU_CMAKE_ARGS.
# ROOT defaults to the current directory, OUT to $ROOT/out; gpu_build returns non-zero (after
# printing the errors) when the build fails. Used by scripts/gpu_check.sh and scripts/gpu_focus.sh.
ROOT=${ROOT:-$PWD}
OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"
DEPS=${DEPS:-$ROOT/.deps}
mkdir -p "$DEPS/root"
for f in "$DEPS"/*.deb; do dpkg -x "$f" "$DEPS/root"; done
D=$DEPS/root/usr
LIB=$D/lib/x86_64-linux-gnu
cp -f "$D/include/x86_64-linux-gnu/cblas-netlib.h" "$D/include/x86_64-linux-gnu/cblas.h"
export LD_LIBRARY_PATH=$LIB:$LIB/blas:${LD_LIBRARY_PATH:-}
export PYTHONPATH=$ROOT/python:$ROOT/tests/python PYTHONUNBUFFERED=1

gpu_build() {
  local t0
  t0=$(date +%s)
  rm -f python/strux/_ext*.so
  if cmake -S . -B build/gpu -G Ninja -DSTRUX_CUDA=ON -DSTRUX_BUILD_PYTHON=ON \
      -DPython_EXECUTABLE="$(which python3)" -DFFTW_INCLUDE_DIR="$D/include" -DFFTW_LIB="$LIB/libfftw3.so" \
      -DFFTWF_LIB="$LIB/libfftw3f.so" -DCBLAS_INCLUDE_DIR="$D/include/x86_64-linux-gnu" \
      -DBLAS_LIB="$LIB/blas/libblas.so.3" \
      -DSTRUX_CUDA_GENCODE="${STRUX_CUDA_GENCODE:--gencode=arch=compute_90a,code=sm_90a}" \
      "${GPU_CMAKE_ARGS[@]}" >> "$OUT/build.log" 2>&1 && cmake --build build/gpu >> "$OUT/build.log" 2>&1; then
    echo "== build ok in $(( $(date +%s) - t0 )) s"
  else
    echo "== build failed"; grep -E "error|FAILED" -A5 "$OUT/build.log" | tail -30; return 1
  fi
}
