#!/usr/bin/env bash
# Instructions per operation under callgrind, for the "speed must not move" checks (Benchmarks/README.md):
#   Benchmarks/callgrind/run.sh BUILD_DIR [N1 N2]
# BUILD_DIR: a CMake build of this checkout (Release: -DCMAKE_BUILD_TYPE=Release) with the targets
# courier and courier_test_server built. Builds driver.c against it and prints, for each mode
# (request: a GET over the loopback server; cache: a GET a cache-first entry answers; get:
# courier_cache_get_key), (Ir(N2) - Ir(N1)) / (N2 - N1): the instructions of one operation, every
# thread counted, set-up and tear-down cancelled out.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$(cd "$1" && pwd)
n1=${2:-100}
n2=${3:-1100}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
${CC:-cc} -O2 -Iinclude -ITests/TestServer/include Benchmarks/callgrind/driver.c -o "$tmp/driver" \
  "$build/libcourier.so" "$build/libcourier_test_server.a" -lcrypto -lpthread -Wl,-rpath,"$build"
ir() {
  valgrind --tool=callgrind --callgrind-out-file="$tmp/out" "$tmp/driver" "$1" "$2" > /dev/null 2>&1
  awk '/^(summary|totals):/ {print $2; exit}' "$tmp/out"
}
for mode in request cache get; do
  a=$(ir "$mode" "$n1")
  b=$(ir "$mode" "$n2")
  echo "$mode $(( (b - a) / (n2 - n1) ))"
done
