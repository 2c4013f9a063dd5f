#!/usr/bin/env bash
# Downloads FFTW and netlib BLAS as Debian packages into .deps/ (git-ignored), so that
# scripts/gpu_check.sh can build strux's CPU backend on a GPU machine that has no internet
# and no package manager access. Run it on a Debian/Ubuntu machine with apt, then carry .deps.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .deps
cd .deps
apt-get download libfftw3-dev libfftw3-single3 libfftw3-double3 libblas3 libblas-dev
ls -l *.deb
