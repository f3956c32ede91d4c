#!/usr/bin/env bash
# Installs what Lathe needs (Debian packages, the Python venv) and builds it. Skips what is
# already there. Usage: scripts/setup.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build}"

# ccache: the consumer checks (tests/consumer/) rebuild the library out of tree from the same
# sources and reuse build/'s objects. zlib, libjpeg-turbo and libpng: lathe/data's readers.
APT_PACKAGES=(cmake ninja-build g++ libdnnl-dev libgtest-dev libbenchmark-dev nlohmann-json3-dev
              clang-format python3-venv python3-dev libgloo-dev ccache zlib1g-dev
              libjpeg62-turbo-dev libpng-dev pkg-config)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[setup] installing Debian packages: ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Python: torch is the oracle and the peer benchmark; a CPU build of 2.13.0 is on local disk.
# nanobind builds the Python extension lathe._C (python/) inside this same build.
PY_PACKAGES=(torch==2.13.0 numpy safetensors pytest onnx==1.23.1 onnxruntime==1.30.0 nanobind)
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv" >&2
  python3 -m venv .venv
fi
if ! .venv/bin/python -c "import torch, numpy, safetensors, pytest, onnx, onnxruntime, nanobind" 2>/dev/null; then
  echo "[setup] installing Python packages: ${PY_PACKAGES[*]}" >&2
  .venv/bin/pip install -q "${PY_PACKAGES[@]}"
fi

# cmake from pip (pyenv shims) or Debian's: either is >= 3.20.
# The Python extension is part of the build (LATHE_PYTHON_BINDINGS): an older build dir without
# it is reconfigured once.
if [ ! -f "$BUILD_DIR/build.ninja" ] || \
   ! grep -q '^LATHE_PYTHON_BINDINGS:BOOL=ON' "$BUILD_DIR/CMakeCache.txt" 2>/dev/null; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLATHE_PYTHON_BINDINGS=ON \
        -DLATHE_PYTHON="$(pwd)/.venv/bin/python" -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
fi
# ccache's keys relative to the checkout, so another build tree of these sources hits.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(pwd)}"
echo "[setup] building in $BUILD_DIR" >&2
ninja -C "$BUILD_DIR" "${@:2}"
