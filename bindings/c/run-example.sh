#!/usr/bin/env bash
# Installs libcourier from a CMake build into a temporary prefix, builds bindings/c/example.c
# against the installed copy with `pkg-config --cflags --libs courier`, and runs it against the
# loopback test server. Run by ctest (test c_example_pkgconfig) or by hand:
#   bash bindings/c/run-example.sh BUILD_DIR [extra compiler flags...]
# Exit status 0 when the example builds, runs and prints what it should.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: run-example.sh BUILD_DIR [CFLAGS...]}" && pwd)
shift
extra=("$@")
cc=${CC:-cc}

tmp=$(mktemp -d)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then
    exec {hold}>&- 2>/dev/null || true   # the server's stdin reaches EOF: it exits
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# 1. install (the library targets must be built; a no-op when they are)
cmake --build "$build" --target courier courier_static courier-test-server >/dev/null
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
pcdir=$(dirname "$(find "$tmp/prefix" -name courier.pc | head -n1)")
[ -f "$pcdir/courier.pc" ] || { echo "run-example: courier.pc was not installed" >&2; exit 1; }

# 2. build with pkg-config. courier.pc names the configured prefix; point it at the temporary one.
export PKG_CONFIG_PATH="$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
flags=$(pkg-config --define-variable=prefix="$tmp/prefix" --cflags --libs courier)
libdir=$(pkg-config --define-variable=prefix="$tmp/prefix" --variable=libdir courier)
case "$flags" in *"$tmp/prefix"*) ;; *) echo "run-example: pkg-config flags do not name the install: $flags" >&2; exit 1 ;; esac
# shellcheck disable=SC2086
"$cc" -std=c11 -Wall -Wextra -Werror ${extra[@]+"${extra[@]}"} "$here/example.c" $flags -Wl,-rpath,"$libdir" \
  -o "$tmp/example"
# the example must run against the installed library, not the build tree
if command -v ldd >/dev/null 2>&1; then
  # (read all of ldd's output first: `grep -q` closing the pipe early fails the pipeline under pipefail)
  linked=$(ldd "$tmp/example")
  case "$linked" in *"$libdir/libcourier.so"*) ;; *) echo "run-example: not linked to the install" >&2; echo "$linked" >&2; exit 1 ;; esac
fi

# 3. run against the test server. Its stdin is a FIFO only this script holds open, so it exits
#    when the script does, however the script ends.
mkfifo "$tmp/server-in"
exec {hold}<>"$tmp/server-in"
"$build/courier-test-server" --stdin-eof <"$tmp/server-in" >"$tmp/port" &
server_pid=$!
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.05; done
read -r port <"$tmp/port"
out=$("$tmp/example" "http://127.0.0.1:$port" "$tmp/store")
echo "$out"
expect() {
  grep -qx "$1" <<<"$out" || { echo "run-example: expected the line '$1'" >&2; exit 1; }
}
expect "first.status=200"
expect "first.from_cache=0"
expect "second.from_cache=1"
expect "second.body=shared"
expect "json.data.name=courier"
expect "frozen.count=0"
expect "cache.count=1"
echo "run-example: ok"
