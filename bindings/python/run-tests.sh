#!/usr/bin/env bash
# Runs the Python binding's test suite against the installed wheel, as a user would have it:
# setup-env.sh builds the wheel (`pip wheel ./bindings/python`), installs it into a fresh virtual
# environment (build/py-venv) with pytest and mypy, and builds the loopback test server. pytest then
# runs bindings/python/tests with that environment's python: `import courier` is the installed
# package and its libcourier (no PYTHONPATH, no COURIER_LIBRARY; test_package.py checks both).
# The suite runs twice: on the compiled hot path (courier._speedups, which the wheel carries) and on
# the ctypes path (COURIER_PY_SPEEDUPS=0): the behaviour is the same on both (docs/python.md).
# Prints pytest's summary line of each; exits non-zero when a step or a test fails.
# Usage: bash bindings/python/run-tests.sh [pytest arguments...]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

courier_extra_packages=("pytest>=7" "mypy" "matplotlib>=3.5")
. bindings/python/setup-env.sh

unset COURIER_LIBRARY PYTHONPATH COURIER_PY_SPEEDUPS
export COURIER_TEST_SERVER="$server"
export COURIER_HEADER="$root/include/courier.h"
export COURIER_BUILD_DIR="$build"
export COURIER_PY_TOOLS="$tools" COURIER_PY_WHEELHOUSE="$wheelhouse"
# PYTHONSAFEPATH: the working directory (the checkout) is not put on sys.path.
echo "== pytest: the compiled path (courier._speedups) =="
PYTHONSAFEPATH=1 "$vpy" -m pytest -p no:cacheprovider -q -ra bindings/python/tests "$@"
echo "== pytest: the ctypes path (COURIER_PY_SPEEDUPS=0) =="
COURIER_PY_SPEEDUPS=0 PYTHONSAFEPATH=1 "$vpy" -m pytest -p no:cacheprovider -q -ra bindings/python/tests "$@"
