#!/usr/bin/env bash
# Instructions per request over HTTPS/1.1 and h2, the Courier C API against the libcurl loop that
# sends the same headers (Benchmarks/README.md, "Transport over HTTPS and HTTP/2"):
#   Benchmarks/callgrind/transport_tls.sh BUILD_DIR [N1 N2]
# BUILD_DIR: a CMake Release build of this checkout with the target courier built. Starts nginx with
# scripts/tls-fixture (nginx from scripts/setup), builds transport_tls.c and prints, per protocol and
# client, (Ir(N2) - Ir(N1)) / (N2 - N1) over every thread of the client process, and the ratio
# loop / Courier. With KEEP=DIR the callgrind files stay in DIR (callgrind_annotate them per
# function).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$(cd "$1" && pwd)
n1=${2:-1000}
n2=${3:-6000}
tmp=$(mktemp -d)
out=${KEEP:-$tmp}
mkdir -p "$out"
nginx_pid=""
cleanup() {
  [ -n "$nginx_pid" ] && kill "$nginx_pid" 2>/dev/null && wait "$nginx_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
${CC:-cc} -O2 -D_GNU_SOURCE -Iinclude -IBenchmarks/CBench/include Benchmarks/callgrind/transport_tls.c \
  Benchmarks/CBench/transport_bench.c Benchmarks/CBench/process.c -o "$tmp/transport_tls" \
  "$build/libcourier.so" -lcurl -lpthread -Wl,-rpath,"$build"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
for proto in https1 h2; do
  mkdir -p "$tmp/$proto"
  bash scripts/tls-fixture "$tmp/$proto" "$port" $([ "$proto" = h2 ] && echo h2) > /dev/null
  nginx -p "$tmp/$proto" -e "$tmp/$proto/error.log" -c "$tmp/$proto/nginx.conf" &
  nginx_pid=$!
  for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break; sleep 0.1; done
  declare -A per
  for client in curl courier; do
    for n in "$n1" "$n2"; do
      valgrind --tool=callgrind --callgrind-out-file="$out/$proto.$client.$n" "$tmp/transport_tls" "$client" "$n" \
        "https://localhost:$port/1k.bin" "$tmp/$proto/ca.pem" > /dev/null 2>&1
    done
    a=$(awk '/^(summary|totals):/ {print $2; exit}' "$out/$proto.$client.$n1")
    b=$(awk '/^(summary|totals):/ {print $2; exit}' "$out/$proto.$client.$n2")
    per[$client]=$(( (b - a) / (n2 - n1) ))
    echo "$proto $client ${per[$client]}"
  done
  echo "$proto curl/courier $(python3 -c "print(round(${per[curl]} / ${per[courier]}, 3))")"
  kill "$nginx_pid"; wait "$nginx_pid" 2>/dev/null || true; nginx_pid=""
done
