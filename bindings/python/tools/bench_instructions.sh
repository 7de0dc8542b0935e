#!/usr/bin/env bash
# Instructions per request of the benchmark's clients (tools/bench.py), for a machine too busy for
# steady rates: each client runs under callgrind twice in its own process, with 1,000 and with
# 3,000 requests (after bench.py's warm-up), and the difference of the two totals over 2,000 is what
# one request costs in this process (user space: Python, the binding, libcourier, libcurl, libc;
# the server is another process, the kernel is not counted). Run it after run-bench.sh (the
# environment build/py-venv with the wheel and the [bench] extra).
# Usage: bash bindings/python/tools/bench_instructions.sh [client ...]
#   (default: courier_py courier_py_ctypes courier_aio courier_aio_ctypes pycurl aiohttp)
# Prints "client instructions_per_request" lines.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$root"
vpy="$root/build/py-venv/bin/python"
server="$root/build/py/courier-test-server"
[ -x "$vpy" ] || { echo "bench_instructions: run bindings/python/run-bench.sh first" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "bench_instructions: valgrind is not installed" >&2; exit 1; }
clients=("$@")
[ ${#clients[@]} -gt 0 ] || clients=(courier_py courier_py_ctypes courier_aio courier_aio_ctypes pycurl aiohttp)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for client in "${clients[@]}"; do
  totals=()
  for n in 1000 3000; do
    COURIER_TEST_SERVER="$server" valgrind --tool=callgrind --callgrind-out-file="$out/cg.%p" \
      "$vpy" bindings/python/tools/bench.py --runs 1 --requests "$n" --clients "$client" --no-c --json \
      >"$out/run.json" 2>"$out/run.err" || { cat "$out/run.err" >&2; exit 1; }
    if grep -q "not installed" "$out/run.err"; then
      echo "$client not installed: skipped"
      continue 2
    fi
    totals+=("$(grep -h '^totals:' "$out"/cg.* | awk '{s += $2} END {printf "%.0f", s}')")
    rm -f "$out"/cg.*
  done
  echo "$client $(( (totals[1] - totals[0]) / 2000 ))"
done
