#!/usr/bin/env bash
# Runs a benchmark (not part of the package) with the wheel installed into a fresh virtual
# environment and its peers next to it (setup-env.sh): bindings/python/tools/bench.py (GETs), or
# with `stream` first, tools/bench_stream.py (WebSocket echo and server-sent events against the
# test server's /ws/echo and /sse). Other arguments go to the benchmark, e.g. --json.
# Usage: bash bindings/python/run-bench.sh [--json] [--runs 3] [--requests 5000] [--concurrency 32]
#        bash bindings/python/run-bench.sh stream [--json] [--runs 5] [--messages 5000] [--events 100000]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
script=bindings/python/tools/bench.py
if [ "${1:-}" = stream ]; then
  script=bindings/python/tools/bench_stream.py
  shift
fi
# the [bench] extra of pyproject.toml: the peers the benchmarks measure Courier against
courier_extra_packages=("requests" "aiohttp" "httpx" "pycurl" "websockets" "httpx-sse")
. bindings/python/setup-env.sh >&2
unset COURIER_LIBRARY PYTHONPATH
COURIER_TEST_SERVER="$server" COURIER_SOURCE_DIR="$root" "$vpy" "$script" "$@"
