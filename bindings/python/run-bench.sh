#!/usr/bin/env bash
# Runs a benchmark (not part of the package) with the wheel installed into a fresh virtual
# environment and its peers next to it (setup-env.sh): bindings/python/tools/bench.py (GETs), or
# with `stream` first, tools/bench_stream.py (WebSocket echo against the echo peer courier-ws-echo,
# built here on Linux, and server-sent events against the test server's /sse). Other arguments go
# to the benchmark, e.g. --json.
# Usage: bash bindings/python/run-bench.sh [--json] [--runs 3] [--requests 5000] [--concurrency 32]
#        bash bindings/python/run-bench.sh stream [--json] [--runs 5] [--messages 5000] [--events 100000]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
script=bindings/python/tools/bench.py
stream=
if [ "${1:-}" = stream ]; then
  script=bindings/python/tools/bench_stream.py
  stream=1
  shift
fi
# the [bench] extra of pyproject.toml: the peers the benchmarks measure Courier against
courier_extra_packages=("requests" "aiohttp" "httpx" "pycurl" "websockets" "httpx-sse")
. bindings/python/setup-env.sh >&2
unset COURIER_LIBRARY PYTHONPATH
# the WebSocket rows' echo peer (Tests/TestServer/tool/ws_echo.c; Linux), built beside the server
ws_echo=
if [ -n "$stream" ] && [ "$(uname -s)" = Linux ]; then
  nice cmake --build "$build" -j"$jobs" --target courier-ws-echo >/dev/null
  ws_echo="$build/courier-ws-echo"
fi
COURIER_TEST_SERVER="$server" COURIER_WS_ECHO="$ws_echo" COURIER_SOURCE_DIR="$root" "$vpy" "$script" "$@"
