#!/usr/bin/env bash
# Installs everything (scripts/install.sh) and runs the whole test suite:
# the C++ GoogleTest suite (CUDA code compiled too when nvcc is present) and pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh

echo "== C++ build and tests"
cmake -S . -B build/tests -G Ninja -DSTRUX_BUILD_TESTS=ON -DSTRUX_CUDA="${STRUX_CUDA:-AUTO}" >/dev/null
cmake --build build/tests
ctest --test-dir build/tests --output-on-failure -j 2

echo "== C++ package: install build/tests, build and run the README's first cpp example against it"
pkg="$(mktemp -d)"
cmake --install build/tests --prefix "$pkg/prefix" >/dev/null
mkdir -p "$pkg/example"
awk '/^```cpp/{f=1;next} /^```/{if(f)exit} f' README.md >"$pkg/example/main.cpp"
awk '/^```cmake/{f=1;next} /^```/{if(f)exit} f' README.md >"$pkg/example/CMakeLists.txt"
cmake -S "$pkg/example" -B "$pkg/build" -G Ninja -DCMAKE_PREFIX_PATH="$pkg/prefix" >/dev/null
cmake --build "$pkg/build" >/dev/null
"$pkg/build/example"
rm -rf "$pkg"

echo "== Python tests (installed package in .venv)"
# Run from tests/ so that `import strux` finds the installed package, not python/strux.
.venv/bin/python -m pytest -q -p no:cacheprovider tests/python
.venv/bin/strux verify

echo "== Example: the inverse problem, small (smoke run, well under a minute)"
ex_out="$(mktemp -d)"
.venv/bin/python examples/inverse_problem/run.py --small --out "$ex_out" >/dev/null
rm -rf "$ex_out"
