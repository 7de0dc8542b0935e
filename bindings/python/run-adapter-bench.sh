#!/usr/bin/env bash
# The adapters' benchmark (bindings/python/tools/bench_adapters.py; not part of the package): httpx
# with its own transport vs courier.httpx's, requests with its own adapter vs courier.requests', in
# one process, medians of several runs, ratios. The wheel and httpx/requests go into a fresh virtual
# environment (setup-env.sh). Arguments go to the script, e.g. --json --runs 5.
# Usage: bash bindings/python/run-adapter-bench.sh [--json] [--runs 5] [--requests 2000] [--concurrency 16]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
courier_extra_packages=("httpx" "requests")
. bindings/python/setup-env.sh >&2
unset COURIER_LIBRARY PYTHONPATH
COURIER_TEST_SERVER="$server" "$vpy" bindings/python/tools/bench_adapters.py "$@"
