#!/usr/bin/env bash
# Runs the benchmark (bindings/python/tools/bench.py; not part of the package) with the wheel
# installed into a fresh virtual environment and `requests` next to it (setup-env.sh). Arguments
# go to the benchmark, e.g. --json.
# Usage: bash bindings/python/run-bench.sh [--json] [--runs 3] [--requests 5000] [--concurrency 32]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
# the [bench] extra of pyproject.toml: the peers the benchmark measures Courier against
courier_extra_packages=("requests" "aiohttp" "httpx" "pycurl")
. bindings/python/setup-env.sh >&2
unset COURIER_LIBRARY PYTHONPATH
COURIER_TEST_SERVER="$server" COURIER_SOURCE_DIR="$root" "$vpy" bindings/python/tools/bench.py "$@"
