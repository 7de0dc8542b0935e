#!/usr/bin/env bash
# Where the replay's wall time goes, per thread (docs/DESIGN.md, "Where replay's time goes"):
#   Benchmarks/callgrind/frozen_threads.sh BUILD_DIR [N]
# BUILD_DIR: a Release CMake build of this checkout (targets courier and courier-test-server).
# Freezes N (default 20000) POSTs (not measured), then runs the replay of them (8 in flight, a
# listener on the events) and N plain sends (8 in flight) under threads.py, which prints each
# client thread's and each server thread's CPU time, time waiting for a CPU, and context switches
# (the worker is the thread with the most CPU; the journal thread the one with ~1,000+ voluntary
# switches in the replay). Linux only (/proc/PID/task/TID/schedstat).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$(cd "$1" && pwd)
n=${2:-20000}
tmp=$(mktemp -d)
cleanup() { exec 4>&- 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
${CC:-cc} -O2 -Iinclude -IBenchmarks/CBench/include Benchmarks/callgrind/frozen_replay.c \
  Benchmarks/CBench/frozen_bench.c Benchmarks/CBench/transport_bench.c -o "$tmp/driver" \
  "$build/libcourier.so" -llmdb -lcurl -lpthread -Wl,-rpath,"$build"
mkfifo "$tmp/in"
"$build/courier-test-server" --stdin-eof < "$tmp/in" > "$tmp/port" &
server=$!
exec 4> "$tmp/in"
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.05; done
url="http://127.0.0.1:$(head -1 "$tmp/port")/status/200"
"$tmp/driver" freeze "$tmp/s" "$url" "$n"
echo "== replay of $n (load $(cut -d' ' -f1-3 /proc/loadavg))"
SERVER_PID=$server python3 Benchmarks/callgrind/threads.py "$tmp/driver" replay "$tmp/s"
echo "== transport, $n (load $(cut -d' ' -f1-3 /proc/loadavg))"
SERVER_PID=$server python3 Benchmarks/callgrind/threads.py "$tmp/driver" transport "$url" "$n"
