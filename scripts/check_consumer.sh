#!/usr/bin/env bash
# Lathe in a C++ user's own project (issue 34): tests/consumer/ built out of tree and run, in the
# ways a user takes Lathe in:
#   install     `cmake --install build` into a prefix, then find_package(Lathe) from it
#   pkgconfig   the same prefix through pkg-config and a bare g++ command (no CMake, no linker
#               flags: Tensor's op members and the lazy device register from the headers)
#   subdir      add_subdirectory(<this checkout>) as one shared liblathe.so (BUILD_SHARED_LIBS),
#               with GoogleTest and Google Benchmark made unfindable: a subproject needs neither
#   wheel       `pip wheel .`, installed into a fresh venv, find_package(Lathe) from
#               `python -m lathe --cmake-dir`
# Usage: scripts/check_consumer.sh [BUILD_DIR] [modes...]   (default: build, all four)
# BUILD_DIR is a configured, built tree of this checkout (scripts/setup.sh makes build/). With
# ccache (setup.sh installs it), the subdir and wheel builds compile the library from ccache.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
BUILD="${1:-build}"
shift || true
MODES=("$@")
[ ${#MODES[@]} -eq 0 ] && MODES=(install pkgconfig subdir wheel)
WORK="${LATHE_CONSUMER_WORK:-$ROOT/$BUILD/consumer-check}"
rm -rf "$WORK" && mkdir -p "$WORK"
PREFIX="$WORK/prefix"
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}"
LAUNCHER=()
command -v ccache >/dev/null 2>&1 && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# The compiler build/ was configured with, so that ccache's keys match (see check_pip_install.sh).
CXX_USED="$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$BUILD/CMakeCache.txt")"
export CXX="${CXX:-${CXX_USED:-c++}}"

step() { echo "[consumer] $*" >&2; }
run_consumer() {  # $1: the executable
  local out
  out="$("$1")" || { echo "$out"; step "FAILED: $1"; exit 1; }
  echo "$out"
  grep -q "^consumer OK" <<<"$out"
}
installed() {
  if [ ! -f "$PREFIX/lib/cmake/Lathe/LatheConfig.cmake" ]; then
    step "cmake --install $BUILD --prefix $PREFIX"
    cmake --install "$BUILD" --prefix "$PREFIX" >/dev/null
  fi
}

for mode in "${MODES[@]}"; do
  t0=$(date +%s)
  case "$mode" in
    install)
      installed
      cmake -S tests/consumer -B "$WORK/install" -G Ninja -DCMAKE_BUILD_TYPE=Release \
            -DCMAKE_PREFIX_PATH="$PREFIX" >/dev/null
      ninja -C "$WORK/install" >/dev/null
      run_consumer "$WORK/install/consumer"
      ;;
    pkgconfig)
      installed
      flags="$(PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig" pkg-config --cflags --libs lathe)"
      step "$CXX -O2 tests/consumer/main.cpp $flags"
      # shellcheck disable=SC2086
      "$CXX" -O2 tests/consumer/main.cpp $flags -o "$WORK/consumer_pkgconfig"
      run_consumer "$WORK/consumer_pkgconfig"
      ;;
    subdir)
      # LATHE_WERROR and PIC as in build/, and a build tree at build/'s depth (ccache keys hold
      # paths relative to it), so the library's compile commands are build/'s: ccache hits.
      SUBDIR_BUILD="$ROOT/build-consumer"
      rm -rf "$SUBDIR_BUILD"
      cmake -S tests/consumer -B "$SUBDIR_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
            -DLATHE_CONSUMER_MODE=subdirectory -DLATHE_SOURCE_DIR="$ROOT" -DBUILD_SHARED_LIBS=ON \
            -DLATHE_WERROR=ON -DCMAKE_POSITION_INDEPENDENT_CODE=ON "${LAUNCHER[@]}" \
            -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON >/dev/null
      ninja -C "$SUBDIR_BUILD" consumer | tail -1
      ls "$SUBDIR_BUILD/lathe/liblathe.so" >/dev/null
      run_consumer "$SUBDIR_BUILD/consumer"
      ;;
    wheel)
      PY="${PYTHON:-python3}"
      [ -x "$ROOT/.venv/bin/python" ] && PY="$ROOT/.venv/bin/python"
      # The CMake that configured BUILD_DIR (another version orders the flags differently and
      # ccache misses), else the system's: a pyenv shim fails inside pip's isolated build.
      CMAKE_USED="$(sed -n 's/^CMAKE_COMMAND:INTERNAL=//p' "$BUILD/CMakeCache.txt")"
      if [ -z "${CMAKE_EXECUTABLE:-}" ] && [ -x "$CMAKE_USED" ]; then
        export CMAKE_EXECUTABLE="$CMAKE_USED"
      elif [ -z "${CMAKE_EXECUTABLE:-}" ] && [ -x /usr/bin/cmake ]; then
        export CMAKE_EXECUTABLE=/usr/bin/cmake
      fi
      [ ${#LAUNCHER[@]} -gt 0 ] && export CMAKE_CXX_COMPILER_LAUNCHER=ccache
      step "pip wheel . (build-pip/)"
      "$PY" -m pip wheel -q --no-deps . -w "$WORK/wheel" 2>&1 | tail -5
      "$PY" -m venv "$WORK/venv"
      "$WORK/venv/bin/pip" install -q "$WORK"/wheel/lathe-*.whl
      cmake_dir="$(cd "$WORK" && "$WORK/venv/bin/python" -m lathe --cmake-dir)"
      step "python -m lathe --cmake-dir: $cmake_dir"
      cmake -S tests/consumer -B "$WORK/wheel-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
            -DLathe_DIR="$cmake_dir" >/dev/null
      ninja -C "$WORK/wheel-build" >/dev/null
      run_consumer "$WORK/wheel-build/consumer"
      want="$(sed -n 's/^#define LATHE_VERSION_\(MAJOR\|MINOR\|PATCH\) //p' lathe/base/version.h | paste -sd.)"
      got="$(cd "$WORK" && "$WORK/venv/bin/python" -m lathe --version)"
      [ "$got" = "$want" ] || { step "FAILED: the wheel's lathe.__version__ is $got, lathe/base/version.h says $want"; exit 1; }
      step "the wheel's lathe.__version__ is $got"
      ;;
    *)
      echo "check_consumer.sh: unknown mode '$mode' (install, pkgconfig, subdir, wheel)" >&2
      exit 2
      ;;
  esac
  step "$mode: OK in $(( $(date +%s) - t0 )) s"
done
