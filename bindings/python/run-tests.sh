#!/usr/bin/env bash
# Runs the Python binding's test suite against the installed wheel, as a user would have it:
# setup-env.sh builds the wheel (`pip wheel ./bindings/python`), installs it into a fresh virtual
# environment (build/py-venv) with pytest and mypy, and builds the loopback test server. pytest then
# runs bindings/python/tests with that environment's python: `import courier` is the installed
# package and its libcourier (no PYTHONPATH, no COURIER_LIBRARY; test_package.py checks both).
# The suite runs twice: on the compiled hot path (courier._speedups, which the wheel carries) and on
# the ctypes path (COURIER_PY_SPEEDUPS=0): the behaviour is the same on both (docs/python.md).
# Then, the same wheel (cp39-abi3: one wheel for every CPython >= 3.9) is installed into a fresh
# environment of each other CPython listed in COURIER_PY_OTHER_VERSIONS (default "3.12 3.13": the
# C API changed under the binding there, e.g. the GIL-state binding of deleted thread states,
# test_thread_states.py) found under pyenv ($PYENV_ROOT or ~/.pyenv, versions/X.Y.*/bin/python3),
# and the tests whose callbacks run on the engine's threads (COURIER_PY_OTHER_TESTS) run there on both paths; a
# version that is not installed is skipped with a note. COURIER_PY_OTHER_TESTS=all runs the whole
# suite there (about 40 s a pass); COURIER_PY_OTHER_VERSIONS= (empty) skips this step.
# Prints pytest's summary line of each; exits non-zero when a step or a test fails.
# Usage: bash bindings/python/run-tests.sh [pytest arguments...]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

courier_extra_packages=("pytest>=7" "mypy" "matplotlib>=3.5" "websockets" "httpx" "requests" "opentelemetry-api" "opentelemetry-sdk")
# websockets: the peer of test_websocket.py; httpx, requests, opentelemetry-api: the optional extras
# [httpx], [requests], [otel] (tests/test_httpx.py, test_requests_adapter.py, test_otel.py);
# opentelemetry-sdk: the tests' tracer provider only, never an extra
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

# Other CPythons: the same wheel, pytest from the wheelhouse (no network), both paths.
# the tests whose callbacks run on the engine's threads (worker, journal) or cross to the caller's
other_tests=${COURIER_PY_OTHER_TESTS:-test_thread_states.py test_callbacks.py test_user_errors.py test_async.py \
  test_aio.py test_groups.py test_transport.py test_logging.py test_frozen.py test_resend_policies.py}
[ "$other_tests" = all ] && other_tests=.
other_paths=()
for t in $other_tests; do other_paths+=("bindings/python/tests/$t"); done
for ver in ${COURIER_PY_OTHER_VERSIONS-3.12 3.13}; do
  opy=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$ver".*/bin/python3 2>/dev/null | sort -V | tail -1 || true)
  if [ -z "$opy" ] || ! "$opy" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$ver'.split('.'))))" 2>/dev/null; then
    echo "== CPython $ver: not installed (${PYENV_ROOT:-$HOME/.pyenv}/versions/$ver.*/bin/python3): skipped =="
    continue
  fi
  oenv="$root/build/py-venv-$ver"
  "$opy" -m venv --clear "$oenv"
  "$oenv/bin/python" -m pip "${pipq[@]}" install --no-index --find-links "$wheelhouse" "$wheel" "pytest>=7"
  over=$("$oenv/bin/python" -c "import platform; print(platform.python_version())")
  echo "== pytest on CPython $over: the compiled path (courier._speedups) =="
  PYTHONSAFEPATH=1 "$oenv/bin/python" -m pytest -p no:cacheprovider -q -ra "${other_paths[@]}" "$@"
  echo "== pytest on CPython $over: the ctypes path (COURIER_PY_SPEEDUPS=0) =="
  COURIER_PY_SPEEDUPS=0 PYTHONSAFEPATH=1 "$oenv/bin/python" -m pytest -p no:cacheprovider -q -ra "${other_paths[@]}" "$@"
done
