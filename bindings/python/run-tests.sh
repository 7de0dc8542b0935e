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

courier_extra_packages=("pytest>=7" "matplotlib>=3.5")
. bindings/python/setup-env.sh

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
