#!/usr/bin/env bash
# Runs `python -m courier.bench` (see courier/bench.py) with the library built into build/py and
# `requests` installed next to the binding. Arguments go to the benchmark, e.g. --json.
# Usage: bash bindings/python/run-bench.sh [--json] [--runs 3] [--requests 5000] [--concurrency 32]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
courier_extra_packages=("requests")
. bindings/python/setup-env.sh >&2
COURIER_LIBRARY="$lib" COURIER_TEST_SERVER="$server" COURIER_SOURCE_DIR="$root" PYTHONPATH="$pythonpath" \
  "$vpy" -m courier.bench "$@"
