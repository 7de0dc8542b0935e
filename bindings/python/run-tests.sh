#!/usr/bin/env bash
# Runs the Python binding's test suite against a fresh build of the C library.
#   1. builds libcourier.so and courier-test-server with CMake into build/py (incremental);
#   2. makes or reuses a virtual environment in build/py-venv (python3 -m venv); without venv,
#      installs into build/py-site and uses PYTHONPATH;
#   3. pip installs ./bindings/python (and pytest, from PyPI when it is missing);
#   4. runs pytest over bindings/python/tests with COURIER_LIBRARY set to the built library.
# Prints pytest's summary line; exits non-zero when a step or a test fails.
# Usage: bash bindings/python/run-tests.sh [pytest arguments...]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

build="$root/build/py"
jobs=$(nproc 2>/dev/null || echo 2)
py=${PYTHON:-python3}

echo "== building libcourier (build/py) =="
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOURIER_BUILD_TESTS=OFF >/dev/null
fi
cmake --build "$build" -j"$jobs" --target courier courier-test-server >/dev/null
lib="$build/libcourier.so"
server="$build/courier-test-server"
[ -f "$lib" ] && [ -x "$server" ] || { echo "run-tests: build did not produce $lib and $server" >&2; exit 1; }

echo "== python environment =="
venv="$root/build/py-venv"
pythonpath=""
if [ -x "$venv/bin/python" ] || "$py" -m venv "$venv" >/dev/null 2>&1; then
  vpy="$venv/bin/python"
  pip=("$vpy" -m pip --disable-pip-version-check -q)
  if ! "$vpy" -c "import pytest" >/dev/null 2>&1; then
    "${pip[@]}" install "pytest>=7"
  fi
  # A setuptools + wheel already in the venv build the package without network (no isolation);
  # otherwise pip fetches the build backend from PyPI.
  if "$vpy" -c "import setuptools, wheel" >/dev/null 2>&1; then
    "${pip[@]}" install --no-build-isolation --no-deps --force-reinstall ./bindings/python
  else
    "${pip[@]}" install --no-deps --force-reinstall ./bindings/python
  fi
else
  echo "run-tests: python3 -m venv is unavailable; installing into build/py-site" >&2
  site="$root/build/py-site"
  vpy="$py"
  rm -rf "$site/courier" "$site"/courier-*.dist-info
  if "$py" -m pip --version >/dev/null 2>&1; then
    pkgs=(./bindings/python)
    "$py" -c "import pytest" >/dev/null 2>&1 || pkgs+=("pytest>=7")
    "$py" -m pip --disable-pip-version-check -q install --target "$site" --upgrade "${pkgs[@]}"
  else
    echo "run-tests: no pip either; testing the source tree" >&2
    mkdir -p "$site" && cp -r bindings/python/courier "$site/"
  fi
  pythonpath="$site"
fi

echo "== pytest =="
export COURIER_LIBRARY="$lib"
export COURIER_TEST_SERVER="$server"
export COURIER_HEADER="$root/include/courier.h"
export COURIER_BUILD_DIR="$build"
set +e
PYTHONPATH="$pythonpath" "$vpy" -m pytest -p no:cacheprovider -q -ra bindings/python/tests "$@"
status=$?
set -e
exit $status
