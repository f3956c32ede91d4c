#!/usr/bin/env bash
# Runs every test: C++ tests through CTest (incl. the PyTorch oracle), Python tests through pytest,
# and the safetensors fuzz test under AddressSanitizer. Installs and builds what it needs first.
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh build
# No test reads or writes the user's measurement cache (~/.cache/lathe): it is off, and pointed
# into the build tree (ctest sets the same per test; the cache's own tests use temporary folders).
export LATHE_CACHE=0 LATHE_CACHE_DIR="$(pwd)/build/test-cache"
# Tests run side by side on a busy machine: no thread count chosen from call times (CMakeLists.txt).
export LATHE_CPU_ADAPTIVE_THREADS=0

echo "== ctest ==" >&2
(cd build && ctest --output-on-failure -j2 --timeout 1500)

echo "== pytest ==" >&2
.venv/bin/python -m pytest -q tests/oracle

# The Python package (lathe._C from the build above, python/lathe copied beside it) and the
# torch.compile backend. LATHE_PY_LONG=1 runs the models at full size.
echo "== pytest: Python package ==" >&2
PYTHONPATH="$(pwd)/build/python" .venv/bin/python -m pytest -q tests/python

# Lathe in a C++ user's project: tests/consumer/ against the installed prefix (CMake and
# pkg-config), as an add_subdirectory (shared liblathe.so, no GoogleTest) and from the wheel.
echo "== C++ consumer project ==" >&2
scripts/check_consumer.sh build

if [ -d tests/io ] && ls tests/io/*.cpp >/dev/null 2>&1; then
  echo "== safetensors fuzz under AddressSanitizer ==" >&2
  if [ ! -f build-asan/build.ninja ]; then
    cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLATHE_ASAN=ON >/dev/null
  fi
  ninja -C build-asan test_io
  ASAN_OPTIONS=detect_leaks=1 build-asan/test_io --gtest_filter='*Fuzz*:*fuzz*:SafetensorsUntrusted.*:SafetensorsErrors.*'
fi
