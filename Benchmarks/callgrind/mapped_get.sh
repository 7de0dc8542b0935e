#!/usr/bin/env bash
# The response path's cost (docs/design/json.md, "Mapping on the tape"): instructions per mapped GET under
# callgrind, and `courier bench mapping`'s C figures by wall clock.
#   Benchmarks/callgrind/mapped_get.sh BUILD_DIR [before]
# BUILD_DIR: a Release CMake build (targets courier and courier_test_server) of the checkout the
# script is in; "before": that checkout has no courier_response_result_tape (mapped_get.c built with
# -DBEFORE, only the courier_response_data reads). Prints, per workload (net: GET /json of the
# loopback server, key path data.items, a 2-field mapping; mock: a mocked 1 MB answer, 5,000 objects
# mapped by the 10-field mapping) and read (data: courier_response_data; tape:
# courier_response_result_tape), (Ir(N2) - Ir(N1)) / (N2 - N1); then mapping_mbps (medians of 11 runs).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$(cd "$1" && pwd)
before=${2:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
def=()
reads=(data tape)
if [ "$before" = before ]; then def=(-DBEFORE); reads=(data); fi
${CC:-cc} -O2 "${def[@]}" -Iinclude -ITests/TestServer/include -IBenchmarks/CBench/include \
  Benchmarks/callgrind/mapped_get.c Benchmarks/CBench/mapping_bench.c -o "$tmp/mapped_get" \
  "$build/libcourier.so" "$build/libcourier_test_server.a" $(pkg-config --libs jansson libcrypto) -lpthread -Wl,-rpath,"$build"
${CC:-cc} -O2 -Iinclude -IBenchmarks/CBench/include Benchmarks/callgrind/mapping_mbps.c Benchmarks/CBench/mapping_bench.c \
  -o "$tmp/mapping_mbps" "$build/libcourier.so" $(pkg-config --libs jansson) -Wl,-rpath,"$build"
ir() {
  valgrind --tool=callgrind --callgrind-out-file="$tmp/out" "$tmp/mapped_get" "$@" > /dev/null 2>&1
  awk '/^(summary|totals):/ {print $2; exit}' "$tmp/out"
}
for work in net mock; do
  if [ "$work" = net ]; then n1=100; n2=500; else n1=1; n2=3; fi
  for read in "${reads[@]}"; do
    a=$(ir "$work" "$n1" "$read")
    b=$(ir "$work" "$n2" "$read")
    echo "$work $read $(( (b - a) / (n2 - n1) ))"
  done
done
"$tmp/mapping_mbps" 11
