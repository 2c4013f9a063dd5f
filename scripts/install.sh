#!/usr/bin/env bash
# Installs what strux needs on a fresh Debian/Ubuntu machine and installs strux itself into
# the virtual environment ./.venv (created here). Idempotent: safe to run again.
#   system: compilers, CMake, Ninja, FFTW, OpenBLAS (OpenMP build), HDF5, GoogleTest, OpenMPI
#   python: numpy, scipy, pytest, h5py, mpi4py, then `pip install .` (scikit-build-core + nanobind)
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && SUDO="sudo"
PKGS="build-essential cmake ninja-build pkg-config libfftw3-dev libopenblas-openmp-dev libhdf5-dev libgtest-dev python3-venv openmpi-bin libopenmpi-dev"
missing=""
for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  echo "== apt-get install$missing"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get install -y -q --no-install-recommends $missing >/dev/null \
    || { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q --no-install-recommends $missing >/dev/null; }
fi

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q numpy scipy pytest h5py hypothesis
# mpi4py from source against the system MPI (strux._dist and mpi4py must share one libmpi).
.venv/bin/python -m pip install -q --no-binary mpi4py mpi4py

# The CUDA backend is compiled whenever nvcc is found; on a machine without a GPU the
# C++ test build (scripts/test.sh) still compiles it, so the Python build can skip it.
CUDA_FLAG="AUTO"
command -v nvidia-smi >/dev/null 2>&1 || CUDA_FLAG="${STRUX_CUDA:-OFF}"
echo "== pip install . (CUDA backend: $CUDA_FLAG)"
.venv/bin/python -m pip install -q . -C cmake.define.STRUX_CUDA="$CUDA_FLAG"
echo "== installed: $(.venv/bin/strux info | head -2 | tr '\n' ' ')"
